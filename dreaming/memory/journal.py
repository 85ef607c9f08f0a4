"""The undo journal: what a run's decisions changed, as it was before, so the run can be
taken back (`dreaming runs undo`).

`lineage.apply_batch` calls `capture` before it touches anything: the first time a run touches an
entry key or a candidate, its whole state goes into one row (an entry with its origins and
evidence; a candidate's decision status). `read` gives them back typed (`EntryImage`), and
the undo puts them back: entries through lineage (which writes them; this module must not
import it, since lineage imports this one), candidates through `restore_candidates`. The
journal holds transcript-derived text, so it is within reach of purges: `forget_sessions` drops
every image that names a purged session (or carries its text) and leaves a `purged` marker,
and a run with a marker cannot be undone (purges win).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BindParameter, Connection, and_, bindparam, delete, select

from dreaming.ingest import candidates as candidates_mod
from dreaming.store.bulk import execute_many
from dreaming.store.dialect import upsert
from dreaming.store.tables import CANDIDATES, ENTRIES, ENTRY_EVIDENCE, JOURNAL, ORIGINS

ENTRY, CANDIDATE, PURGED = "entry", "candidate", "purged"


def _ts(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _entry_images(conn: Connection, agent: str, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The images of those of `keys` that are entries now (three statements for all)."""
    images: dict[str, dict[str, Any]] = {}
    for chunk in _chunks(keys):
        for row in conn.execute(_ENTRY_ROWS, {"agent": agent, "keys": chunk}):
            images[row.key] = {
                "text": row.text,
                "status": row.status,
                "created_at": _ts(row.created_at),
                "updated_at": _ts(row.updated_at),
                "recall_count": row.recall_count,
                "last_recalled_at": _ts(row.last_recalled_at),
                "origins": [],
                "evidence": [],
            }
    found = list(images)
    for chunk in _chunks(found):
        params = {"agent": agent, "keys": chunk}
        for key, s, k, c, t in conn.execute(_ORIGIN_ROWS, params):
            images[key]["origins"].append([s, k, c, _ts(t)])
        for key, s, n in conn.execute(_EVIDENCE_ROWS, params):
            images[key]["evidence"].append([s, int(n)])
    return images


def capture(
    conn: Connection,
    agent: str,
    run_id: int | None,
    keys: Iterable[str],
    candidate_ids: Iterable[int],
) -> None:
    """Record the state of `keys` and `candidate_ids` before `run_id` first changes them
    (a key the run already touched keeps its first image). No run, no journal. A batch of
    decisions captures everything it touches at once, before any of them is applied: each
    key changes only by a decision naming it, so its state then is its state before its
    first decision."""
    if run_id is None:
        return
    now = datetime.now(UTC)
    keys, candidate_ids = list(dict.fromkeys(keys)), list(dict.fromkeys(candidate_ids))
    refs = [*keys, *(str(cid) for cid in candidate_ids)]
    # Only the refs at hand: a run's journal grows with every decision it applies.
    seen: set[tuple[str, str]] = set()
    for chunk in _chunks(refs):
        seen.update(conn.execute(_SEEN, {"agent": agent, "run": run_id, "refs": chunk}).all())
    keys = [k for k in keys if (ENTRY, k) not in seen]
    candidate_ids = [c for c in candidate_ids if (CANDIDATE, str(c)) not in seen]
    images = _entry_images(conn, agent, keys)
    rows: list[dict[str, Any]] = []
    for key in keys:
        image = images.get(key)
        sessions = sorted({o[0] for o in image["origins"]}) if image else []
        rows.append(_row(agent, run_id, ENTRY, key, image, sessions, now))
    states: dict[int, Any] = {}
    for chunk in _chunks(candidate_ids):
        states.update((r.id, r) for r in conn.execute(_CANDIDATE_ROWS, {"ids": chunk}))
    for cid in candidate_ids:
        row = states.get(cid)
        if row is None:
            continue
        image = {
            "status": row.status,
            "decided_evidence": row.decided_evidence,
            "updated_at": _ts(row.updated_at),
        }
        rows.append(_row(agent, run_id, CANDIDATE, str(cid), image, [], now))
    if rows:
        execute_many(conn, _INSERT_JOURNAL, rows)


