"""A candidate's score from its signals. Deterministic; about [0, 1.5] before REM's boost.

What a claim tells comes first: its salience (`dreaming.ingest.salience`: instructions, events,
disclosures, facts, names, numbers, time words) plus the rarity of its words within the
agent's own corpus (W_RARITY), per character: every character of an entry is paid on every
turn the agent reads MEMORY.md, so of two claims that tell as much the shorter ranks higher
(`density`). That is scaled by who said it (the owner fully, the agent alone half, its
narration, untrusted and system sources not at all) and, lightly, by how recent it is on the
agent's own clock (W_RECENCY). Repetition across sessions and days only corroborates: it
adds up to W_CORROBORATION, and only to a claim that tells something. Small talk, one-off
requests, banners and fragments score 0 however often they recur.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from dreaming.ingest.admission import OriginClass
from dreaming.ingest.salience import ZEROING, Feature

W_RARITY, W_RECENCY, W_CORROBORATION = 0.75, 0.10, 0.10
# Density: (REFERENCE_CHARS / (characters + FRAMING_CHARS)) ** 0.5, so an 80-character
# claim counts as it is, a 20-character one 1.4 times, a 200-character one 0.7 times.
REFERENCE_CHARS, FRAMING_CHARS = 120, 40
SATURATION = 4  # further sessions or days beyond this corroborate nothing more
ORIGIN_WEIGHT = {
    OriginClass.OWNER: 1.0,
    OriginClass.AGENT: 0.5,
    OriginClass.UNTRUSTED: 0.0,
    OriginClass.SYSTEM: 0.0,
}


@dataclass(frozen=True, slots=True)
class Signals:
    sessions: int
    days: int
    owner_lines: int
    agent_lines: int
    untrusted_lines: int
    system_lines: int
    last_seen: datetime | None
    durable_cue: bool
    rem_boost: float = 0.0
    salience: float = 0.0
    features: frozenset[Feature] = frozenset()
    rarity: float = 0.0
    chars: int = 80  # the claim's length in characters


def speaker_weight(s: Signals) -> float:
    """The owner's word counts fully; the agent alone half (its narration not at all)."""
    if s.owner_lines:
        return ORIGIN_WEIGHT[OriginClass.OWNER]
    if s.agent_lines:
        return 0.0 if Feature.NARRATION in s.features else ORIGIN_WEIGHT[OriginClass.AGENT]
    return 0.0


def score(s: Signals, clock: datetime | None, half_life_days: float) -> float:
    if s.features & ZEROING:
        return 0.0
    info = (s.salience + W_RARITY * s.rarity) * density(s.chars)
    weight = speaker_weight(s)
    if info <= 0.0 or weight <= 0.0:
        return 0.0
    if clock is None or s.last_seen is None:
        recency = 1.0
    else:
        age_days = max((clock - s.last_seen).total_seconds(), 0.0) / 86400
        recency = 0.5 ** (age_days / half_life_days)
    corroboration = (min(s.sessions - 1, SATURATION) + min(s.days - 1, SATURATION)) / (
        2 * SATURATION
    )
    value = (
        info * weight * (1.0 - W_RECENCY + W_RECENCY * recency)
        + W_CORROBORATION * max(corroboration, 0.0)
        + s.rem_boost
    )
    return round(value, 6)


def density(chars: int) -> float:
    return math.sqrt(REFERENCE_CHARS / (max(chars, 1) + FRAMING_CHARS))


class Rarity:
    """How rare a claim's words are in the agent's own corpus: the mean inverse document
    frequency of its content tokens over all candidates, scaled to [0, 1]. Words of small
    talk recur everywhere; the words that carry a fact ("peanuts", "Tokyo") are rare."""

    def __init__(self, documents: Iterable[Iterable[str]]) -> None:
        self.df: dict[str, int] = {}
        self.n = 0
        df = self.df
        for tokens in documents:
            self.n += 1
            for t in tokens:
                df[t] = df.get(t, 0) + 1
        self._norm = math.log(self.n + 1) if self.n else 1.0

    def of(self, tokens: Iterable[str]) -> float:
        df, n = self.df, self.n
        values = [math.log((n + 1) / (df.get(t, 0) + 1)) for t in tokens]
        if not values or n < 2:
            return 0.0
        return round(min(max(sum(values) / len(values) / self._norm, 0.0), 1.0), 6)
