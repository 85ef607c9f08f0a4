"""File cursors (`file_cursors`): where the read of each transcript file stopped.

The light phase writes a file's cursor in the transaction of the lines it covers
(`dreaming.phases.light`); a purge of whole sessions drops their cursors here, so a session
read again starts from its first line.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, and_, delete, func, select

from dreaming.store.tables import FILE_CURSORS


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
