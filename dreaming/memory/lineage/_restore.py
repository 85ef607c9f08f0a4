"""Entries taken back rather than decided: an undo puts entries back from the journal's
images, and `dreaming repair` adopts MEMORY.md's managed lines after the database was lost.

The journal decides what an undo restores (and owns the images); the statements that put an
entry, its origins, its evidence and its index row back are written here, with the rest of
lineage's writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy import Connection, and_, delete, insert, select

from dreaming.memory import entry_index
from dreaming.memory.journal import EntryImage
from dreaming.store.dialect import insert_ignore
from dreaming.store.statuses import HELD
from dreaming.store.tables import ENTRIES, ENTRY_EVIDENCE, ORIGINS, SUPERSESSIONS

ADOPTED = "adopted:MEMORY.md"  # the origin of an entry whose sources are unknown
UNKNOWN = "unknown"  # the origin class of an adopted entry: nobody is known to stand behind it


def restore_entries(
    conn: Connection, agent: str, images: Mapping[str, EntryImage | None]
) -> tuple[list[str], list[str]]:
    """Put each key's entry back as its image shows it (None: the entry did not exist).
    Returns (keys restored, keys removed). The caller commits."""
    restored: list[str] = []
    removed: list[str] = []
    for key, image in images.items():
        existed = _clear_entry(conn, agent, key)
        if image is None:
            if existed:
                removed.append(key)
            continue
        _put_image(conn, agent, key, image)
        restored.append(key)
    return restored, removed


def _clear_entry(conn: Connection, agent: str, key: str) -> bool:
    """Delete the entry under `key` with its origins, evidence and index row. Returns whether
    there was one."""
    existed = conn.execute(
        select(ENTRIES.c.key).where(and_(ENTRIES.c.agent == agent, ENTRIES.c.key == key))
    ).scalar()
    for table in (ORIGINS, ENTRY_EVIDENCE):
        mine = and_(table.c.agent == agent, table.c.entry_key == key)
        conn.execute(delete(table).where(mine))
    conn.execute(delete(ENTRIES).where(and_(ENTRIES.c.agent == agent, ENTRIES.c.key == key)))
    if existed is not None:
        entry_index.remove_entry(conn, agent, key)
    return existed is not None


def _put_image(conn: Connection, agent: str, key: str, image: EntryImage) -> None:
    """The entry as the image shows it, with its origins and evidence; indexed when the
    memory holds it (live or archived)."""
    conn.execute(
        ENTRIES.insert().values(
            agent=agent,
            key=key,
            text=image.text,
            status=image.status,
            created_at=image.created_at,
            updated_at=image.updated_at,
            recall_count=image.recall_count,
            last_recalled_at=image.last_recalled_at,
        )
    )
    if image.origins:
        conn.execute(
            insert_ignore(conn, ORIGINS),
            [
                {
                    "agent": agent,
                    "entry_key": key,
                    "session_id": s,
                    "session_key": k,
                    "origin_class": c,
                    "observed_at": t,
                }
                for s, k, c, t in image.origins
            ],
        )
    if image.evidence:
        conn.execute(
            insert_ignore(conn, ENTRY_EVIDENCE),
            [
                {"agent": agent, "entry_key": key, "session_id": s, "line": n}
                for s, n in image.evidence
            ],
        )
    if image.status in HELD:
        entry_index.add_entry(conn, agent, key, image.text)


def drop_supersessions_of_run(conn: Connection, agent: str, run_id: int) -> None:
    """An undo: the run's supersedes are taken back with the entries they retired."""
    conn.execute(
        delete(SUPERSESSIONS).where(
            and_(SUPERSESSIONS.c.agent == agent, SUPERSESSIONS.c.run_id == run_id)
        )
    )


def adopt_entries(
    conn: Connection, agent: str, lines: Iterable[tuple[str, str]], now: datetime
) -> None:
    """Give each managed MEMORY.md line (key, text) a live entry, indexed, with the one
    origin that says its sources are unknown (`ADOPTED`)."""
    for key, text in lines:
        conn.execute(
            insert(ENTRIES).values(agent=agent, key=key, text=text, created_at=now, updated_at=now)
        )
        entry_index.add_entry(conn, agent, key, text)
        conn.execute(
            insert(ORIGINS).values(
                agent=agent,
                entry_key=key,
                session_id=ADOPTED,
                origin_class=UNKNOWN,
                observed_at=now,
            )
        )
