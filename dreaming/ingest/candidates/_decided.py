"""What becomes of a candidate after light: deep's outcome (an undo putting it back goes the
same way), a proposal staged for review and its settling, REM's boosts. Every writer of the
candidates table outside light and a purge goes through here.

`decided_evidence` is the evidence count a decision saw: a candidate comes back before deep
only when it has more evidence than that (a skipped or rejected one, on new evidence).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, bindparam, update

from dreaming.store.bulk import execute_many
from dreaming.store.statuses import CandidateStatus
from dreaming.store.tables import CANDIDATES

_SET_OUTCOME = (
    update(CANDIDATES)
    .where(CANDIDATES.c.id == bindparam("cid"))
    .values(
        status=bindparam("new_status"),
        decided_evidence=bindparam("decided"),
        updated_at=bindparam("at"),
    )
)
_SET_BOOST = (
    update(CANDIDATES)
    .where(CANDIDATES.c.id == bindparam("cid"))
    .values(rem_boost=bindparam("boost"))
)


def set_outcomes(conn: Connection, outcomes: Sequence[Mapping[str, Any]]) -> None:
    """Deep's decisions, in one statement: rows of `cid`, `new_status`, `decided` (the
    evidence count decided on) and `at`."""
    execute_many(conn, _SET_OUTCOME, outcomes)


def mark_proposed(conn: Connection, cids: Iterable[int], now: datetime) -> None:
    """Staged for a person: decided on the evidence it has now."""
    conn.execute(
        update(CANDIDATES)
        .where(CANDIDATES.c.id.in_(list(cids)))
        .values(
            status=CandidateStatus.PROPOSED,
            decided_evidence=CANDIDATES.c.evidence_count,
            updated_at=now,
        )
    )


def reopen_proposed(conn: Connection, cids: Sequence[int]) -> None:
    """Candidates still waiting on a proposal that went stale or expired: pending again,
    decided afresh the next night."""
    conn.execute(
        update(CANDIDATES)
        .where(_still_proposed(cids))
        .values(status=CandidateStatus.PENDING, decided_evidence=0)
    )


def reject_proposed(conn: Connection, cids: Sequence[int]) -> None:
    """Candidates still waiting on a rejected proposal: they keep the evidence count they
    were decided on, so only new evidence brings them back."""
    conn.execute(
        update(CANDIDATES).where(_still_proposed(cids)).values(status=CandidateStatus.REJECTED)
    )


def _still_proposed(cids: Sequence[int]) -> ColumnElement[bool]:
    return and_(CANDIDATES.c.id.in_(cids), CANDIDATES.c.status == CandidateStatus.PROPOSED)


def set_boosts(conn: Connection, changes: Sequence[Mapping[str, Any]]) -> None:
    """REM's boosts: rows of `cid` and `boost` (0 takes a boost away)."""
    execute_many(conn, _SET_BOOST, changes)
