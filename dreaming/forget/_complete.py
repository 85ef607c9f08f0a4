"""Completing a purge after its database part committed: the tombstone file, the memory
files (the diary entries whose window read a purged session, then every line quoting purged
text), the report files that mention it, the corpus files and MEMORY.md, the backups taken
meanwhile, then the `purges` row and a vacuum, so the purged text is gone from the bytes on
disk too. A purge interrupted anywhere here is completed by the next `forget` or run."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, and_, bindparam, func, select, text, update

from dreaming import faults, text_memo
from dreaming.ingest import corpus, tombstones
from dreaming.memory import memory_sync
from dreaming.paths import Paths
from dreaming.store.dialect import is_postgres
from dreaming.store.tables import PURGES


def complete_pending(engine: Engine, paths: Paths, agent: str) -> int:
    """Finish purges whose database part committed but whose files were not all scrubbed."""
    tombstones.remove_stale_temp_files(paths, agent)
    _tombstone_file_follows(engine, paths, agent)
    with engine.connect() as conn:
        pending = conn.execute(_PENDING, {"agent": agent}).all()
    for purge_id, snippets_json, report_json in pending:
        snippets = set(json.loads(snippets_json or "[]"))
        report = json.loads(report_json or "{}")
        _complete(engine, paths, agent, purge_id, snippets, report)
    if pending and engine.dialect.name == "postgresql":
        _vacuum_postgres(engine)
    elif pending:
        _vacuum_sqlite(engine)
    _forget_texts_of_new_purges(engine, agent)
    return len(pending)


# Every night asks these: built once (see `store.compiled`).
_PENDING = select(PURGES.c.id, PURGES.c.pending, PURGES.c.report).where(
    and_(PURGES.c.agent == bindparam("agent"), PURGES.c.completed_at.is_(None))
)
_NEWEST_PURGE = select(func.max(PURGES.c.id)).where(PURGES.c.agent == bindparam("agent"))

# (database, agent) -> the newest purge this process has emptied its text caches for.
_PURGES_SEEN: dict[tuple[str, str], int] = {}


def _forget_texts_of_new_purges(engine: Engine, agent: str) -> None:
    """Empty this process's text caches (`text_memo`) when the agent has a purge it has not
    accounted for: a scheduler runs for weeks while `forget` runs from the command line, so
    the purge is often another process's. The first look at an agent only takes note: this
    process has worked on nothing of it before."""
    with engine.connect() as conn:
        newest = conn.execute(_NEWEST_PURGE, {"agent": agent}).scalar()
    key = (engine.url.render_as_string(hide_password=True), agent)
    seen = _PURGES_SEEN.get(key)
    _PURGES_SEEN[key] = newest or 0
    if seen is not None and (newest or 0) != seen:
        text_memo.forget_all()


def _tombstone_file_follows(engine: Engine, paths: Paths, agent: str) -> None:
    """The tombstone file follows the database, never leads it: a tombstone written before
    the purge committed would hide a session nothing purged."""
    with engine.connect() as conn:
        in_db = tombstones.in_db(conn, agent)
    in_file = tombstones.file_tombstones(paths, agent, kin=False)
    missing = [(sid, key) for sid, key in in_db if sid not in in_file]
    if missing:
        tombstones.record_tombstones(paths, agent, missing, datetime.now(UTC))


def _complete(
    engine: Engine,
    paths: Paths,
    agent: str,
    purge_id: int,
    snippets: set[str],
    report: dict[str, Any],
) -> None:
    """One pending purge: its memory files, the report files, the corpus files and MEMORY.md,
    the backups taken meanwhile, then its row completed (the crash points `forget.*` fall
    between these)."""
    # Imported here: every night asks whether a purge was cut short, and seldom is one.
    from ._derived import remove_entries
    from ._reports import keep_recorded, plan_reports, unlink_reports
    from ._scrub import backup_carries, needles_of, scrub_backups, scrub_files

    entries: list[str] = report.get("entries_removed", [])
    remove_entries(paths, agent, report.get("diary_entries_removed", []))
    scrub_files(paths, agent, snippets, entries, dry=False)
    # The sessions this forget tombstoned, by id (a rederive's report names none).
    sessions = [s["session_id"] for s in report.get("sessions", []) if s["status"] == "resolved"]
    with engine.connect() as conn:
        listing = plan_reports(conn, paths, agent, sessions, needles_of(snippets), entries)
    reports_removed = unlink_reports(listing)
    faults.checkpoint("forget.after_files")
    corpus.flush_files(engine, agent, paths.corpus_dir(agent))
    memory_sync.write(engine, agent, memory_sync.Files.of(paths, agent), run_id=None)
    # The backup memory_sync just took of the pre-purge file must not survive either.
    needles = needles_of(snippets)
    with engine.begin() as conn:
        carrying = [
            (backup_id, content)
            for backup_id, content in memory_sync.backups(conn, agent)
            if backup_carries(content, needles, entries)
        ]
        scrub_backups(conn, carrying, needles, entries)
        keep_recorded(conn, agent, reports_removed)
        faults.checkpoint("forget.before_complete")
        conn.execute(
            update(PURGES)
            .where(PURGES.c.id == purge_id)
            .values(completed_at=datetime.now(UTC), pending="[]")
        )
        if not is_postgres(conn):
            # FTS5 keeps deleted terms in old segments until they merge: merge them now.
            conn.execute(text("INSERT INTO entries_fts(entries_fts) VALUES('optimize')"))


def _vacuum_sqlite(engine: Engine) -> None:
    """secure_delete zeroes freed pages, but a b-tree page that SQLite rebalances can keep
    old cell bytes in its unused space, and old frames of the write-ahead log still hold
    deleted rows: rebuild the file and truncate the log, so the purge is complete in the
    bytes on disk, not just in the tables. (Seen on LoCoMo: one purged candidate left
    readable in a live page's free space without this.)"""
    raw = engine.raw_connection()  # outside any transaction, as VACUUM requires
    try:
        cursor = raw.cursor()
        for statement in ("PRAGMA wal_checkpoint(TRUNCATE)", "VACUUM"):
            cursor.execute(statement)
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cursor.close()
    finally:
        raw.close()


# The tables a purge deletes from: vacuumed after it in a fleet database.
_PURGED_TABLES = (
    "corpus_lines",
    "candidates",
    "candidate_evidence",
    "entries",
    "entries_fts",
    "origins",
    "entry_evidence",
    "recalls",
    "llm_calls",
    "memory_backups",
    "runs",
)


def _vacuum_postgres(engine: Engine) -> None:
    """Reclaim the dead row versions a purge left: until VACUUM runs they still hold the
    text in the table files. (PostgreSQL offers no secure_delete: freed space is reused,
    not zeroed, and the WAL and backups are the operator's to expire; docs/fleet.md.)"""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM " + ", ".join(_PURGED_TABLES))
