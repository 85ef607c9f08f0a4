"""A candidate's score from its signals. Deterministic, in [0, 1] before REM's boost.

Weights: how many sessions said it (0.35) and on how many days (0.20) - repetition across
conversations is the strongest sign a fact lasts; how recent it is on the agent's own clock
(0.20, halving every `half_life_days`); who said it (0.15: the owner counts fully, the agent
half, untrusted and system sources not at all); a durability cue such as "remember" or
"always" (0.10).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

W_SESSIONS, W_DAYS, W_RECENCY, W_ORIGIN, W_CUE = 0.35, 0.20, 0.20, 0.15, 0.10
SATURATION = 5  # sessions or days beyond this add nothing more
ORIGIN_WEIGHT = {"owner": 1.0, "agent": 0.5, "untrusted": 0.0, "system": 0.0}


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


def score(s: Signals, clock: datetime | None, half_life_days: float) -> float:
    total_lines = s.owner_lines + s.agent_lines + s.untrusted_lines + s.system_lines
    origin = (
        (s.owner_lines * ORIGIN_WEIGHT["owner"] + s.agent_lines * ORIGIN_WEIGHT["agent"])
        / total_lines
        if total_lines
        else 0.0
    )
    if clock is None or s.last_seen is None:
        recency = 1.0
    else:
        age_days = max((clock - s.last_seen).total_seconds(), 0.0) / 86400
        recency = 0.5 ** (age_days / half_life_days)
    value = (
        W_SESSIONS * min(s.sessions, SATURATION) / SATURATION
        + W_DAYS * min(s.days, SATURATION) / SATURATION
        + W_RECENCY * recency
        + W_ORIGIN * origin
        + W_CUE * (1.0 if s.durable_cue else 0.0)
        + s.rem_boost
    )
    return round(value, 6)
