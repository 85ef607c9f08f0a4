"""Deep's gates: which pending candidates may be promoted, and what holds the others back.

One pure function over a candidate's stored signals, so deep's selection, `dreaming
candidates` and the benchmarks all name the same gate for the same candidate.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from dreaming.config import DeepSettings


class Gate(StrEnum):
    """Why a candidate is not promoted tonight, in the order the gates are checked."""

    DECIDED = "decided"  # decided before, and no new evidence since
    NO_SPEAKER = "no-speaker"  # only untrusted or system lines: evidence, never memory
    AGENT_ONLY = "agent-only"  # only the agent said it (narration, restatements)
    ZERO = "uninformative"  # small talk, a question, narration, a fragment, a banner
    SCORE = "score"  # informative, but below deep.min_score
    SESSIONS = "sessions"  # fewer sessions than deep.min_sessions and no durability cue
    AGE = "age"  # last seen before deep.max_age_days on the agent's clock


def held_back(
    row: Mapping[Any, Any], settings: DeepSettings, clock: datetime | None
) -> Gate | None:
    """The first gate `row` (a candidates row) fails, or None when deep may take it."""
    if row["status"] != "pending" and row["evidence_count"] <= row["decided_evidence"]:
        return Gate.DECIDED
    if row["owner_lines"] + row["agent_lines"] == 0:
        return Gate.NO_SPEAKER
    if row["owner_lines"] == 0 and not settings.promote_agent_only:
        return Gate.AGENT_ONLY
    if not row["score"]:
        return Gate.ZERO
    if row["score"] < settings.min_score:
        return Gate.SCORE
    if row["sessions"] < settings.min_sessions and not row["durable_cue"]:
        return Gate.SESSIONS
    if settings.max_age_days is not None and clock is not None and row["last_seen"] is not None:
        last = row["last_seen"]
        last = last if last.tzinfo is not None else last.replace(tzinfo=UTC)
        if last < clock - timedelta(days=settings.max_age_days):
            return Gate.AGE
    return None
