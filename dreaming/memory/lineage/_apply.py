"""Applying decisions: entries, their origins and evidence. Code alone owns provenance.

    add        the new entry's origins and evidence are the candidate's
    merge      the result's origins are the union of the candidate's and every target's;
    supersede  targets leave memory (supersede also records which keys it replaced)

Origin and evidence rows whose key no live entry uses are deleted in the same transaction
(invariant 2). A merge may change an entry's text and so its key: its lineage moves with it.
What a purge removes of entries and origins is removed here too (`forget_entries`,
`forget_origins`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, and_, bindparam, delete, or_, select, update

from dreaming.ingest import candidates
from dreaming.memory import entry_index, journal
from dreaming.memory.actions import Action
from dreaming.memory.lineage._batch import Batch
from dreaming.memory.lineage._read import Lineage, entry_lineage
from dreaming.memory.memory_file import entry_key
from dreaming.store.bulk import execute_many
from dreaming.store.dialect import upsert
from dreaming.store.statuses import HELD, CandidateStatus, EntryStatus
from dreaming.store.tables import (
    DECISIONS,
    ENTRIES,
    ENTRY_EVIDENCE,
    ORIGINS,
    SUPERSESSIONS,
)


@dataclass(frozen=True, slots=True)
class Applied:
    """A validated decision in key space, ready for code to carry out."""

    candidate_id: int
    candidate_key: str
    action: Action
    targets: tuple[str, ...]  # entry keys
    text: str | None
    path: str  # llm | deterministic
    reason: str | None = None  # the model's reason, or the deterministic path's
    # Other candidates (id, key) the entry also states: their lineage joins the result's.
    also: tuple[tuple[int, str], ...] = ()


def _now() -> datetime:
    return datetime.now(UTC)


def _delete_entry(conn: Connection, agent: str, key: str) -> None:
    conn.execute(_DELETE_ENTRY, {"agent": agent, "key": key})
    entry_index.remove_entry(conn, agent, key)


def prune_orphans(conn: Connection, agent: str) -> int:
    """Delete origin and evidence rows whose key no entry the memory holds (loaded or
    archived) uses. Returns rows removed."""
    params = {"agent": agent, "held": list(HELD)}
    removed = conn.execute(_PRUNE_ORIGINS, params).rowcount
    removed += conn.execute(_PRUNE_EVIDENCE, params).rowcount
    return int(removed)


# Statements built once: building one costs more than SQLite spends running it.
_INSERT_DECISION = DECISIONS.insert()
_DELETE_ENTRY = delete(ENTRIES).where(
    and_(ENTRIES.c.agent == bindparam("agent"), ENTRIES.c.key == bindparam("key"))
)
_HELD_KEYS = select(ENTRIES.c.key).where(
    and_(
        ENTRIES.c.agent == bindparam("agent"),
        ENTRIES.c.status.in_(bindparam("held", expanding=True)),
    )
)
_PRUNE_ORIGINS = delete(ORIGINS).where(
    and_(ORIGINS.c.agent == bindparam("agent"), ORIGINS.c.entry_key.not_in(_HELD_KEYS))
)
_PRUNE_EVIDENCE = delete(ENTRY_EVIDENCE).where(
    and_(
        ENTRY_EVIDENCE.c.agent == bindparam("agent"),
        ENTRY_EVIDENCE.c.entry_key.not_in(_HELD_KEYS),
    )
)


@dataclass
class Bookkeeping:
    """The rows a batch of decisions leaves behind (candidate outcomes, the decision log),
    written in two statements at its end rather than two per decision: nothing in the batch
    reads them back, and each statement is a round trip to a fleet's PostgreSQL."""

    outcomes: list[dict[str, object]]
    log: list[dict[str, object]]

    @classmethod
    def empty(cls) -> Bookkeeping:
        return cls([], [])

    def flush(self, conn: Connection) -> None:
        if self.outcomes:
            candidates.set_outcomes(conn, self.outcomes)
        if self.log:
            execute_many(conn, _INSERT_DECISION, self.log)
        self.outcomes.clear()
        self.log.clear()


