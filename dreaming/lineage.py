"""Applying decisions: entries, their origins and evidence. Code alone owns provenance.

    add        the new entry's origins and evidence are the candidate's
    merge      the result's origins are the union of the candidate's and every target's;
    supersede  targets leave memory (supersede also records which keys it replaced)

Origin and evidence rows whose key no live entry uses are deleted in the same transaction
(invariant 2). A merge may change an entry's text and so its key: its lineage moves with it.

Reading lineage back (`entries show`, `dreaming report`) goes through the readers here too:
an entry's origins, its evidence lines with their corpus text, the decisions that touched it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, and_, bindparam, delete, or_, select, update

from dreaming import entry_index, journal
from dreaming.admission import OriginClass
from dreaming.corpus import reference
from dreaming.decisions import Action
from dreaming.memory_file import entry_key
from dreaming.store.dialect import upsert
from dreaming.store.statuses import CandidateStatus, EntryStatus
from dreaming.store.tables import (
    CANDIDATE_EVIDENCE,
    CANDIDATES,
    CORPUS_LINES,
    DECISIONS,
    ENTRIES,
    ENTRY_EVIDENCE,
    ORIGINS,
    SESSIONS,
    SUPERSESSIONS,
)

# When one session supports a fact through several kinds of line, its origin takes the most
# trusted class: the origin says who stood behind the fact in that session.
_CLASS_RANK: dict[str, int] = {
    OriginClass.OWNER: 0,
    OriginClass.AGENT: 1,
    OriginClass.UNTRUSTED: 2,
    OriginClass.SYSTEM: 3,
}


@dataclass(frozen=True, slots=True)
class Origin:
    session_id: str
    session_key: str | None
    origin_class: str
    observed_at: datetime | None


@dataclass(frozen=True, slots=True)
class Lineage:
    origins: tuple[Origin, ...]
    evidence: tuple[tuple[str, int], ...]  # (session id, transcript line)


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


def candidate_lineage(conn: Connection, agent: str, candidate_id: int) -> Lineage:
    rows = conn.execute(
        select(
            CANDIDATE_EVIDENCE.c.session_id,
            SESSIONS.c.session_key,
            CANDIDATE_EVIDENCE.c.origin_class,
            CORPUS_LINES.c.ts,
            CORPUS_LINES.c.line,
        )
        .select_from(
            CANDIDATE_EVIDENCE.join(
                CORPUS_LINES, CORPUS_LINES.c.id == CANDIDATE_EVIDENCE.c.corpus_line_id
            ).outerjoin(
                SESSIONS,
                and_(
                    SESSIONS.c.agent == CANDIDATE_EVIDENCE.c.agent,
                    SESSIONS.c.session_id == CANDIDATE_EVIDENCE.c.session_id,
                ),
            )
        )
        .where(CANDIDATE_EVIDENCE.c.candidate_id == candidate_id)
    ).all()
    per_session: dict[str, Origin] = {}
    evidence: set[tuple[str, int]] = set()
    for session_id, session_key, cls, ts, line in rows:
        evidence.add((session_id, line))
        seen = per_session.get(session_id)
        if seen is None:
            per_session[session_id] = Origin(session_id, session_key, cls, ts)
            continue
        best = (
            cls
            if _CLASS_RANK.get(cls, 9) < _CLASS_RANK.get(seen.origin_class, 9)
            else seen.origin_class
        )
        first = min((t for t in (seen.observed_at, ts) if t is not None), default=None)
        per_session[session_id] = Origin(session_id, session_key, best, first)
    return Lineage(tuple(per_session[s] for s in sorted(per_session)), tuple(sorted(evidence)))


def entry_lineage(conn: Connection, agent: str, key: str) -> Lineage:
    origins = conn.execute(
        select(
            ORIGINS.c.session_id,
            ORIGINS.c.session_key,
            ORIGINS.c.origin_class,
            ORIGINS.c.observed_at,
        )
        .where(and_(ORIGINS.c.agent == agent, ORIGINS.c.entry_key == key))
        .order_by(ORIGINS.c.session_id)
    ).all()
    evidence = conn.execute(
        select(ENTRY_EVIDENCE.c.session_id, ENTRY_EVIDENCE.c.line)
        .where(and_(ENTRY_EVIDENCE.c.agent == agent, ENTRY_EVIDENCE.c.entry_key == key))
        .order_by(ENTRY_EVIDENCE.c.session_id, ENTRY_EVIDENCE.c.line)
    ).all()
    return Lineage(tuple(Origin(*r) for r in origins), tuple((s, int(n)) for s, n in evidence))


@dataclass(frozen=True, slots=True)
class EvidenceLine:
    """One corpus line an entry was built from, with its text as the corpus holds it."""

    session_id: str
    line: int  # 1-based line in the transcript file
    role: str | None
    origin_class: str | None
    ts: datetime | None
    text: str | None  # None: the line is no longer in the corpus (purged, or re-derived)
    path: str | None = None  # the transcript file (None: the session is no longer recorded)
    format: str | None = None

    def ref(self, agent: str) -> str:
        """Where the line is. An OpenClaw session keeps the corpus's own reference
        (`<agent>/sessions/<agent>/<session>#L<n>`); a transcript from elsewhere (Claude
        Code's projects, an event log) is named by its file on disk, which that reference
        would not find."""
        if self.path is None or self.format in (None, "openclaw"):
            return reference(agent, self.session_id, self.line)
        return f"{self.path}#L{self.line}"


def evidence_lines(
    conn: Connection, agent: str, key: str | None = None
) -> dict[str, list[EvidenceLine]]:
    """Entry key -> its evidence lines with their corpus text, in (session, line) order: one
    query for one entry, or for all of an agent's."""
    where = ENTRY_EVIDENCE.c.agent == agent
    if key is not None:
        where = and_(where, ENTRY_EVIDENCE.c.entry_key == key)
    rows = conn.execute(
        select(
            ENTRY_EVIDENCE.c.entry_key,
            ENTRY_EVIDENCE.c.session_id,
            ENTRY_EVIDENCE.c.line,
            CORPUS_LINES.c.role,
            CORPUS_LINES.c.origin_class,
            CORPUS_LINES.c.ts,
            CORPUS_LINES.c.text,
            SESSIONS.c.path,
            SESSIONS.c.format,
        )
        .select_from(
            ENTRY_EVIDENCE.outerjoin(
                CORPUS_LINES,
                and_(
                    CORPUS_LINES.c.agent == ENTRY_EVIDENCE.c.agent,
                    CORPUS_LINES.c.session_id == ENTRY_EVIDENCE.c.session_id,
                    CORPUS_LINES.c.line == ENTRY_EVIDENCE.c.line,
                ),
            ).outerjoin(
                SESSIONS,
                and_(
                    SESSIONS.c.agent == ENTRY_EVIDENCE.c.agent,
                    SESSIONS.c.session_id == ENTRY_EVIDENCE.c.session_id,
                ),
            )
        )
        .where(where)
        .order_by(ENTRY_EVIDENCE.c.entry_key, ENTRY_EVIDENCE.c.session_id, ENTRY_EVIDENCE.c.line)
    ).all()
    out: dict[str, list[EvidenceLine]] = defaultdict(list)
    for entry, session_id, line, role, origin_class, ts, text, path, fmt in rows:
        out[entry].append(
            EvidenceLine(session_id, int(line), role, origin_class, ts, text, path, fmt)
        )
    return dict(out)


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """One row of the decision log: what deep did with a candidate, and who decided."""

    id: int
    run_id: int | None
    candidate_key: str
    action: str
    targets: tuple[str, ...]  # entry keys the decision merged or superseded
    entry_key: str | None  # the resulting entry (None: a skip, or purged since)
    path: str  # llm | deterministic
    created_at: datetime
    reason: str | None


def _targets(raw: str | None) -> tuple[str, ...]:
    try:
        parsed = json.loads(raw or "[]")
    except ValueError:
        return ()
    return tuple(str(t) for t in parsed) if isinstance(parsed, list) else ()


def decisions(
    conn: Connection,
    agent: str,
    *,
    touching: str | None = None,
    run_ids: Sequence[int] | None = None,
) -> list[DecisionRecord]:
    """The agent's decisions in the order they were made: those that produced the entry
    `touching` or took it as a target, or those of `run_ids`, or all."""
    where = DECISIONS.c.agent == agent
    if touching is not None:
        # Keys are `m:` and hex: nothing in one is special to LIKE.
        where = and_(
            where,
            or_(DECISIONS.c.entry_key == touching, DECISIONS.c.targets.like(f'%"{touching}"%')),
        )
    if run_ids is not None:
        where = and_(where, DECISIONS.c.run_id.in_(list(run_ids)))
    rows = conn.execute(select(DECISIONS).where(where).order_by(DECISIONS.c.id)).all()
    return [
        DecisionRecord(
            id=int(r.id),
            run_id=None if r.run_id is None else int(r.run_id),
            candidate_key=r.candidate_key,
            action=r.action,
            targets=_targets(r.targets),
            entry_key=r.entry_key,
            path=r.path,
            created_at=r.created_at,
            reason=r.reason,
        )
        for r in rows
    ]


def supersedes(conn: Connection, agent: str, key: str | None = None) -> dict[str, list[str]]:
    """Entry key -> the keys it superseded: of the entry `key`, or of all the agent's."""
    where = SUPERSESSIONS.c.agent == agent
    if key is not None:
        where = and_(where, SUPERSESSIONS.c.new_key == key)
    out: dict[str, list[str]] = defaultdict(list)
    for new, old in conn.execute(
        select(SUPERSESSIONS.c.new_key, SUPERSESSIONS.c.old_key)
        .where(where)
        .order_by(SUPERSESSIONS.c.new_key, SUPERSESSIONS.c.old_key)
    ):
        out[new].append(old)
    return dict(out)


def _now() -> datetime:
    return datetime.now(UTC)


def _write_lineage(conn: Connection, agent: str, key: str, lineage: Lineage) -> None:
    if lineage.origins:
        conn.execute(
            upsert(conn, ORIGINS).on_conflict_do_nothing(),
            [
                {
                    "agent": agent,
                    "entry_key": key,
                    "session_id": o.session_id,
                    "session_key": o.session_key,
                    "origin_class": o.origin_class,
                    "observed_at": o.observed_at,
                }
                for o in lineage.origins
            ],
        )
    if lineage.evidence:
        conn.execute(
            upsert(conn, ENTRY_EVIDENCE).on_conflict_do_nothing(),
            [
                {"agent": agent, "entry_key": key, "session_id": s, "line": n}
                for s, n in lineage.evidence
            ],
        )


def _delete_entry(conn: Connection, agent: str, key: str) -> None:
    conn.execute(delete(ENTRIES).where(and_(ENTRIES.c.agent == agent, ENTRIES.c.key == key)))
    entry_index.remove_entry(conn, agent, key)


def prune_orphans(conn: Connection, agent: str) -> int:
    """Delete origin and evidence rows whose key no live entry uses. Returns rows removed."""
    live = select(ENTRIES.c.key).where(
        and_(ENTRIES.c.agent == agent, ENTRIES.c.status == EntryStatus.LIVE)
    )
    removed = conn.execute(
        delete(ORIGINS).where(and_(ORIGINS.c.agent == agent, ORIGINS.c.entry_key.not_in(live)))
    ).rowcount
    removed += conn.execute(
        delete(ENTRY_EVIDENCE).where(
            and_(ENTRY_EVIDENCE.c.agent == agent, ENTRY_EVIDENCE.c.entry_key.not_in(live))
        )
    ).rowcount
    return int(removed)


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
            conn.execute(_SET_OUTCOME, self.outcomes)
        if self.log:
            conn.execute(DECISIONS.insert(), self.log)
        self.outcomes.clear()
        self.log.clear()


_SET_OUTCOME = (
    update(CANDIDATES)
    .where(CANDIDATES.c.id == bindparam("cid"))
    .values(
        status=bindparam("new_status"),
        decided_evidence=bindparam("decided"),
        updated_at=bindparam("at"),
    )
)


def apply(
    conn: Connection,
    agent: str,
    decision: Applied,
    run_id: int | None,
    *,
    prune: bool = True,
    bookkeeping: Bookkeeping | None = None,
) -> str | None:
    """Carry out one decision in the caller's transaction. Returns the resulting entry key.
    A caller applying a batch may pass prune=False and call `prune_orphans` once at the end,
    and a `bookkeeping` it flushes there, in the same transaction."""
    now = _now()
    result_key: str | None = None
    # What this decision is about to change, as it is now: `runs undo` puts it back.
    journal.capture(
        conn,
        agent,
        run_id,
        [entry_key(decision.text), *decision.targets] if decision.text is not None else [],
        [decision.candidate_id, *(cid for cid, _ in decision.also)],
    )
    evidence_count = conn.execute(
        select(CANDIDATES.c.evidence_count).where(CANDIDATES.c.id == decision.candidate_id)
    ).scalar_one()
    if decision.action is Action.SKIP:
        status = CandidateStatus.SKIPPED
    else:
        assert decision.text is not None
        result_key = entry_key(decision.text)
        lineages = [candidate_lineage(conn, agent, decision.candidate_id)]
        lineages += [candidate_lineage(conn, agent, cid) for cid, _ in decision.also]
        lineages += [entry_lineage(conn, agent, t) for t in decision.targets]
        exists = conn.execute(
            select(ENTRIES.c.key).where(and_(ENTRIES.c.agent == agent, ENTRIES.c.key == result_key))
        ).scalar()
        if exists is None:
            conn.execute(
                ENTRIES.insert().values(
                    agent=agent,
                    key=result_key,
                    text=decision.text,
                    status=EntryStatus.LIVE,
                    created_at=now,
                    updated_at=now,
                )
            )
        else:
            # Same normalized text: the same fact. Its lineage grows; its text stays.
            lineages.append(entry_lineage(conn, agent, result_key))
            conn.execute(
                update(ENTRIES)
                .where(and_(ENTRIES.c.agent == agent, ENTRIES.c.key == result_key))
                .values(updated_at=now, status=EntryStatus.LIVE)
            )
        for lineage in lineages:
            _write_lineage(conn, agent, result_key, lineage)
        for target in decision.targets:
            if target == result_key:
                continue
            _delete_entry(conn, agent, target)
            if decision.action is Action.SUPERSEDE:
                conn.execute(
                    upsert(conn, SUPERSESSIONS)
                    .values(
                        agent=agent,
                        new_key=result_key,
                        old_key=target,
                        run_id=run_id,
                        created_at=now,
                    )
                    .on_conflict_do_nothing()
                )
        if exists is None:
            # A new entry has no index row yet: insert it (no lookup, no delete: each is a
            # round trip, which a fleet's PostgreSQL pays per promoted entry).
            entry_index.add_entry(conn, agent, result_key, decision.text)
        else:
            body = conn.execute(
                select(ENTRIES.c.text).where(
                    and_(ENTRIES.c.agent == agent, ENTRIES.c.key == result_key)
                )
            ).scalar_one()
            entry_index.index_entry(conn, agent, result_key, body)
        status = (
            CandidateStatus.PROMOTED if decision.action is Action.ADD else CandidateStatus.MERGED
        )
    rows = bookkeeping if bookkeeping is not None else Bookkeeping.empty()
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
    for cid, key in decision.also:
        # Folded into this entry: decided as a merge into it, its lineage already joined.
        count = conn.execute(
            select(CANDIDATES.c.evidence_count).where(CANDIDATES.c.id == cid)
        ).scalar_one()
        rows.outcomes.append(
            {"cid": cid, "new_status": CandidateStatus.MERGED, "decided": count, "at": now}
        )
        rows.log.append(
            {
                "agent": agent,
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
    if bookkeeping is None:
        rows.flush(conn)
    if prune:
        prune_orphans(conn, agent)
    return result_key


def live_entries(conn: Connection, agent: str) -> list[tuple[str, str]]:
    """(key, text) of live entries in creation order: the order MEMORY.md lists them."""
    return [
        (k, t)
        for k, t in conn.execute(
            select(ENTRIES.c.key, ENTRIES.c.text)
            .where(and_(ENTRIES.c.agent == agent, ENTRIES.c.status == EntryStatus.LIVE))
            .order_by(ENTRIES.c.created_at, ENTRIES.c.key)
        )
    ]


def remove_entries(
    conn: Connection, agent: str, keys: Sequence[str], *, prune: bool = True
) -> None:
    for key in keys:
        _delete_entry(conn, agent, key)
    if prune:
        prune_orphans(conn, agent)
