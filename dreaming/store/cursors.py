"""File cursors (`file_cursors`): where the read of each transcript file stopped.

The light phase advances a file's cursor (`advance`) in the transaction of the lines it
covers; a purge of whole sessions drops their cursors here, so a session read again starts
from its first line.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import Connection, and_, bindparam, delete, func, select

from dreaming.store.bulk import execute_many
from dreaming.store.dialect import upsert_replace
from dreaming.store.tables import FILE_CURSORS


class CursorRow(TypedDict):
    """One file's cursor, as `advance` stores it."""

    agent: str
    path: str
    session_id: str
    offset: int
    line: int
    head: str
    size: int
    mtime_ns: int
    updated_at: datetime


_COLUMNS = (
    "agent",
    "path",
    "session_id",
    "offset",
    "line",
    "head",
    "size",
    "mtime_ns",
    "updated_at",
)


def advance(conn: Connection, cursors: Sequence[CursorRow]) -> None:
    """Store where the reads of each `cursor["path"]` stopped (inserted, or replacing the
    last), in one statement."""
    if cursors:
        execute_many(conn, upsert_replace(conn, FILE_CURSORS, ["agent", "path"], _COLUMNS), cursors)


def by_path(conn: Connection, agent: str) -> dict[str, dict[str, Any]]:
    """The agent's cursors, each as its row, by file path."""
    return {r["path"]: dict(r) for r in conn.execute(_BY_PATH, {"agent": agent}).mappings()}


_BY_PATH = select(FILE_CURSORS).where(FILE_CURSORS.c.agent == bindparam("agent"))


def forget_sessions(conn: Connection, agent: str, sessions: Sequence[str]) -> None:
    conn.execute(
        delete(FILE_CURSORS).where(
            and_(FILE_CURSORS.c.agent == agent, FILE_CURSORS.c.session_id.in_(sessions))
        )
    )


def count_sessions(conn: Connection, agent: str, sessions: Sequence[str]) -> int:
    """How many cursors `forget_sessions` would drop."""
    c = FILE_CURSORS.c
    query = select(func.count()).where(and_(c.agent == agent, c.session_id.in_(sessions)))
    return int(conn.execute(query).scalar_one())
