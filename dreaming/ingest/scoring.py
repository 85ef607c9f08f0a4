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

The score ranks; it does not decide what deep may keep. Rarity and recency move with the
corpus and the clock (a new agent's words are all equally rare; a one-night read of six
weeks makes early statements old), so deep's gate reads `clarity` instead: what the
statement's text and its speaker alone earn, on the same scale. A clear statement (`clear`:
a standing instruction, a constraint, a fact, a disclosure or an event with a specific
detail, or the speaker telling what happened to them in enough words to say what) earns
W_CLEAR where the score has its rarity, so it clears deep's default gate (`deep.min_score`)
on any agent, however much else it heard, whenever it is read. A statement the text does not
make clear earns its salience alone, which no default gate lets through, however rare its
words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from dreaming.ingest.admission import OriginClass
from dreaming.ingest.salience import ZEROING, Feature, default_lexicon, telling

W_RARITY, W_RECENCY, W_CORROBORATION = 0.75, 0.10, 0.10
# What a clear statement earns in `clarity` where the score has W_RARITY * rarity: as much.
W_CLEAR = W_RARITY
# A standing rule to the agent, or a need it must respect: clear as said.
RULES = frozenset({Feature.INSTRUCTION, Feature.CONSTRAINT})
# What a statement tells about someone or something: the speaker about themselves, a
# relation (works at, lives in, runs on, is called), something that happened ...
KINDS = frozenset({Feature.DISCLOSURE, Feature.FACT, Feature.EVENT})
# ... and the specific details that make it clear.
DETAILS = frozenset({Feature.NAMES, Feature.NUMBERS, Feature.TIME})
NAMED = frozenset({Feature.NAMES, Feature.NUMBERS})
# A relation (a fact: works at, lives in, runs on, is called) carries its value, so it is
# clear as said. A detail makes a statement clear only beside what it is a detail of, in
# telling words (`telling_words`: what is left once small talk and thin words, the light
# verbs, vague nouns, appraisals and time words, are gone): a name or a number beside one
# ("Last week, I got a new Ferrari!"), a time word beside DETAIL_WORDS ("Yesterday I took the
# kids to the museum"; "We had a great time last weekend" and "I took it at the beach last
# month" say when, not what). Without a detail, the speaker telling what happened to them or
# what they like (a disclosure that is an event or a preference: "I took a dog grooming
# course") is clear in EVENT_WORDS telling words; fewer do not say what ("I got it because
# it reminded me of something I love").
DETAIL_WORDS = 2
EVENT_WORDS = 3
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


def speaker_weight(owner_lines: int, agent_lines: int, features: frozenset[Feature]) -> float:
    """The owner's word counts fully; the agent alone half (its narration not at all)."""
    if owner_lines:
        return ORIGIN_WEIGHT[OriginClass.OWNER]
    if agent_lines:
        return 0.0 if Feature.NARRATION in features else ORIGIN_WEIGHT[OriginClass.AGENT]
    return 0.0


def clear(features: frozenset[Feature], words: int) -> bool:
    """Whether the text makes the statement clear: a rule or a constraint; a fact (a relation
    and its value); a disclosure or an event with a name or a number and a telling word
    (`words`), or a time word and DETAIL_WORDS of them; or the speaker telling what happened
    to them or what they like (a disclosure that is an event or a preference) in at least
    EVENT_WORDS telling words. Talk about the task at hand (TECHNICAL) is clear only as a
    rule or a named fact; what zeroes a claim never is."""
    if features & ZEROING:
        return False
    if features & RULES:
        return True
    kinds = features & KINDS
    if not kinds:
        return False
    if Feature.FACT in kinds:
        # A named fact stays one with an identifier in it ("The staging bucket is called
        # acme_stage_assets"): a technical word does not make it task talk.
        return True
    if Feature.TECHNICAL in features:
        return False
    if features & NAMED and words >= 1:
        return True
    if Feature.TIME in features and words >= DETAIL_WORDS:
        return True
    return len(kinds | (features & {Feature.PREFERENCE})) >= 2 and words >= EVENT_WORDS


def telling_words(tokens: Iterable[str]) -> int:
    """How many of a claim's content tokens tell something (`salience.telling`, with the
    built-in lexicon): not the negation mark, not the words of small talk ("awesome",
    "thanks"), not thin words ("got", "time", "last", "weekend")."""
    return telling(tokens, default_lexicon())


def clarity(
    salience: float,
    features: frozenset[Feature],
    words: int,
    owner_lines: int,
    agent_lines: int,
) -> float:
    """What deep's gate compares with `deep.min_score`: the statement's salience, plus W_CLEAR
    when it is clear (`words`: its telling words), scaled by who said it. A function of the
    text and its speaker only: no rarity, recency, corroboration, density or REM boost, so
    neither the size of the corpus nor the schedule it was read on moves a verdict."""
    if features & ZEROING or salience <= 0.0:
        return 0.0
    weight = speaker_weight(owner_lines, agent_lines, features)
    value = (salience + (W_CLEAR if clear(features, words) else 0.0)) * weight
    return round(value, 6)


def score(s: Signals, clock: datetime | None, half_life_days: float) -> float:
    if s.features & ZEROING:
        return 0.0
    info = (s.salience + W_RARITY * s.rarity) * density(s.chars)
    weight = speaker_weight(s.owner_lines, s.agent_lines, s.features)
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
