"""What a batch of session reads commits, in one transaction: their new corpus lines folded
into candidates, the rescore mark, the days to write out, the clock, the files' cursors and
the sessions' records, so a cursor never runs ahead of the work it covers.

Light reads files one by one but commits them in batches (`Batch`): an agent's night of fifty
small sessions is a few dozen statements in one transaction rather than a dozen statements
and a commit per file. A batch is cut where its rows would hold too much in memory, and
before a read that must first purge what an edited file no longer says."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from dreaming.ingest import corpus
from dreaming.ingest.candidates import Folder, advance_clock
from dreaming.ingest.sessions import Upsert, now, upsert_sessions
from dreaming.phases.light._read import Read
from dreaming.phases.light._summary import LightSummary
from dreaming.store import cursors, state
from dreaming.store.state import StateKey

# Set with every read's commit, cleared once the run has rescored: a run killed between the
# two leaves it behind, so the next run rescores even though it reads nothing new.
RESCORE_KEY = StateKey.RESCORE_PENDING

# A batch commits once its reads hold this many corpus rows: a few MB of Python objects,
# so a night over a gigabyte of transcripts holds no more than a small one.
BATCH_ROWS = 4000


@dataclass
class RunMarks:
    """The per-run state a read's commit keeps current, as committed so far by this run
    (light holds the agent's lock, and nothing else writes them): the rescore mark is
    written by the first commit only, the clock only when a read moves it."""

    clock: datetime | None
    rescore_marked: bool = False

    def committed(self, newest: datetime | None) -> None:
        """A batch's transaction committed: what it wrote now stands."""
        self.rescore_marked = True
        if newest is not None:
            self.clock = newest if self.clock is None else max(self.clock, newest)


@dataclass(frozen=True, slots=True)
class Queued:
    """One completed read waiting for its batch's commit, with what its cursor and session
    record will say."""

    read: Read  # its stat (`read.st`) is what the cursor records
    values: dict[str, Any]
    existing: dict[str, Any] | None


@dataclass
class Batch:
    """The reads and session records light has gathered since its last commit."""

    reads: list[Queued] = field(default_factory=list)
    records: list[Upsert] = field(default_factory=list)  # sessions not read: records only
    rows: int = 0

    def add(self, queued: Queued) -> None:
        self.reads.append(queued)
        self.rows += len(queued.read.rows)

    @property
    def full(self) -> bool:
        return self.rows >= BATCH_ROWS

    @property
    def newest(self) -> datetime | None:
        stamps = [q.read.newest for q in self.reads if q.read.newest is not None]
        return max(stamps) if stamps else None

    def __bool__(self) -> bool:
        return bool(self.reads or self.records)


def commit_batch(
    conn: Connection,
    folder: Folder | None,
    batch: Batch,
    summary: LightSummary,
    marks: RunMarks,
    agent: str,
) -> set[int]:
    """Write `batch` of `agent` in the caller's transaction (who calls `marks.committed` once
    it commits). Returns the candidates its lines gave evidence to. `folder`: what its lines
    are folded into (None only for a batch that read no lines)."""
    touched: set[int] = set()
    if batch.reads:
        assert folder is not None, "a batch that read lines folds them"
        touched, days = _store_lines(conn, folder, batch.reads, summary)
        if not marks.rescore_marked:
            state.put_if_absent(conn, agent, RESCORE_KEY, "1")
        corpus.mark_dirty(conn, agent, days)
        advance_clock(conn, agent, batch.newest, marks.clock)
        cursors.advance(conn, [_cursor(q) for q in batch.reads])
    reads: list[Upsert] = [(q.values, q.existing, True) for q in batch.reads]
    upsert_sessions(conn, [*batch.records, *reads])
    return touched


def _cursor(q: Queued) -> cursors.CursorRow:
    sf, end = q.read.reader.session, q.read.reader.cursor
    return {
        "agent": sf.agent,
        "path": str(sf.path),
        "session_id": sf.session_id,
        "offset": end.offset,
        "line": end.line,
        "head": end.head,
        "size": q.read.st.st_size,
        "mtime_ns": q.read.st.st_mtime_ns,
        "updated_at": now(),
    }


def _store_lines(
    conn: Connection, folder: Folder, reads: list[Queued], summary: LightSummary
) -> tuple[set[int], set[str]]:
    """Insert the rows not stored yet and fold them, file by file. Returns the candidates
    they gave evidence to, and the days they fall on."""
    added = corpus.add_files(
        conn, folder.agent, [q.read.rows for q in reads], [q.read.times for q in reads]
    )
    lines = sum(len(a) for a in added)
    if not lines:
        return set(), set()
    # The claims the reading child extracted, by row (the very dicts `added` holds; by
    # identity: two files' rows may share a session id and line, only the first is stored).
    known = {
        id(row): found
        for q in reads
        if q.read.claims is not None
        for row, found in zip(q.read.rows, q.read.claims, strict=True)
        if found is not None
    }
    stats = folder.fold_files(conn, [a for a in added if a], known)
    summary.add_fold(stats)
    summary.corpus_lines += lines
    return set(stats.touched), {r["day"] for a in added for _, r in a}
