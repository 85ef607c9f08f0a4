"""A scheduler's job store as other processes see it (`jobs list`, `scheduler status`): where
each service keeps its store and lock, and what a store holds, read without writing.

The store itself is APScheduler's SQLAlchemyJobStore, written only by the service that owns
it; here its table definition is borrowed to read the next fire times, so nothing else
spells its columns.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sqlite3
import urllib.parse
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.util import utc_timestamp_to_datetime
from sqlalchemy import create_engine, select
from sqlalchemy.exc import SQLAlchemyError

from dreaming.paths import Paths

Executor = Literal["in-process", "procrastinate"]


def store_name(executor: Executor = "in-process") -> str:
    """The in-process service has one store per state folder; a procrastinate-executor
    service has one per host, so a second one elsewhere (for availability) keeps its own."""
    return "scheduler" if executor == "in-process" else f"scheduler-{socket.gethostname()}"


def store_path(paths: Paths, name: str = "scheduler") -> Path:
    return paths.home / f"{name}.sqlite"


def store_url(paths: Paths, name: str = "scheduler") -> str:
    return f"sqlite:///{store_path(paths, name)}"


def lock_path(paths: Paths, name: str = "scheduler") -> Path:
    return paths.home / "locks" / f"{name}.lock"


@dataclass(frozen=True)
class StoredSchedule:
    """One store's schedule: job name -> next fire time (None: paused), and whether the
    service that owns the store runs now (it holds the store's lock)."""

    name: str
    path: Path
    running: bool
    holder: str | None  # what the running service wrote in its lock file
    next_fire: dict[str, datetime | None]

    def to_dict(self) -> dict[str, object]:
        return {
            "store": self.name,
            "path": str(self.path),
            "running": self.running,
            "holder": self.holder,
            "jobs": {
                name: fire.isoformat() if fire else None
                for name, fire in sorted(self.next_fire.items())
            },
        }


def read_schedules(paths: Paths) -> list[StoredSchedule]:
    """The stores this host's services keep in the state folder, those that exist."""
    names = (store_name("in-process"), store_name("procrastinate"))
    return [found for name in names if (found := read_schedule(paths, name)) is not None]


def read_schedule(paths: Paths, name: str = "scheduler") -> StoredSchedule | None:
    path = store_path(paths, name)
    if not path.is_file():
        return None
    running, holder = _lock_holder(lock_path(paths, name))
    return StoredSchedule(name, path, running, holder, _next_fire_times(path))


def _next_fire_times(path: Path) -> dict[str, datetime | None]:
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    # Read only at the SQLite level: looking must never create or change the store.
    engine = create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True))
    table = SQLAlchemyJobStore(engine=engine).jobs_t
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(table.c.id, table.c.next_run_time)).all()
    except SQLAlchemyError:  # a store the service created but never filled: no table yet
        return {}
    finally:
        engine.dispose()
    return {
        str(job_id): utc_timestamp_to_datetime(fire) if fire is not None else None
        for job_id, fire in rows
    }


def _lock_holder(lock: Path) -> tuple[bool, str | None]:
    """Whether a service holds `lock`, and what it wrote there. Probing takes a shared lock
    for an instant; the service retries its own for longer than that (`_service_lock`)."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False, None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
            return True, text or None
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        return False, None
    finally:
        os.close(fd)
