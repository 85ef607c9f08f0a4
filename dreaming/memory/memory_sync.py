"""Keeping MEMORY.md, its archive and the database in agreement, across crashes and human
edits.

The database is the source of truth for managed entries. A change to entries sets a
`memory_dirty` mark in the same transaction; the files are then rendered from the database:
which entries MEMORY.md holds under its capacity budget and which are archived
(`dreaming.memory.capacity`, recorded as the entries' statuses, the mark still set), the
previous MEMORY.md kept as a backup row, the archive and MEMORY.md written atomically, and
only then is the mark cleared together with the hash of what was written. The archive is
written first and keeps the entries coming back to MEMORY.md until MEMORY.md holds them: at
no point of a write is an entry in neither file. So after a crash:

- mark set: the files may be old; the next run renders and writes them (repair);
- mark clear and the file's hash is ours: in agreement;
- mark clear and the hash differs: a person edited the file. Entries (compact lines or
  legacy blocks) they edited are left alone and reported; entries they deleted retire
  (their decision wins), and the write that follows drops a group heading left empty.

The archive is ours alone: one that is not what the database says is rewritten. Placement
is computed again before every run changes entries (the agent's clock, a recall, the budget
or the operator's text may have moved it), and the files follow when it moved.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Connection, Engine, and_, delete, select, update

from dreaming import faults
from dreaming.config import Capacity
from dreaming.ingest import salience
from dreaming.memory import archive, capacity, memory_file
from dreaming.memory.capacity import Placement
from dreaming.memory.lineage import live_entries, remove_entries
from dreaming.paths import Paths
from dreaming.store import state
from dreaming.store.state import StateKey
from dreaming.store.tables import MEMORY_BACKUPS
from dreaming.text_memo import text_cache


@dataclass(frozen=True)
class Files:
    """An agent's MEMORY.md, the archive beside it, and the budget MEMORY.md is held to."""

    memory: Path
    archive: Path
    capacity: Capacity = field(default_factory=Capacity.unbounded)
    # The settings' `[salience]` cues, which with the default lexicon decide headings.
    salience_extra: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, paths: Paths, agent: str) -> Files:
        return cls(
            paths.memory_file(agent),
            paths.archive_file(agent),
            paths.capacity(agent),
            paths.settings.salience.extra(),
        )

    @functools.cached_property
    def lexicon(self) -> salience.Lexicon:
        """The effective lexicon, built when an entry is first placed: every run checks
        MEMORY.md (`repair.adopt`), and a quiet night then places nothing; building the
        lexicon's cue lists is ~80 ms of a process's start."""
        return salience.lexicon_for(self.salience_extra)

    def group_of(self, text: str) -> str:
        """The heading an entry goes under, by this agent's effective lexicon."""
        return group_of(text, self.lexicon)


@dataclass
class SyncReport:
    written: bool = False
    repaired: bool = False
    edited_by_person: list[str] = field(default_factory=list)
    removed_by_person: list[str] = field(default_factory=list)
    # Keys whose managed line appeared more than once (a paste, a merge conflict): the
    # copies were removed, one line kept.
    duplicates_removed: list[str] = field(default_factory=list)
    chars: int = 0  # MEMORY.md as written, as the agent counts them (`capacity.measure`)
    lines: int = 0
    max_chars: int | None = None
    max_lines: int | None = None
    unit: str = "chars"  # what chars and max_chars count: "chars", or "bytes" (Claude Code)
    archived: int = 0  # entries in the archive after the write
    archived_now: list[str] = field(default_factory=list)  # moved there by this write
    restored: list[str] = field(default_factory=list)  # back in MEMORY.md with this write
    over: str | None = None  # the operator's text alone is over the budget: why
    archive_repaired: bool = False  # the archive was not what the database says

    def took(self, placement: Placement) -> None:
        self.chars, self.lines = placement.chars, placement.lines
        self.max_chars, self.max_lines = placement.max_chars, placement.max_lines
        self.unit = placement.unit
        self.archived = len(placement.archived)
        self.over = placement.over


@text_cache(65_536)
def group_of(text: str, lexicon: salience.Lexicon | None = None) -> str:
    """The heading an entry goes under (`salience.group_of`), once per text and lexicon:
    every write lays out every entry held, in MEMORY.md or the archive."""
    return salience.group_of(text, lexicon)


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


