"""Lineage read back: an entry's or a candidate's origins and evidence, the evidence lines
with their corpus text, the decisions that touched an entry, what it superseded, and the live
entries. `entries show`, `dreaming report`, forget's planning and deep's apply read it here.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, func, or_, select

from dreaming.ingest.admission import OriginClass
from dreaming.ingest.corpus import reference
from dreaming.memory.actions import Action
from dreaming.memory.memory_file import KEY_PREFIX
from dreaming.store.statuses import HELD, EntryStatus
from dreaming.store.tables import (
    CANDIDATE_EVIDENCE,
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


def candidate_lineage(conn: Connection, agent: str, candidate_id: int) -> Lineage:
    return candidate_lineages(conn, [candidate_id])[candidate_id]


def candidate_lineages(conn: Connection, candidate_ids: Iterable[int]) -> dict[int, Lineage]:
    """Each candidate's lineage, in a statement per 500 candidates."""
    ids = sorted(set(candidate_ids))
    rows: dict[int, list[Any]] = defaultdict(list)
    for start in range(0, len(ids), 500):
        for row in conn.execute(_EVIDENCE_OF, {"ids": ids[start : start + 500]}):
            rows[row[0]].append(row[1:])
    return {cid: candidate_origins(rows.get(cid, [])) for cid in ids}


