"""The durable record of forgotten sessions, kept in an append-only file as well as in each
agent's database (`tombstones` rows, and the `sessions` rows marked forgotten): deleting the
database must not bring a forgotten session back. Also the clean-up of temp files a killed
write left behind (they can hold purged text)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol

from sqlalchemy import Connection, bindparam, select

from dreaming.config import file_stem
from dreaming.errors import StorageError
from dreaming.ingest import sessions as session_records
from dreaming.paths import Paths
from dreaming.store.tables import TOMBSTONES


def tombstone_file(paths: Paths, agent: str) -> Path:
    return paths.home / "tombstones" / f"{file_stem(agent)}.jsonl"


def record_tombstones(
    paths: Paths, agent: str, targets: Sequence[tuple[str, str | None]], now: datetime
) -> None:
    """Tombstones also live in an append-only file beside the databases, so that deleting
    an agent's database (its ingestion state) does not bring a forgotten session back."""
    if not targets:
        return
    path = tombstone_file(paths, agent)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        for session_id, session_key in targets:
            row = {"session_id": session_id, "session_key": session_key, "at": now.isoformat()}
            fh.write(json.dumps(row) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def in_db(conn: Connection, agent: str) -> list[tuple[str, str | None]]:
    """(session id, session key) of every session the agent's database holds a tombstone
    for."""
    return [(sid, key) for sid, key in conn.execute(_IN_DB, {"agent": agent})]


_IN_DB = select(TOMBSTONES.c.session_id, TOMBSTONES.c.session_key).where(
    TOMBSTONES.c.agent == bindparam("agent")
)


def file_tombstones(paths: Paths, agent: str, *, kin: bool = True) -> dict[str, str | None]:
    """session id -> session key of every session the agent's tombstone file names, and
    (`kin`) the files of the agents that read the same transcripts (`Paths.kin`: a Claude
    Code source's pooled agent and its projects' agents), so that a session forgotten under
    one never comes back under another."""
    out: dict[str, str | None] = {}
    for name in [agent, *(paths.kin(agent) if kin else ())]:
        for session_id, key in _read_file(tombstone_file(paths, name)).items():
            out.setdefault(session_id, key)
    return out


def _read_file(path: Path) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    try:
        with path.open("rb") as fh:
            for number, raw in enumerate(fh, 1):
                try:
                    row = json.loads(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    # Flipped bytes: which session the line names cannot be known, and a
                    # forgotten session must never come back: fail closed.
                    raise StorageError(
                        str(path),
                        f"line {number} is not valid UTF-8 (damaged bytes)",
                        "this file is the durable record of forgotten sessions and is read"
                        " whole: restore it from a backup, or repair that line by hand (one"
                        ' JSON object per line, {"session_id": ..., "session_key": ...})',
                    ) from None
                except json.JSONDecodeError:
                    continue  # a torn last line from a crash: the database row still holds
                if isinstance(row, dict) and isinstance(row.get("session_id"), str):
                    out[row["session_id"]] = row.get("session_key")
    except FileNotFoundError:
        pass
    return out


def remove_stale_temp_files(paths: Paths, agent: str) -> list[Path]:
    """Delete temp files `atomic_write` left when its process died between write and
    rename. Called under the agent's lock, so no live writer owns them."""
    removed = []
    for folder in paths.file_folders(agent):
        if not folder.is_dir():
            continue
        for path in folder.glob(".*.tmp"):
            if path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


class Forgotten(Protocol):
    """A session a purge forgets, as its selection resolved it."""

    @property
    def session_id(self) -> str: ...
    @property
    def session_key(self) -> str | None: ...
    @property
    def resolved(self) -> bool: ...  # False: an explicit id that matched nothing known


def forget_sessions(
    conn: Connection,
    agent: str,
    sessions: Sequence[str],
    new: Sequence[Forgotten],
    now: datetime,
) -> None:
    """A forget's part in the database: a tombstone row for each `new` one (the file
    follows once the purge committed: `record_tombstones`), and every one of `sessions`
    recorded as forgotten."""
    for t in new:
        conn.execute(
            TOMBSTONES.insert().values(
                agent=agent,
                session_id=t.session_id,
                session_key=t.session_key,
                reason="forgotten",
                created_at=now,
                detail=json.dumps({"resolved": t.resolved}),
            )
        )
    session_records.forget_sessions(conn, agent, sessions)
