"""What one session read commits, in one transaction: its new corpus lines folded into
candidates, the rescore mark, the days to write out, the clock, the file's cursor and the
session's record, in that order, so the cursor never runs ahead of the work it covers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from dreaming.ingest import corpus
from dreaming.ingest.candidates import Folder, advance_clock
from dreaming.ingest.sessions import now, upsert_session
from dreaming.messages import SessionFile
from dreaming.phases.light._read import Read
from dreaming.phases.light._summary import LightSummary
from dreaming.store import cursors, state
from dreaming.store.state import StateKey

# Set with every read's commit, cleared once the run has rescored: a run killed between the
# two leaves it behind, so the next run rescores even though it reads nothing new.
RESCORE_KEY = StateKey.RESCORE_PENDING


@dataclass
class RunMarks:
    """The per-run state a read's commit keeps current, as committed so far by this run
    (light holds the agent's lock, and nothing else writes them): the rescore mark is
    written by the first commit only, the clock only when a read moves it. An agent of
    fifty small sessions otherwise spends a tenth of its statements re-writing them."""

    clock: datetime | None
    rescore_marked: bool = False

    def committed(self, newest: datetime | None) -> None:
        """A read's transaction committed: what it wrote now stands."""
        self.rescore_marked = True
        if newest is not None:
            self.clock = newest if self.clock is None else max(self.clock, newest)


def commit_read(
    conn: Connection,
    folder: Folder,
    read: Read,
    st: os.stat_result,
    values: dict[str, Any],
    existing: dict[str, Any] | None,
    summary: LightSummary,
    marks: RunMarks,
) -> set[int]:
    """Write one read of `read.reader.session` in the caller's transaction (who calls
    `marks.committed` once it commits). Returns the candidates its lines gave evidence to."""
    sf = read.reader.session
    agent = sf.agent
    touched, days = _store_lines(conn, folder, sf, read.rows, summary)
    if not marks.rescore_marked:
        state.put_if_absent(conn, agent, RESCORE_KEY, "1")
    corpus.mark_dirty(conn, agent, days)
    advance_clock(conn, agent, read.newest, marks.clock)
    end = read.reader.cursor
    cursor: cursors.CursorRow = {
        "agent": agent,
        "path": str(sf.path),
        "session_id": sf.session_id,
        "offset": end.offset,
        "line": end.line,
        "head": end.head,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "updated_at": now(),
    }
    cursors.advance(conn, cursor)
    upsert_session(conn, values, existing, read=True)
    return touched


def _store_lines(
    conn: Connection,
    folder: Folder,
    sf: SessionFile,
    rows: list[dict[str, Any]],
    summary: LightSummary,
) -> tuple[set[int], set[str]]:
    """Insert the rows not stored yet and fold them. Returns the candidates they gave
    evidence to, and the days they fall on."""
    added = corpus.add_lines(conn, sf.agent, sf.session_id, rows)
    if not added:
        return set(), set()
    stats = folder.fold(conn, added)
    summary.add_fold(stats)
    summary.corpus_lines += len(added)
    return set(stats.touched), {r["day"] for _, r in added}
