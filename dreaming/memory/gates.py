"""Deep's gates: which pending candidates may be promoted, and what holds the others back.

One pure function over a candidate's stored signals, so deep's selection, `dreaming
candidates`, `dreaming report` and the benchmarks all name the same gate for the same
candidate; and the listing of an agent's candidates, each with its gate.

The score gate reads the statement's `clarity` (`dreaming.ingest.scoring`), not its score:
what its text and its speaker earn, the same on a new agent as on one that heard a thousand
sessions, and whether six weeks were read in one night or night by night. The score (rarity,
recency, corroboration, REM's boost) only orders what passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, or_, select

from dreaming.config import DeepSettings
from dreaming.ingest.candidates import read_clock
from dreaming.ingest.salience import parse_features
from dreaming.ingest.scoring import W_CLEAR, clarity, telling_words
from dreaming.store.statuses import CandidateStatus
from dreaming.store.tables import CANDIDATES


class Gate(StrEnum):
    """Why a candidate is not promoted tonight, in the order the gates are checked."""

    DECIDED = "decided"  # decided before, and no new evidence since
    NO_SPEAKER = "no-speaker"  # only untrusted or system lines: evidence, never memory
    AGENT_ONLY = "agent-only"  # only the agent said it (narration, restatements)
    ZERO = "uninformative"  # small talk, a question, narration, a fragment, a banner
    SCORE = "score"  # informative, but its clarity is below deep.min_score
    SESSIONS = "sessions"  # fewer sessions than deep.min_sessions and no durability cue
    AGE = "age"  # last seen before deep.max_age_days on the agent's clock


def held_back(
    row: Mapping[Any, Any], settings: DeepSettings, clock: datetime | None
) -> Gate | None:
    """The first gate `row` (a candidates row) fails, or None when deep may take it."""
    if (
        row["status"] != CandidateStatus.PENDING
        and row["evidence_count"] <= row["decided_evidence"]
    ):
        return Gate.DECIDED
    if row["owner_lines"] + row["agent_lines"] == 0:
        return Gate.NO_SPEAKER
    if row["owner_lines"] == 0 and not settings.promote_agent_only:
        return Gate.AGENT_ONLY
    value = row_clarity(row)
    if not row["score"] or value <= 0.0:
        return Gate.ZERO
    if value < settings.min_score:
        return Gate.SCORE
    if row["sessions"] < settings.min_sessions and not row["durable_cue"]:
        return Gate.SESSIONS
    if settings.max_age_days is not None and clock is not None:
        last = row["last_seen"]
        if last is not None and last < clock - timedelta(days=settings.max_age_days):
            return Gate.AGE
    return None


def row_clarity(row: Mapping[Any, Any]) -> float:
    """The clarity of a candidates row: its statement's, as said by its speakers."""
    return clarity(
        row["salience"] or 0.0,
        parse_features(row["features"]),
        telling_words((row["tokens"] or "").split()),
        row["owner_lines"],
        row["agent_lines"],
    )


def may_pass(settings: DeepSettings) -> ColumnElement[bool]:
    """A condition on candidates rows that every row past the score gate meets (clarity is
    at most salience + W_CLEAR), so SQL can narrow the rows before `held_back` decides."""
    return CANDIDATES.c.salience >= settings.min_score - W_CLEAR - 1e-6  # clarity is rounded


PASSES = "passes"  # no gate holds it back: deep considers it, highest score first
GATES = (PASSES, *(g.value for g in Gate))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _candidate(agent: str, row: Any, gate: Gate | None) -> dict[str, Any]:
    return {
        "agent": agent,
        "id": row["id"],
        "key": row["key"],
        "text": row["text"],
        "score": row["score"],
        "salience": row["salience"],
        "features": (row["features"] or "").split(),
        "gate": PASSES if gate is None else gate.value,
        "status": row["status"],
        "owner_lines": row["owner_lines"],
        "agent_lines": row["agent_lines"],
        "untrusted_lines": row["untrusted_lines"],
        "system_lines": row["system_lines"],
        "sessions": row["sessions"],
        "days": row["days"],
        "first_seen": _iso(row["first_seen"]),
        "last_seen": _iso(row["last_seen"]),
        "durable_cue": bool(row["durable_cue"]),
        "rem_boost": row["rem_boost"],
        "evidence_count": row["evidence_count"],
        "decided_evidence": row["decided_evidence"],
        "stale": bool(row["stale"]),
    }


def list_candidates(
    conn: Connection, agent: str, deep: DeepSettings, *, include_decided: bool
) -> list[dict[str, Any]]:
    """The agent's candidates, pending ones only unless `include_decided`, by score
    (highest first) then id, each with the gate that holds it back (`gate`: a Gate value,
    or PASSES)."""
    where = CANDIDATES.c.agent == agent
    if not include_decided:
        # Deep's own notion of pending: never decided, or new evidence since the decision.
        where = and_(
            where,
            or_(
                CANDIDATES.c.status == CandidateStatus.PENDING,
                CANDIDATES.c.evidence_count > CANDIDATES.c.decided_evidence,
            ),
        )
    clock = read_clock(conn, agent)
    rows = conn.execute(
        select(CANDIDATES).where(where).order_by(CANDIDATES.c.score.desc(), CANDIDATES.c.id)
    ).mappings()
    return [_candidate(agent, r, held_back(r, deep, clock)) for r in rows]


def gate_counts(listed: list[dict[str, Any]]) -> dict[str, int]:
    """How many of `listed` each gate holds back (every gate named, zeros included)."""
    counts = dict.fromkeys(GATES, 0)
    for c in listed:
        counts[c["gate"]] += 1
    return counts