def reconcile(engine: Engine, agent: str, files: Files) -> SyncReport:
    """Before a run changes entries: repair after a crash, take in a person's edits, and
    follow a placement that moved (or an archive that is not ours)."""
    report = SyncReport()
    current = _read(files.memory)
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
        if not needs_write:
            wanted = render(conn, agent, files)
            report.took(wanted.placement)
            if capacity.unsettled(conn, agent, wanted.placement):
                needs_write = True
            elif (archive.read(files.archive) or "") != wanted.archive:
                needs_write = report.archive_repaired = True
    if needs_write:
        report.repaired = dirty
        write(engine, agent, files, run_id=None, report=report)
    return report


@dataclass(frozen=True)
class Rendered:
    """The files as the database says they should be, beside MEMORY.md as it is."""

    current: str | None  # MEMORY.md now (None: no file)
    memory: str
    archive: str  # "": no entry archived, no file
    placement: Placement
    texts: dict[str, str]  # key -> text of every entry held, in creation order
    parsed: memory_file.Document | None = None  # `current` parsed, when it was laid into


def render(conn: Connection, agent: str, files: Files, base: str | None = None) -> Rendered:
    """MEMORY.md and the archive as the database says they should be. The entries are laid
    into `base` when given (an undo restores the file a run started from), else into the
    current file, as many as the budget holds; the rest are archived."""
    current = _read(files.memory)
    doc = memory_file.parse((current or "") if base is None else base)
    parsed = doc if base is None and current is not None else None
    cap = files.capacity
    # What each entry is worth is read only when they do not all fit.
    worths = capacity.worth(conn, agent, cap.half_life_days, valued=False)
    placement, memory = capacity.place(
        doc,
        worths,
        cap,
        crlf=is_crlf(files.memory),
        group_of=files.group_of,
        valued=lambda: capacity.worth(conn, agent, cap.half_life_days),
    )
    texts = {w.key: w.text for w in worths}
    archived = archive.render([(k, texts[k]) for k in placement.archived], files.group_of)
    return Rendered(current, memory, archived, placement, texts, parsed)


def is_crlf(path: Path) -> bool:
    """Whether the file uses CRLF line endings (`memory_file.atomic_write` keeps them)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    end = head.find(b"\n")
    return end > 0 and head[end - 1 : end] == b"\r"


def write(
    engine: Engine,
    agent: str,
    files: Files,
    run_id: int | None,
    report: SyncReport | None = None,
    *,
    backup: bool = True,
) -> SyncReport:
    """Render MEMORY.md and its archive from the database, record where each entry went,
    back up the old MEMORY.md, write both atomically, clear the dirty mark. Safe to repeat:
    a crash anywhere here leaves the mark set (or the statuses as they were)."""
    report = report or SyncReport()
    with engine.begin() as conn:
        # An undo's mark: lay the entries into the file that run started from.
        run = state.get(conn, agent, StateKey.MEMORY_BASE_RUN)
        base = _base(conn, agent, int(run), _read(files.memory) or "") if run is not None else None
        wanted = render(conn, agent, files, base)
        gone, back = capacity.settle(conn, agent, wanted.placement)
        if gone or back:
            mark_dirty(conn, agent)  # the statuses moved ahead of the files
    current, new = wanted.current, wanted.memory
    report.took(wanted.placement)
    report.archived_now += [k for k in gone if k not in report.archived_now]
    report.restored += [k for k in back if k not in report.restored]
    if current is not None:
        doc = wanted.parsed or memory_file.parse(current)
        seen = Counter(b.key for b in doc.blocks if not b.edited)
        report.duplicates_removed = sorted(k for k, n in seen.items() if n > 1)
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
    # The archive first, still holding the entries that come back to MEMORY.md until it
    # holds them: a kill between the two writes leaves each entry in one file or both.
    kept = set(wanted.placement.kept)
    returning = {k for k in archive.keys(archive.read(files.archive)) if k in kept}
    if returning:
        both = set(wanted.placement.archived) | returning
        interim = [(k, t) for k, t in wanted.texts.items() if k in both]
        archive.write(files.archive, archive.render(interim, files.group_of))
    else:
        archive.write(files.archive, wanted.archive)
    faults.checkpoint("archive.after_write")
    if current != new and not (current is None and new == ""):
        memory_file.atomic_write(files.memory, new)
        report.written = True
    faults.checkpoint("memory.after_write")
    if returning:
        archive.write(files.archive, wanted.archive)
    with engine.begin() as conn:
        state.clear(conn, agent, StateKey.MEMORY_DIRTY, StateKey.MEMORY_BASE_RUN)
        state.put(conn, agent, StateKey.MEMORY_HASH, content_hash(new))
        if wanted.archive:
            state.put(conn, agent, StateKey.ARCHIVE_HASH, content_hash(wanted.archive))
        else:
            state.clear(conn, agent, StateKey.ARCHIVE_HASH)
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
