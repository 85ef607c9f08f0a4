"""Session records (`sessions`): one per session file, its admission and metadata,
inserted when the light phase first sees it, updated when read or when what it rests on
changed, and marked forgotten by a forget (`forget_sessions`, for `tombstones`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, insert, select, update

from dreaming.ingest.admission import Status
from dreaming.messages import SessionFile
from dreaming.store.bulk import execute_many
from dreaming.store.tables import SESSIONS


def utc(ts: datetime | None) -> datetime | None:
    return ts.astimezone(UTC) if ts is not None else None


def now() -> datetime:
    return datetime.now(UTC)


def session_values(
    sf: SessionFile, status: Status, reason: str | None, trust: str | None
) -> dict[str, Any]:
    return {
        "agent": sf.agent,
        "session_id": sf.session_id,
        "path": str(sf.path),
        "format": sf.format.value if sf.format else None,
        "session_key": sf.session_key,
        "channel": sf.channel,
        "chat_type": sf.chat_type,
        "external_source": sf.external_source,
        "participants": json.dumps(list(sf.participants)),
        "kind": sf.kind.value,
        "created_at": utc(sf.created_at),
        "status": status.value,
        "reason": reason,
        "classified_by": sf.classified_by,
        "trust": trust,
    }


def records(conn: Connection, agent: str) -> dict[str, dict[str, Any]]:
    """The agent's session records, each as its row, by session id."""
    return {r["session_id"]: dict(r) for r in conn.execute(_RECORDS, {"agent": agent}).mappings()}


_RECORDS = select(SESSIONS).where(SESSIONS.c.agent == bindparam("agent"))


_INSERT_SESSION = insert(SESSIONS)
_UPDATE_SESSION = update(SESSIONS).where(
    and_(SESSIONS.c.agent == bindparam("b_agent"), SESSIONS.c.session_id == bindparam("b_sid"))
)


# One session record to write: (its values now, the stored record or None, whether it was read)
Upsert = tuple[dict[str, Any], dict[str, Any] | None, bool]


def upsert_session(
    conn: Connection, values: dict[str, Any], existing: dict[str, Any] | None, read: bool
) -> None:
    upsert_sessions(conn, [(values, existing, read)])


def upsert_sessions(conn: Connection, records: Sequence[Upsert]) -> None:
    """Insert the new records and update the changed columns of the known ones, in one
    statement for the new and one for each set of changed columns."""
    at = now()
    new: list[dict[str, Any]] = []
    updates: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for values, existing, read in records:
        if existing is None:
            new.append({**values, "first_seen": at, "last_read": at if read else None})
            continue
        changed = {k: v for k, v in values.items() if existing.get(k) != v}
        if read:
            changed["last_read"] = at
        if changed:
            params = {"b_agent": values["agent"], "b_sid": values["session_id"], **changed}
            updates.setdefault(tuple(sorted(changed)), []).append(params)
    if new:
        execute_many(conn, _INSERT_SESSION, new)
    for same_columns in updates.values():
        execute_many(conn, _UPDATE_SESSION, same_columns)


def forget_sessions(conn: Connection, agent: str, sessions: Sequence[str]) -> None:
    """Record `sessions` as forgotten (a forget's part here; the tombstones say why)."""
    conn.execute(
        update(SESSIONS)
        .where(and_(SESSIONS.c.agent == agent, SESSIONS.c.session_id.in_(sessions)))
        .values(status=Status.FORGOTTEN, reason="forgotten")
    )


def may_have_changed(sf: SessionFile, cursors: dict[str, dict[str, Any]]) -> bool:
    """False when the file is as it was when last read (an unclassified session's metadata
    was looked for then, and found missing): no need to read its head again every night."""
    cursor = cursors.get(str(sf.path))
    if cursor is None:
        return True
    try:
        st = sf.path.stat()
    except OSError:
        return True
    return (cursor["size"], cursor["mtime_ns"]) != (st.st_size, st.st_mtime_ns)


# What an unread session's record must keep up to date: its admission and what it rests on.
# (Timestamps are left out: SQLite gives them back without a zone, so they never compare
# equal, and a write per unchanged file each night is what this avoids.)
_ADMISSION_KEYS = (
    "status",
    "reason",
    "classified_by",
    "trust",
    "session_key",
    "channel",
    "chat_type",
    "external_source",
    "kind",
)


def differs(values: dict[str, Any], existing: dict[str, Any] | None) -> bool:
    return existing is None or any(existing.get(k) != values[k] for k in _ADMISSION_KEYS)
