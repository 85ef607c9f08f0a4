"""Keeping MEMORY.md and the database in agreement, across crashes and human edits.

The database is the source of truth for managed entries. A change to entries sets a
`memory_dirty` mark in the same transaction; the file is then rendered from the database,
the previous file is kept as a backup row, the new one written atomically, and only then is
the mark cleared together with the hash of what was written. So after a crash:

- mark set: the file may be old; the next run renders and writes it (repair);
- mark clear and the file's hash is ours: in agreement;
- mark clear and the hash differs: a person edited the file. Entries (compact lines or
  legacy blocks) they edited are left alone and reported; entries they deleted retire
  (their decision wins), and the write that follows drops a group heading left empty.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Connection, Engine, and_, delete, select, update

from dreaming import faults
from dreaming.ingest import salience
from dreaming.memory import memory_file
from dreaming.memory.lineage import live_entries, remove_entries
from dreaming.store import state
from dreaming.store.state import StateKey
from dreaming.store.tables import MEMORY_BACKUPS


@dataclass
class SyncReport:
    written: bool = False
    repaired: bool = False
    edited_by_person: list[str] = field(default_factory=list)
    removed_by_person: list[str] = field(default_factory=list)
    # Keys whose managed line appeared more than once (a paste, a merge conflict): the
    # copies were removed, one line kept.
    duplicates_removed: list[str] = field(default_factory=list)
    chars: int = 0


def content_hash(content: str) -> str:
    return "b2:" + hashlib.blake2b(content.encode("utf-8"), digest_size=16).hexdigest()


def mark_dirty(conn: Connection, agent: str, base_run: int | None = None) -> None:
    state.put(conn, agent, StateKey.MEMORY_DIRTY, "1")
    if base_run is not None:
        state.put(conn, agent, StateKey.MEMORY_BASE_RUN, str(base_run))


def _read(path: Path) -> str | None:
    return memory_file.load_text(path)


def operator_text(content: str) -> str:
    """The file with every managed line and heading taken out: the operator's own text."""
    return memory_file.apply_entries(memory_file.parse(content), []).render()


def _base(conn: Connection, agent: str, run_id: int, current: str) -> str | None:
    """MEMORY.md as it was before run `run_id` first changed it, when laying entries into
    it keeps the operator's text as it is now and no block was edited by a person since;
    else None (the entries go into the current file)."""
    value = conn.execute(
        select(MEMORY_BACKUPS.c.content)
        .where(and_(MEMORY_BACKUPS.c.agent == agent, MEMORY_BACKUPS.c.run_id == run_id))
        .order_by(MEMORY_BACKUPS.c.id)
        .limit(1)
    ).scalar()
    if value is None or memory_file.parse(current).edited_blocks():
        return None
    return str(value) if operator_text(str(value)) == operator_text(current) else None


def reconcile(engine: Engine, agent: str, path: Path) -> SyncReport:
    """Before a run changes entries: repair after a crash, or take in a person's edits."""
    report = SyncReport()
    current = _read(path)
    with engine.begin() as conn:
        dirty = state.get(conn, agent, StateKey.MEMORY_DIRTY) == "1"
        written = state.get(conn, agent, StateKey.MEMORY_HASH)
        live = dict(live_entries(conn, agent))
        if current is None or dirty or written is None or content_hash(current) == written:
            needs_write = dirty or (current is None and bool(live))
        else:
            doc = memory_file.parse(current)
            report.edited_by_person = sorted(doc.edited_keys(live))
            present = doc.holds(live)
            report.removed_by_person = sorted(k for k in live if k not in present)
            if report.removed_by_person:
                remove_entries(conn, agent, report.removed_by_person)
                mark_dirty(conn, agent)
            needs_write = bool(report.removed_by_person)
            if not needs_write:
                # Take the edited file as the new agreed state.
                state.put(conn, agent, StateKey.MEMORY_HASH, content_hash(current))
    if needs_write:
        report.repaired = dirty
        write(engine, agent, path, run_id=None, report=report)
    return report


def render(
    conn: Connection, agent: str, path: Path, base: str | None = None
) -> tuple[str | None, str]:
    """(current file content or None, the content the database says it should have). The
    entries are laid into `base` when given (an undo restores the file a run started from),
    else into the current file."""
    current = _read(path)
    doc = memory_file.parse((current or "") if base is None else base)
    entries = live_entries(conn, agent)
    return current, memory_file.apply_entries(doc, entries, group_of=salience.group_of).render()


def write(
    engine: Engine,
    agent: str,
    path: Path,
    run_id: int | None,
    report: SyncReport | None = None,
    *,
    backup: bool = True,
) -> SyncReport:
    """Render MEMORY.md from the database, back up the old file, write atomically, clear
    the dirty mark. Safe to repeat: a crash anywhere here leaves the mark set."""
    report = report or SyncReport()
    with engine.connect() as conn:
        # An undo's mark: lay the entries into the file that run started from.
        run = state.get(conn, agent, StateKey.MEMORY_BASE_RUN)
        base = _base(conn, agent, int(run), _read(path) or "") if run is not None else None
        current, new = render(conn, agent, path, base)
    if current is not None:
        seen = Counter(b.key for b in memory_file.parse(current).blocks if not b.edited)
        report.duplicates_removed = sorted(k for k, n in seen.items() if n > 1)
    report.chars = len(new)
    if backup and current is not None and current != new:
        with engine.begin() as conn:
            latest = conn.execute(
                select(MEMORY_BACKUPS.c.content)
                .where(MEMORY_BACKUPS.c.agent == agent)
                .order_by(MEMORY_BACKUPS.c.id.desc())
                .limit(1)
            ).scalar()
            if latest != current:
                conn.execute(
                    MEMORY_BACKUPS.insert().values(
                        agent=agent, run_id=run_id, content=current, created_at=datetime.now(UTC)
                    )
                )
    faults.checkpoint("memory.before_write")
    if current != new and not (current is None and new == ""):
        memory_file.atomic_write(path, new)
        report.written = True
    faults.checkpoint("memory.after_write")
    with engine.begin() as conn:
        state.clear(conn, agent, StateKey.MEMORY_DIRTY, StateKey.MEMORY_BASE_RUN)
        state.put(conn, agent, StateKey.MEMORY_HASH, content_hash(new))
    return report


def backups(conn: Connection, agent: str) -> list[tuple[int, str]]:
    """Every MEMORY.md backup the agent has, as (id, content)."""
    return [
        (int(i), str(c))
        for i, c in conn.execute(
            select(MEMORY_BACKUPS.c.id, MEMORY_BACKUPS.c.content).where(
                MEMORY_BACKUPS.c.agent == agent
            )
        ).all()
    ]


def backup(conn: Connection, backup_id: int) -> str:
    return str(
        conn.execute(
            select(MEMORY_BACKUPS.c.content).where(MEMORY_BACKUPS.c.id == backup_id)
        ).scalar_one()
    )


def replace_backup(conn: Connection, backup_id: int, content: str) -> None:
    """Keep a backup as `content` (a purge scrubbed it); one left blank goes."""
    if content.strip():
        conn.execute(
            update(MEMORY_BACKUPS).where(MEMORY_BACKUPS.c.id == backup_id).values(content=content)
        )
    else:
        conn.execute(delete(MEMORY_BACKUPS).where(MEMORY_BACKUPS.c.id == backup_id))
