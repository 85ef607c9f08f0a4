"""What becomes of a candidate after light: deep's outcome, a proposal staged for review and
its acceptance or rejection, an undo putting a status back, REM's boosts. Every writer of the
candidates table outside light and a purge goes through here.

`decided_evidence` is the evidence count a decision saw: a candidate comes back before deep
only when it has more evidence than that (a skipped or rejected one, on new evidence).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, update

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
    conn.execute(_SET_OUTCOME, outcomes)


def restore(
    conn: Connection,
    agent: str,
    cid: int,
    status: str,
    decided_evidence: int,
    updated_at: datetime | None,
) -> None:
    """An undo: the candidate as it was before the run decided it."""
    conn.execute(
        update(CANDIDATES)
        .where(and_(CANDIDATES.c.id == cid, CANDIDATES.c.agent == agent))
        .values(status=status, decided_evidence=decided_evidence, updated_at=updated_at)
    )


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


def settle_proposed(conn: Connection, cids: Sequence[int], status: CandidateStatus) -> None:
    """Candidates still waiting on a proposal get `status`: PENDING (reopened, decided again
    the next night) keeps no decided count; REJECTED keeps it, so only new evidence brings
    them back."""
    values: dict[str, Any] = {"status": status}
    if status is CandidateStatus.PENDING:
        values["decided_evidence"] = 0
    conn.execute(
        update(CANDIDATES)
        .where(and_(CANDIDATES.c.id.in_(cids), CANDIDATES.c.status == CandidateStatus.PROPOSED))
        .values(**values)
    )


def set_boosts(conn: Connection, changes: Sequence[Mapping[str, Any]]) -> None:
    """REM's boosts: rows of `cid` and `boost` (0 takes a boost away)."""
    conn.execute(_SET_BOOST, changes)
