"""Opening an agent's store: engine, pragmas, migrations, and the lock around a run."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlmodel import Session, create_engine

from dreaming.errors import LockedError, StateError
from dreaming.store.migrations import migrate


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # The sqlite3 module begins transactions lazily and never around DDL, so schema changes
    # would each commit on their own: a migration killed half way, or two processes creating
    # one database at once, would leave a schema no run can open. We begin transactions
    # ourselves (see _begin) and the driver stays out of it.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    # WAL lets status/entries read while a run writes; NORMAL sync is durable at checkpoints,
    # and a transaction either commits whole or not at all, which is what crash safety needs.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    # Freed pages are zeroed: a purged row must not linger in the file (invariant 4).
    cur.execute("PRAGMA secure_delete=ON")
    cur.close()


IMMEDIATE = "dreaming_begin_immediate"


def _begin(conn: Connection) -> None:
    # IMMEDIATE takes the write lock up front (waiting up to busy_timeout for another
    # writer), so a transaction that must write never fails half way on a lock upgrade.
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get(IMMEDIATE) else "BEGIN")


def open_engine(db_path: Path, *, create: bool = True) -> Engine:
    """Open (and migrate) an agent's SQLite database. `create=False` refuses to make one."""
    if not create and not db_path.exists():
        raise StateError(f"{db_path}: no database yet (run `dreaming run --phase light` first)")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(f"sqlite:///{db_path}")
    event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "begin", _begin)
    with engine.connect() as conn:
        conn.info[IMMEDIATE] = True
        try:
            with conn.begin():
                migrate(conn, str(db_path))
        finally:
            conn.info.pop(IMMEDIATE, None)
    return engine


def session(engine: Engine) -> Session:
    return Session(engine, expire_on_commit=False)


@contextlib.contextmanager
def agent_lock(path: Path, agent: str, holder: str) -> Iterator[None]:
    """Hold the agent's exclusive lock for a run. flock is released by the kernel when the
    process dies, so a killed run never leaves a stale lock behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            current = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
            raise LockedError(agent, current) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} {holder}".encode(), 0)
        yield
    finally:
        os.close(fd)