def apply_batch(
    conn: Connection,
    agent: str,
    decisions: Sequence[Applied],
    run_id: int | None,
    *,
    prune: bool = True,
    bookkeeping: Bookkeeping | None = None,
) -> list[str | None]:
    """Carry out `decisions`, in order, in the caller's transaction: what they change is
    journaled first, what they read is read once and what they add written together
    (`_batch`). Returns each one's resulting entry key. A caller may pass prune=False and
    call `prune_orphans` itself, and a `bookkeeping` it flushes, in the same transaction."""
    keys = [k for d in decisions for k in _touched_keys(d)]
    cids = [c for d in decisions for c in (d.candidate_id, *(cid for cid, _ in d.also))]
    journal.capture(conn, agent, run_id, keys, cids)
    batch = Batch.load(conn, agent, cids, keys)
    rows = bookkeeping if bookkeeping is not None else Bookkeeping.empty()
    results = [_apply_one(conn, batch, d, run_id, rows) for d in decisions]
    batch.flush(conn)
    if bookkeeping is None:
        rows.flush(conn)
    if prune:
        prune_orphans(conn, agent)
    return results


def _touched_keys(decision: Applied) -> list[str]:
    """The entry keys a decision changes: its result's and its targets'."""
    if decision.text is None:
        return []
    return [entry_key(decision.text), *decision.targets]


def _apply_one(
    conn: Connection, batch: Batch, decision: Applied, run_id: int | None, rows: Bookkeeping
) -> str | None:
    now = _now()
    result_key: str | None = None
    if decision.action is Action.SKIP:
        status = CandidateStatus.SKIPPED
    else:
        result_key = _write_entry(conn, batch, decision, run_id, now)
        status = (
            CandidateStatus.PROMOTED if decision.action is Action.ADD else CandidateStatus.MERGED
        )
    count = batch.counts[decision.candidate_id]
    _record_decision(rows, batch.agent, decision, run_id, result_key, status, count, now)
    for cid, key in decision.also:
        _record_folded(rows, batch, decision, run_id, result_key, (cid, key), now)
    return result_key


def _write_entry(
    conn: Connection, batch: Batch, decision: Applied, run_id: int | None, now: datetime
) -> str:
    """The decision's entry, written with the lineage of everything it joins; its targets
    leave memory and it is indexed. Returns its key."""
    assert decision.text is not None
    agent = batch.agent
    result_key = entry_key(decision.text)
    lineages = [batch.lineages[decision.candidate_id]]
    lineages += [batch.lineages[cid] for cid, _ in decision.also]
    if decision.targets:
        batch.flush(conn)  # a target may be an entry this batch wrote
        lineages += [entry_lineage(conn, agent, t) for t in decision.targets]
    held = _put_entry(conn, batch, result_key, decision.text, now)
    if held is not None:
        lineages.append(held)
    for lineage in lineages:
        batch.add_lineage(result_key, lineage)
    _retire_targets(conn, batch, decision, result_key, run_id, now)
    if held is not None:
        batch.flush(conn)
        body = conn.execute(_ENTRY_TEXT, {"agent": agent, "key": result_key}).scalar_one()
        entry_index.index_entry(conn, agent, result_key, body)
    return result_key


def _put_entry(
    conn: Connection, batch: Batch, key: str, text: str, now: datetime
) -> Lineage | None:
    """Insert the entry (with the batch), or make the one with its key live again (an
    archived one said again comes back; the next write places it). Returns the lineage that
    one already held (None: the entry is new)."""
    if key not in batch.held:
        values = {
            "agent": batch.agent,
            "key": key,
            "text": text,
            "status": EntryStatus.LIVE,
            "created_at": now,
            "updated_at": now,
            "recall_count": 0,  # the model's default, named: no default to fill per row
        }
        batch.add_entry(key, values, text)
        return None
    # Same normalized text: the same fact. Its lineage grows; its text stays.
    batch.flush(conn)
    held = entry_lineage(conn, batch.agent, key)
    conn.execute(_REVIVE, {"b_agent": batch.agent, "b_key": key, "updated_at": now})
    return held


# Built once (see `store.compiled`).
_ENTRY_TEXT = select(ENTRIES.c.text).where(
    and_(ENTRIES.c.agent == bindparam("agent"), ENTRIES.c.key == bindparam("key"))
)
_REVIVE = (
    update(ENTRIES)
    .where(and_(ENTRIES.c.agent == bindparam("b_agent"), ENTRIES.c.key == bindparam("b_key")))
    .values(
        updated_at=bindparam("updated_at", type_=ENTRIES.c.updated_at.type),
        status=EntryStatus.LIVE,
    )
)


