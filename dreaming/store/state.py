"""Per-agent key/value marks (the `agent_state` table): each key typed, one get/put/clear.

Small facts a phase leaves for the next run, each written in the same transaction as the
work it describes so a crash cannot separate them.
"""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import Connection, and_, bindparam, delete, select

from dreaming.store.dialect import insert_ignore, upsert_replace
from dreaming.store.tables import AGENT_STATE


class StateKey(StrEnum):
    CLOCK = "clock"  # the newest message time light has read (ISO 8601)
    RESCORE_PENDING = "rescore_pending"  # light folded lines whose candidates need rescoring
    SCORED_WITH = "scored_with"  # the scoring settings every candidate was last scored with
    REM_INPUT = "rem_input"  # the newest corpus line REM's diary was written from
    REM_DREAMT = "rem_dreamt"  # JSON: the run whose themes stand for REM's input (signature)
    MEMORY_DIRTY = "memory_dirty"  # entries changed since MEMORY.md was last written
    MEMORY_HASH = "memory_hash"  # MEMORY.md's content hash as dreaming last wrote it
    MEMORY_BASE_RUN = "memory_base_run"  # an undo: the run whose pre-run backup to lay over
    REPORT_FILES = "report_files"  # JSON list: where `dreaming report` wrote pages about it
    ARCHIVE_HASH = "archive_hash"  # the archive's content hash as dreaming last wrote it
    AGENT_LINES = "agent_lines"  # "created": the agent's lines were folded creating candidates


_GET = select(AGENT_STATE.c.value).where(
    and_(AGENT_STATE.c.agent == bindparam("agent"), AGENT_STATE.c.key == bindparam("key"))
)


def get(conn: Connection, agent: str, key: StateKey) -> str | None:
    value = conn.execute(_GET, {"agent": agent, "key": key.value}).scalar()
    return str(value) if value is not None else None


def put(conn: Connection, agent: str, key: StateKey, value: str) -> None:
    stmt = upsert_replace(conn, AGENT_STATE, ["agent", "key"], ["value"])
    conn.execute(stmt, {"agent": agent, "key": key.value, "value": value})


def put_if_absent(conn: Connection, agent: str, key: StateKey, value: str) -> None:
    conn.execute(
        insert_ignore(conn, AGENT_STATE), {"agent": agent, "key": key.value, "value": value}
    )


def clear(conn: Connection, agent: str, *keys: StateKey) -> None:
    conn.execute(_CLEAR, {"agent": agent, "keys": [k.value for k in keys]})


# Built once (see `store.compiled`).
_CLEAR = delete(AGENT_STATE).where(
    and_(
        AGENT_STATE.c.agent == bindparam("agent"),
        AGENT_STATE.c.key.in_(bindparam("keys", expanding=True)),
    )
)