_EVIDENCE_OF = (
    select(
        CANDIDATE_EVIDENCE.c.candidate_id,
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
    .where(CANDIDATE_EVIDENCE.c.candidate_id.in_(bindparam("ids", expanding=True)))
)


def candidate_origins(
    rows: Iterable[tuple[str, str | None, str, datetime | None, int]],
) -> Lineage:
    """A candidate's lineage from its evidence rows (session id, session key, origin class,
    time, line): one origin per session, of the most trusted class, first seen."""
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
    params = {"agent": agent, "key": key}
    origins = conn.execute(_ENTRY_ORIGINS, params).all()
    evidence = conn.execute(_ENTRY_EVIDENCE, params).all()
    return Lineage(tuple(Origin(*r) for r in origins), tuple((s, int(n)) for s, n in evidence))


# Statements built once: building one costs more than SQLite spends running it.
_ENTRY_ORIGINS = (
    select(
        ORIGINS.c.session_id,
        ORIGINS.c.session_key,
        ORIGINS.c.origin_class,
        ORIGINS.c.observed_at,
    )
    .where(and_(ORIGINS.c.agent == bindparam("agent"), ORIGINS.c.entry_key == bindparam("key")))
    .order_by(ORIGINS.c.session_id)
)
# An entry's evidence row joined to the corpus line it cites.
_EVIDENCE_LINE = and_(
    CORPUS_LINES.c.agent == ENTRY_EVIDENCE.c.agent,
    CORPUS_LINES.c.session_id == ENTRY_EVIDENCE.c.session_id,
    CORPUS_LINES.c.line == ENTRY_EVIDENCE.c.line,
)

_ENTRY_EVIDENCE = (
    select(ENTRY_EVIDENCE.c.session_id, ENTRY_EVIDENCE.c.line)
    .where(
        and_(
            ENTRY_EVIDENCE.c.agent == bindparam("agent"),
            ENTRY_EVIDENCE.c.entry_key == bindparam("key"),
        )
    )
    .order_by(ENTRY_EVIDENCE.c.session_id, ENTRY_EVIDENCE.c.line)
)


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
                _EVIDENCE_LINE,
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


def superseded_by(conn: Connection, agent: str, wanted: str) -> tuple[str, str] | None:
    """(old key, live key) when `wanted` (a key or a prefix of one) names an entry a
    supersede replaced: the live entry that holds its slot now, following later merges and
    supersessions along. None when it names no superseded entry."""
    prefix = wanted if wanted.startswith(KEY_PREFIX) else KEY_PREFIX + wanted
    s = SUPERSESSIONS.c
    row = conn.execute(
        select(s.old_key, s.new_key)
        .where(and_(s.agent == agent, s.old_key.startswith(prefix, autoescape=True)))
        .order_by(s.created_at.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    old, current = row.old_key, row.new_key
    for _ in range(100):  # a chain of later changes; bounded against a cycle
        nxt = conn.execute(
            select(s.new_key).where(and_(s.agent == agent, s.old_key == current)).limit(1)
        ).scalar()
        if nxt is None:
            break
        current = nxt
    live = successors(conn, agent, [current]).get(current, current)
    return old, live or current


def successors(conn: Connection, agent: str, keys: Collection[str]) -> dict[str, str | None]:
    """Where entries that left memory went, for each of `keys` that a decision took as a
    target: the live entry merges folded it into (following later merges along), or None
    when a supersede replaced it on the way (what it said is no longer so) or nothing live
    is left of it. A MEMORY.md written before a crash may still show such a key."""
    live = set(
        conn.execute(
            select(ENTRIES.c.key).where(and_(ENTRIES.c.agent == agent, ENTRIES.c.status.in_(HELD)))
        ).scalars()
    )
    out: dict[str, str | None] = {}
    for key in keys:
        seen, current, replaced = {key}, key, False
        while current not in live:
            # The latest decision that took `current` as a target and wrote another entry.
            row = conn.execute(
                select(DECISIONS.c.action, DECISIONS.c.entry_key)
                .where(
                    and_(
                        DECISIONS.c.agent == agent,
                        DECISIONS.c.targets.contains(json.dumps(current)),
                        DECISIONS.c.entry_key.is_not(None),
                    )
                )
                .order_by(DECISIONS.c.id.desc())
                .limit(1)
            ).first()
            if row is None or row.entry_key in seen:
                break
            replaced = replaced or row.action == Action.SUPERSEDE
            seen.add(row.entry_key)
            current = row.entry_key
        if current != key:
            out[key] = None if replaced or current not in live else current
    return out


def live_entries(conn: Connection, agent: str) -> list[tuple[str, str]]:
    """(key, text) of live entries (those MEMORY.md holds) in creation order: the order
    MEMORY.md lists them."""
    return _entries(conn, agent, (EntryStatus.LIVE,))


def archived_entries(conn: Connection, agent: str) -> list[tuple[str, str]]:
    """(key, text) of archived entries (kept, with their lineage, in the archive beside
    MEMORY.md: they did not fit its budget) in creation order."""
    return _entries(conn, agent, (EntryStatus.ARCHIVED,))


def held_entries(conn: Connection, agent: str) -> list[tuple[str, str]]:
    """(key, text) of every entry the memory holds, live or archived, in creation order:
    what a new statement is compared with, what forget and review reach."""
    return _entries(conn, agent, HELD)


def _entries(conn: Connection, agent: str, statuses: Sequence[str]) -> list[tuple[str, str]]:
    rows = conn.execute(_ENTRIES_OF, {"agent": agent, "statuses": list(statuses)})
    return [(k, t) for k, t in rows]


_ENTRIES_OF = (
    select(ENTRIES.c.key, ENTRIES.c.text)
    .where(
        and_(
            ENTRIES.c.agent == bindparam("agent"),
            ENTRIES.c.status.in_(bindparam("statuses", expanding=True)),
        )
    )
    .order_by(ENTRIES.c.created_at, ENTRIES.c.key)
)


def entry_statuses(conn: Connection, agent: str) -> dict[str, str]:
    """Key -> status of every entry the memory holds."""
    return dict(conn.execute(_STATUSES, {"agent": agent, "statuses": list(HELD)}).all())


_STATUSES = select(ENTRIES.c.key, ENTRIES.c.status).where(
    and_(
        ENTRIES.c.agent == bindparam("agent"),
        ENTRIES.c.status.in_(bindparam("statuses", expanding=True)),
    )
)


def live_entries_by_prefix(
    conn: Connection, agent: str, wanted: str, statuses: Sequence[str] = (EntryStatus.LIVE,)
) -> list[tuple[str, str]]:
    """(key, text) of live entries (or of `statuses`) whose key is `wanted` or starts with
    it, by key; a prefix may leave out the `m:`."""
    prefixes = {wanted}
    if not wanted.startswith(KEY_PREFIX):
        prefixes.add(KEY_PREFIX + wanted)
    # autoescape: the prefix is matched literally, whatever characters the user typed.
    starts = [
        or_(ENTRIES.c.key == p, ENTRIES.c.key.startswith(p, autoescape=True)) for p in prefixes
    ]
    return [
        (k, t)
        for k, t in conn.execute(
            select(ENTRIES.c.key, ENTRIES.c.text)
            .where(and_(ENTRIES.c.agent == agent, ENTRIES.c.status.in_(statuses), or_(*starts)))
            .order_by(ENTRIES.c.key)
        )
    ]


def keys_from_sessions(conn: Connection, agent: str, sessions: Sequence[str]) -> list[str]:
    """Keys of the entries with an origin in `sessions`, sorted (a purge's whole-entry rule)."""
    o = ORIGINS.c
    query = select(o.entry_key).where(and_(o.agent == agent, o.session_id.in_(sessions)))
    return sorted({k for (k,) in conn.execute(query)})


def keys_citing(
    conn: Connection, agent: str, sessions: Sequence[str], cited: Collection[tuple[str, int]]
) -> list[str]:
    """Keys of the entries whose evidence cites one of the transcript lines `cited`
    ((session id, line) in `sessions`), sorted: an edited line takes its entries with it."""
    ev = ENTRY_EVIDENCE.c
    query = select(ev.entry_key, ev.session_id, ev.line).where(
        and_(ev.agent == agent, ev.session_id.in_(sessions))
    )
    return sorted({k for k, sid, n in conn.execute(query) if (sid, n) in cited})


def count_origins(
    conn: Connection,
    agent: str,
    *,
    sessions: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
) -> int:
    """How many origin rows name one of `sessions`, or else belong to one of `keys`."""
    o = ORIGINS.c
    which = o.session_id.in_(sessions) if sessions is not None else o.entry_key.in_(keys or [])
    return int(conn.execute(select(func.count()).where(and_(o.agent == agent, which))).scalar_one())


def stated_at(conn: Connection, agent: str, keys: Collection[str]) -> dict[str, datetime]:
    """When each entry of `keys` was last stated by the owner, on the transcripts' clock
    (the newest owner origin; any origin where the owner has none): a later statement of
    the same slot replaces it, an earlier one does not."""
    out: dict[str, datetime] = {}
    owner: dict[str, datetime] = {}
    wanted = list(keys)
    for chunk in (wanted[i : i + 500] for i in range(0, len(wanted), 500)):
        for key, cls, when in conn.execute(_STATED_AT, {"agent": agent, "keys": chunk}):
            if cls == OriginClass.OWNER:
                owner[key] = when
            elif key not in out or when > out[key]:
                out[key] = when
    out.update(owner)
    return out


_STATED_AT = (
    select(ORIGINS.c.entry_key, ORIGINS.c.origin_class, func.max(ORIGINS.c.observed_at))
    .where(
        and_(
            ORIGINS.c.agent == bindparam("agent"),
            ORIGINS.c.entry_key.in_(bindparam("keys", expanding=True)),
            ORIGINS.c.observed_at.is_not(None),
        )
    )
    .group_by(ORIGINS.c.entry_key, ORIGINS.c.origin_class)
)


def spoken_by(
    conn: Connection, agent: str, keys: Collection[str] | None = None
) -> dict[str, frozenset[str]]:
    """The people each entry (of `keys`, else every one with evidence) names as having said
    it: the named speakers of its evidence lines (`corpus_lines.speaker`). An entry of the
    owner's own words, or one stored before lines named anyone, has none."""
    found: dict[str, set[str]] = defaultdict(set)
    if keys is None:
        for key, speaker in conn.execute(_SPOKEN, {"agent": agent}):
            found[key].add(speaker)
    else:
        wanted = list(keys)
        for chunk in (wanted[i : i + 500] for i in range(0, len(wanted), 500)):
            for key, speaker in conn.execute(_SPOKEN_OF, {"agent": agent, "keys": chunk}):
                found[key].add(speaker)
    return {k: frozenset(v) for k, v in found.items()}


_SPOKEN = (
    select(ENTRY_EVIDENCE.c.entry_key, CORPUS_LINES.c.speaker)
    .select_from(
        ENTRY_EVIDENCE.join(
            CORPUS_LINES,
            _EVIDENCE_LINE,
        )
    )
    .where(and_(ENTRY_EVIDENCE.c.agent == bindparam("agent"), CORPUS_LINES.c.speaker.is_not(None)))
    .distinct()
)
_SPOKEN_OF = _SPOKEN.where(ENTRY_EVIDENCE.c.entry_key.in_(bindparam("keys", expanding=True)))