def _retire_targets(
    conn: Connection,
    batch: Batch,
    decision: Applied,
    result_key: str,
    run_id: int | None,
    now: datetime,
) -> None:
    """The decision's targets leave memory (a supersede records which keys it replaced)."""
    for target in decision.targets:
        if target == result_key:
            continue
        # Nothing of the target waits in the batch: it was written before its lineage was read.
        _delete_entry(conn, batch.agent, target)
        batch.held.discard(target)
        if decision.action is Action.SUPERSEDE:
            conn.execute(
                upsert(conn, SUPERSESSIONS)
                .values(
                    agent=batch.agent,
                    new_key=result_key,
                    old_key=target,
                    run_id=run_id,
                    created_at=now,
                )
                .on_conflict_do_nothing()
            )


def _record_decision(
    rows: Bookkeeping,
    agent: str,
    decision: Applied,
    run_id: int | None,
    result_key: str | None,
    status: str,
    evidence_count: int,
    now: datetime,
) -> None:
    rows.outcomes.append(
        {"cid": decision.candidate_id, "new_status": status, "decided": evidence_count, "at": now}
    )
    rows.log.append(
        {
            "agent": agent,
            "run_id": run_id,
            "candidate_key": decision.candidate_key,
            "action": decision.action.value,
            "targets": json.dumps(list(decision.targets)),
            "entry_key": result_key,
            "path": decision.path,
            "created_at": now,
            "reason": decision.reason,
        }
    )


def _record_folded(
    rows: Bookkeeping,
    batch: Batch,
    decision: Applied,
    run_id: int | None,
    result_key: str | None,
    also: tuple[int, str],
    now: datetime,
) -> None:
    """Another candidate folded into this entry: decided as a merge into it, its lineage
    already joined."""
    cid, key = also
    rows.outcomes.append(
        {"cid": cid, "new_status": CandidateStatus.MERGED, "decided": batch.counts[cid], "at": now}
    )
    rows.log.append(
        {
            "agent": batch.agent,
            "run_id": run_id,
            "candidate_key": key,
            "action": Action.MERGE.value,
            "targets": json.dumps([]),
            "entry_key": result_key,
            "path": decision.path,
            "created_at": now,
            "reason": f"folded into the entry of {decision.candidate_key}",
        }
    )


def remove_entries(
    conn: Connection, agent: str, keys: Sequence[str], *, prune: bool = True
) -> None:
    for key in keys:
        _delete_entry(conn, agent, key)
    if prune:
        prune_orphans(conn, agent)


def set_statuses(conn: Connection, agent: str, keys: Sequence[str], status: EntryStatus) -> None:
    """Mark entries live (in MEMORY.md) or archived: where MEMORY.md's capacity budget put
    them (`dreaming.memory.capacity`). Their lineage and index rows stay as they are."""
    for chunk in (keys[i : i + 500] for i in range(0, len(keys), 500)):
        conn.execute(
            update(ENTRIES)
            .where(and_(ENTRIES.c.agent == agent, ENTRIES.c.key.in_(chunk)))
            .values(status=status)
        )


def forget_entries(conn: Connection, agent: str, keys: Sequence[str]) -> None:
    """A purge's first part: entries go whole, supersessions naming them too; decisions unlink."""
    remove_entries(conn, agent, keys, prune=False)  # `forget_origins` prunes, once, at the end
    if keys:
        sup, dec = SUPERSESSIONS.c, DECISIONS.c
        naming = or_(sup.new_key.in_(keys), sup.old_key.in_(keys))
        conn.execute(delete(SUPERSESSIONS).where(and_(sup.agent == agent, naming)))
        linked = and_(dec.agent == agent, dec.entry_key.in_(keys))
        conn.execute(update(DECISIONS).where(linked).values(entry_key=None))


def forget_origins(conn: Connection, agent: str, sessions: Sequence[str] | None) -> None:
    """A purge's last part: origins of whole `sessions` (None: some lines), then orphans."""
    if sessions is not None:
        of_sessions = and_(ORIGINS.c.agent == agent, ORIGINS.c.session_id.in_(sessions))
        conn.execute(delete(ORIGINS).where(of_sessions))
    prune_orphans(conn, agent)
