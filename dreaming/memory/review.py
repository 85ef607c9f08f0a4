"""Review proposals: deep's validated decisions staged for a person instead of applied.

In review mode (`[deep] apply = "review"`, or `promote --review`) deep stages each add,
merge and supersede it would have applied, with what the preview shows (the candidate, its
evidence, the decision and reason, the MEMORY.md lines it would remove and add). Nothing
reaches MEMORY.md until a person accepts (`dreaming.oversight.accept`), which applies
through the same lineage code deep uses. A proposal whose targets changed since it was made
is refused as stale and its candidate is proposed again the next night; a rejected one is
not proposed again unless new evidence arrives; one nobody decides expires.

Candidates with a pending proposal have status `proposed` and `decided_evidence` set to
their evidence count, so deep leaves them alone until they are decided or new lines arrive.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, and_, delete, select, update

from dreaming.ingest import candidates
from dreaming.memory.actions import Action
from dreaming.memory.lineage import Applied
from dreaming.memory.memory_file import entry_key
from dreaming.store.statuses import HELD, CandidateStatus, EntryStatus
from dreaming.store.tables import CANDIDATES, ENTRIES, PROPOSALS


class ProposalStatus(StrEnum):
    PENDING = "pending"  # waiting for a person
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    STALE = "stale"  # its targets changed since it was shown
    EXPIRED = "expired"  # nobody decided it in time
    REPLACED = "replaced"  # proposed again with new evidence


@dataclass(frozen=True)
class Proposal:
    id: int
    agent: str
    run_id: int | None
    status: str
    candidate_id: int
    candidate_key: str
    decision: dict[str, Any]
    detail: dict[str, Any]
    created_at: datetime
    expires_at: datetime | None
    decided_at: datetime | None
    note: str | None

    def applied(self) -> Applied:
        d = self.decision
        return Applied(
            candidate_id=self.candidate_id,
            candidate_key=self.candidate_key,
            action=Action(d["action"]),
            targets=tuple(d["targets"]),
            text=d["text"],
            path=d["path"],
            reason=d["reason"],
            also=tuple((int(i), str(k)) for i, k in d["also"]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "agent": self.agent,
            "run_id": self.run_id,
            "status": self.status,
            "candidate": self.candidate_key,
            "candidate_text": self.detail.get("candidate_text"),
            "action": self.decision["action"],
            "targets": self.decision["targets"],
            "text": self.decision["text"],
            "path": self.decision["path"],
            "reason": self.decision["reason"],
            "evidence": self.detail.get("evidence", []),
            "target_texts": self.detail.get("targets", {}),
            "diff": self.detail.get("diff", ""),
            "created_at": _iso(self.created_at),
            "expires_at": _iso(self.expires_at),
            "decided_at": _iso(self.decided_at),
            "note": self.note,
        }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _proposal(row: Any) -> Proposal:
    return Proposal(
        id=int(row.id),
        agent=row.agent,
        run_id=row.run_id,
        status=row.status,
        candidate_id=int(row.candidate_id),
        candidate_key=row.candidate_key,
        decision=json.loads(row.decision),
        detail=json.loads(row.detail),
        created_at=row.created_at,
        expires_at=row.expires_at,
        decided_at=row.decided_at,
        note=row.note,
    )


def stage(
    conn: Connection,
    agent: str,
    run_id: int | None,
    decision: Applied,
    detail: dict[str, Any],
    sessions: Iterable[str],
    *,
    expire_days: float,
) -> int:
    """Stage one decision; its candidates wait as `proposed`. Returns the proposal id."""
    now = datetime.now(UTC)
    cids = [decision.candidate_id, *(cid for cid, _ in decision.also)]
    # A candidate proposed again (new evidence arrived meanwhile) has one live proposal.
    conn.execute(
        update(PROPOSALS)
        .where(
            and_(
                PROPOSALS.c.agent == agent,
                PROPOSALS.c.status == ProposalStatus.PENDING,
                PROPOSALS.c.candidate_id.in_(cids),
            )
        )
        .values(
            status=ProposalStatus.REPLACED, decided_at=now, note="proposed again with new evidence"
        )
    )
    result = conn.execute(
        PROPOSALS.insert()
        .values(
            agent=agent,
            run_id=run_id,
            status=ProposalStatus.PENDING,
            candidate_id=decision.candidate_id,
            candidate_key=decision.candidate_key,
            decision=json.dumps(
                {
                    "action": decision.action.value,
                    "targets": list(decision.targets),
                    "text": decision.text,
                    "path": decision.path,
                    "reason": decision.reason,
                    "also": [[i, k] for i, k in decision.also],
                },
                ensure_ascii=False,
            ),
            detail=json.dumps(detail, ensure_ascii=False),
            sessions=" ".join(sorted(set(sessions))),
            created_at=now,
            expires_at=now + timedelta(days=expire_days),
        )
        .returning(PROPOSALS.c.id)
    )
    candidates.mark_proposed(conn, cids, now)
    return int(result.scalar_one())


def _reopen(conn: Connection, candidate_ids: Sequence[int]) -> None:
    """Candidates whose proposal went stale or expired: decided again on the next night."""
    if candidate_ids:
        candidates.reopen_proposed(conn, candidate_ids)


def _candidates_of(p: Proposal) -> list[int]:
    return [p.candidate_id, *(int(i) for i, _ in p.decision["also"])]


def expire(conn: Connection, agent: str, now: datetime | None = None) -> int:
    """Pending proposals past their time expire; their candidates are proposed again."""
    moment = now or datetime.now(UTC)
    due = [
        p
        for p in proposals(conn, agent, status=ProposalStatus.PENDING)
        if p.expires_at is not None and p.expires_at <= moment
    ]
    for p in due:
        mark(conn, p.id, ProposalStatus.EXPIRED, "nobody decided it in time")
        _reopen(conn, _candidates_of(p))
    return len(due)


def proposals(
    conn: Connection, agent: str, status: str | None = None, ids: Sequence[int] | None = None
) -> list[Proposal]:
    query = select(PROPOSALS).where(PROPOSALS.c.agent == agent)
    if status is not None:
        query = query.where(PROPOSALS.c.status == status)
    if ids is not None:
        query = query.where(PROPOSALS.c.id.in_(list(ids)))
    return [_proposal(r) for r in conn.execute(query.order_by(PROPOSALS.c.id))]


def mark(
    conn: Connection, proposal_id: int, status: ProposalStatus, note: str | None = None
) -> None:
    conn.execute(
        update(PROPOSALS)
        .where(PROPOSALS.c.id == proposal_id)
        .values(status=status, decided_at=datetime.now(UTC), note=note)
    )


def stale_reason(conn: Connection, agent: str, p: Proposal) -> str | None:
    """Why `p` can no longer be applied as it was shown, or None when it still can."""
    status = conn.execute(
        select(CANDIDATES.c.status).where(
            and_(CANDIDATES.c.id == p.candidate_id, CANDIDATES.c.agent == agent)
        )
    ).scalar()
    if status is None:
        return "its candidate is gone (purged, or re-derived from fewer lines)"
    if status != CandidateStatus.PROPOSED:
        return f"its candidate was decided since ({status})"
    shown: dict[str, str] = p.detail.get("targets", {})
    live: dict[str, str] = dict(
        conn.execute(
            select(ENTRIES.c.key, ENTRIES.c.text).where(
                and_(
                    ENTRIES.c.agent == agent,
                    ENTRIES.c.key.in_(list(shown)),
                    ENTRIES.c.status.in_(HELD),  # archived or loaded: the same entry
                )
            )
        ).all()
    )
    changed = sorted(k for k, text in shown.items() if live.get(k) != text)
    if changed:
        return "its target entries changed since: " + ", ".join(changed)
    return None


@dataclass(frozen=True)
class MissingTarget:
    why: str
    waits: bool  # another pending proposal adds the target: accept that one first


def missing_target(
    conn: Connection, agent: str, p: Proposal, coming: Collection[str] = ()
) -> MissingTarget | None:
    """A merge or supersede into an entry that is not in memory (`coming`: the keys the
    proposals accepted before it in the same call write): the entry another proposal of the
    same night would add. Applied before it, the merge would write that proposal's text with
    none of its lineage (a later purge of its session would miss it); after its rejection,
    the rejected text. So it waits for that proposal, or is refused as stale."""
    made = p.applied()
    # Only a merge that keeps its target's text needs the target's lineage: one that writes
    # its own statement is a new entry when the target is gone (as deep's fit() makes it).
    keeps = entry_key(made.text) if made.text is not None else None
    targets = [t for t in made.targets if t not in coming and t == keeps]
    if not targets:
        return None
    live = set(
        conn.execute(
            select(ENTRIES.c.key).where(
                and_(
                    ENTRIES.c.agent == agent,
                    ENTRIES.c.key.in_(targets),
                    ENTRIES.c.status == EntryStatus.LIVE,
                )
            )
        ).scalars()
    )
    missing = [t for t in targets if t not in live]
    if not missing:
        return None
    pending_first = sorted(
        proposals(conn, agent), key=lambda o: (o.status != ProposalStatus.PENDING, -o.id)
    )
    for other in pending_first:
        theirs = other.applied()
        if other.id == p.id or theirs.text is None:
            continue
        key = entry_key(theirs.text)
        if key in missing and key not in theirs.targets:  # it writes the entry, not into it
            if other.status == ProposalStatus.PENDING:
                return MissingTarget(
                    f"its target {missing[0]} is not in memory yet: proposal #{other.id} would"
                    f" add it; accept #{other.id} first, or both together",
                    waits=True,
                )
            return MissingTarget(
                f"its target {missing[0]} is not in memory: proposal #{other.id} was"
                f" {other.status}",
                waits=False,
            )
    return MissingTarget(f"its target {missing[0]} is not in memory", waits=False)


def refuse_stale(conn: Connection, p: Proposal, why: str) -> None:
    mark(conn, p.id, ProposalStatus.STALE, why)
    _reopen(conn, _candidates_of(p))


def applied_note(run_id: int) -> str:
    return f"applied in run {run_id}"


def reopen_accepted(conn: Connection, agent: str, run_id: int) -> int:
    """Proposals accepted in `run_id` wait again (that run was undone)."""
    result = conn.execute(
        update(PROPOSALS)
        .where(
            and_(
                PROPOSALS.c.agent == agent,
                PROPOSALS.c.status == ProposalStatus.ACCEPTED,
                PROPOSALS.c.note == applied_note(run_id),
            )
        )
        .values(status=ProposalStatus.PENDING, decided_at=None, note=None)
    )
    return int(result.rowcount or 0)


def reject(conn: Connection, p: Proposal, reason: str | None) -> None:
    """Rejected: its candidates keep `decided_evidence` at their count then, so only new
    evidence brings them back."""
    mark(conn, p.id, ProposalStatus.REJECTED, reason or "rejected")
    candidates.reject_proposed(conn, _candidates_of(p))


def forget_sessions(
    conn: Connection,
    agent: str,
    sessions: Iterable[str],
    carries: Callable[[str], bool] | None = None,
    *,
    dry_run: bool = False,
) -> int:
    """Delete every proposal that holds text of the purged `sessions`. Returns how many
    (with `dry_run`, how many would go, and nothing changes)."""
    gone = set(sessions)
    doomed = [
        int(row_id)
        for row_id, names, decision, detail in conn.execute(
            select(
                PROPOSALS.c.id, PROPOSALS.c.sessions, PROPOSALS.c.decision, PROPOSALS.c.detail
            ).where(PROPOSALS.c.agent == agent)
        )
        if set(names.split()) & gone
        or (carries is not None and (carries(decision) or carries(detail)))
    ]
    if doomed and not dry_run:
        conn.execute(delete(PROPOSALS).where(PROPOSALS.c.id.in_(doomed)))
    return len(doomed)