def _chunks(items: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


_KEYS: BindParameter[Any] = bindparam("keys", expanding=True)
_INSERT_JOURNAL = JOURNAL.insert()
_ENTRY_ROWS = select(ENTRIES).where(
    and_(ENTRIES.c.agent == bindparam("agent"), ENTRIES.c.key.in_(_KEYS))
)
_ORIGIN_ROWS = select(
    ORIGINS.c.entry_key,
    ORIGINS.c.session_id,
    ORIGINS.c.session_key,
    ORIGINS.c.origin_class,
    ORIGINS.c.observed_at,
).where(and_(ORIGINS.c.agent == bindparam("agent"), ORIGINS.c.entry_key.in_(_KEYS)))
_EVIDENCE_ROWS = select(
    ENTRY_EVIDENCE.c.entry_key, ENTRY_EVIDENCE.c.session_id, ENTRY_EVIDENCE.c.line
).where(and_(ENTRY_EVIDENCE.c.agent == bindparam("agent"), ENTRY_EVIDENCE.c.entry_key.in_(_KEYS)))
_SEEN = select(JOURNAL.c.kind, JOURNAL.c.ref).where(
    and_(
        JOURNAL.c.agent == bindparam("agent"),
        JOURNAL.c.run_id == bindparam("run"),
        JOURNAL.c.ref.in_(bindparam("refs", expanding=True)),
    )
)
_CANDIDATE_ROWS = select(
    CANDIDATES.c.id, CANDIDATES.c.status, CANDIDATES.c.decided_evidence, CANDIDATES.c.updated_at
).where(CANDIDATES.c.id.in_(bindparam("ids", expanding=True)))


def _row(
    agent: str,
    run_id: int,
    kind: str,
    ref: str,
    image: dict[str, Any] | None,
    sessions: Sequence[str],
    now: datetime,
) -> dict[str, Any]:
    return {
        "agent": agent,
        "run_id": run_id,
        "kind": kind,
        "ref": ref,
        "before": None if image is None else json.dumps(image, ensure_ascii=False),
        "sessions": " ".join(sessions),
        "created_at": now,
    }


@dataclass(frozen=True, slots=True)
class EntryImage:
    """An entry as it was before a run first changed it, with its origins
    (session id, session key, origin class, observed at) and evidence (session id, line)."""

    text: str
    status: str
    created_at: datetime | None
    updated_at: datetime | None
    recall_count: int
    last_recalled_at: datetime | None
    origins: tuple[tuple[str, str | None, str, datetime | None], ...]
    evidence: tuple[tuple[str, int], ...]

    @classmethod
    def from_json(cls, before: str) -> EntryImage:
        image = json.loads(before)
        return cls(
            text=image["text"],
            status=image["status"],
            created_at=_dt(image["created_at"]),
            updated_at=_dt(image["updated_at"]),
            recall_count=image["recall_count"],
            last_recalled_at=_dt(image["last_recalled_at"]),
            origins=tuple((s, k, c, _dt(t)) for s, k, c, t in image["origins"]),
            evidence=tuple((s, n) for s, n in image["evidence"]),
        )


@dataclass(frozen=True)
class RunJournal:
    """What one run changed: entry keys (with their images) and candidates, and whether a
    purge took part of it away."""

    run_id: int
    entries: dict[str, EntryImage | None]  # None: the run created the entry
    candidates: dict[int, dict[str, Any]]
    purged: bool

    @property
    def empty(self) -> bool:
        return not self.entries and not self.candidates and not self.purged


def read(conn: Connection, agent: str, run_id: int) -> RunJournal:
    entries: dict[str, EntryImage | None] = {}
    candidates: dict[int, dict[str, Any]] = {}
    purged = False
    for kind, ref, before in conn.execute(
        select(JOURNAL.c.kind, JOURNAL.c.ref, JOURNAL.c.before).where(
            and_(JOURNAL.c.agent == agent, JOURNAL.c.run_id == run_id)
        )
    ):
        if kind == ENTRY:
            entries[ref] = EntryImage.from_json(before) if before is not None else None
        elif kind == CANDIDATE and before is not None:
            candidates[int(ref)] = json.loads(before)
        elif kind == PURGED:
            purged = True
    return RunJournal(run_id, entries, candidates, purged)


def later_touching(
    conn: Connection, agent: str, run_id: int, keys: Iterable[str]
) -> dict[int, list[str]]:
    """Later runs whose decisions touched any of `keys`: run id -> the keys."""
    wanted = set(keys)
    out: dict[int, list[str]] = {}
    for later, ref in conn.execute(
        select(JOURNAL.c.run_id, JOURNAL.c.ref).where(
            and_(JOURNAL.c.agent == agent, JOURNAL.c.run_id > run_id, JOURNAL.c.kind == ENTRY)
        )
    ):
        if ref in wanted:
            out.setdefault(int(later), []).append(ref)
    return {r: sorted(keys_) for r, keys_ in sorted(out.items())}


def restore_candidates(conn: Connection, agent: str, journal: RunJournal) -> None:
    """Put every journaled candidate back as it was before the run. The caller commits."""
    rows = [
        {
            "cid": cid,
            "new_status": image["status"],
            "decided": image["decided_evidence"],
            "at": _dt(image["updated_at"]),
        }
        for cid, image in journal.candidates.items()
    ]
    if rows:
        candidates_mod.set_outcomes(conn, rows)


def drop(conn: Connection, agent: str, run_id: int) -> None:
    conn.execute(delete(JOURNAL).where(and_(JOURNAL.c.agent == agent, JOURNAL.c.run_id == run_id)))


def forget_sessions(
    conn: Connection,
    agent: str,
    sessions: Iterable[str],
    carries: Any = None,
    *,
    dry_run: bool = False,
) -> list[int]:
    """Drop every image that names one of `sessions` (or whose text `carries` says holds
    purged text), and mark its run as no longer undoable. Returns the runs marked (with
    `dry_run`, the runs that would be, and nothing changes)."""
    gone = set(sessions)
    hit: dict[int, list[int]] = {}
    for row_id, run_id, sessions_text, before in conn.execute(
        select(JOURNAL.c.id, JOURNAL.c.run_id, JOURNAL.c.sessions, JOURNAL.c.before).where(
            and_(JOURNAL.c.agent == agent, JOURNAL.c.kind == ENTRY)
        )
    ):
        names = set(sessions_text.split())
        if names & gone or (carries is not None and before is not None and carries(before)):
            hit.setdefault(int(run_id), []).append(int(row_id))
    if dry_run:
        return sorted(hit)
    now = datetime.now(UTC)
    for run_id, ids in hit.items():
        conn.execute(delete(JOURNAL).where(JOURNAL.c.id.in_(ids)))
        conn.execute(
            upsert(conn, JOURNAL)
            .values(**_row(agent, run_id, PURGED, "purge", None, [], now))
            .on_conflict_do_nothing()
        )
    return sorted(hit)
