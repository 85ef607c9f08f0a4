"""Taking MEMORY.md's managed entries back after the database was lost.

A night can only keep MEMORY.md in step with the entries its database knows. When that
database is deleted, replaced, or rolled back (a killed run whose write-ahead log was
deleted), the managed lines stay in the file with no record behind them: rendering the file
from the database would drop them all. Adopting them gives each line its entry back, with
one origin that says plainly what is known of it: nothing. An adopted entry is
`adopted:MEMORY.md`; `entries show` and `verify` say so, and a `forget` still scrubs it from
the file when it quotes purged text.

Only lines the database has no record of at all are adopted. A line it knows (an entry it
retired, merged away, superseded, undid or forgot, shown by a MEMORY.md that lags the
database after a crash) is not: the database's decision stands, and the next write takes
the line out. Nor is any line of a file that is exactly the one dreaming last wrote: every
entry in it was live when it was written, so one that is not live now was retired since.

Every night adopts what it finds before its first phase (`runner`); `dreaming repair` does
the same on request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, and_, or_, select

from dreaming.forget import complete_pending
from dreaming.memory import archive, lineage, memory_file, memory_sync
from dreaming.memory.lineage import ADOPTED
from dreaming.paths import Paths
from dreaming.store import state
from dreaming.store.state import StateKey
from dreaming.store.tables import (
    DECISIONS,
    ENTRIES,
    JOURNAL,
    MEMORY_BACKUPS,
    PURGES,
    SUPERSESSIONS,
)


@dataclass
class RepairReport:
    agent: str
    dry_run: bool
    adopted: list[dict[str, str]] = field(default_factory=list)
    edited_left: list[str] = field(default_factory=list)
    # Keys the file shows that the database retired (a MEMORY.md lagging after a crash):
    # not adopted, the next write takes them out.
    retired_left: list[str] = field(default_factory=list)
    # Entries the database held that a person (or a lost run) took out of the file: retired
    # by the reconcile that follows an adoption (`dreaming repair` only).
    removed_by_person: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "dry_run": self.dry_run,
            "adopted": self.adopted,
            "edited_left": self.edited_left,
            "retired_left": self.retired_left,
            "removed_by_person": self.removed_by_person,
            "origins": f"unknown (recorded as {ADOPTED})",
        }


@dataclass(frozen=True)
class Strays:
    """MEMORY.md's managed lines that no live entry stands behind, by what is known of them."""

    unrecorded: list[memory_file.Block]  # the database has no record of them: adoptable
    retired: list[str]  # the database knows them and retired them: not to come back
    edited: list[str]  # a person changed their text: theirs, left alone


def strays(
    conn: Connection, agent: str, current: str | None, written: StateKey = StateKey.MEMORY_HASH
) -> Strays:
    """Sort the managed lines of MEMORY.md (`current`, its text; or of its archive, with
    `written` the archive's hash) that no entry the memory holds stands behind."""
    if not current:
        return Strays([], [], [])
    live = {k for k, _ in lineage.held_entries(conn, agent)}
    lines: dict[str, memory_file.Block] = {}
    edited: list[str] = []
    for block in memory_file.parse(current).blocks:
        if block.stands_for_any(live) or block.key in lines or block.key in edited:
            continue
        if block.edited:
            edited.append(block.key)
        else:
            lines[block.key] = block
    if not lines:
        return Strays([], [], edited)
    if state.get(conn, agent, written) == memory_sync.content_hash(current):
        # The file dreaming last wrote: each of these was live then and retired since.
        return Strays([], sorted(lines), edited)
    known = known_keys(conn, agent, lines)
    return Strays(
        [b for k, b in lines.items() if k not in known],
        sorted(k for k in lines if k in known),
        edited,
    )


def known_keys(conn: Connection, agent: str, keys: Any) -> set[str]:
    """Those of `keys` the database has any record of: an entry row, a decision that wrote or
    took it, a supersede, an undo journal image, a purge that removed it, a MEMORY.md backup
    that showed it. A database that was lost knows none of them."""
    wanted = sorted(set(keys))
    if not wanted:
        return set()
    found: set[str] = set()
    found |= set(
        conn.execute(
            select(ENTRIES.c.key).where(and_(ENTRIES.c.agent == agent, ENTRIES.c.key.in_(wanted)))
        ).scalars()
    )
    found |= {
        k
        for (k,) in conn.execute(
            select(DECISIONS.c.entry_key).where(
                and_(DECISIONS.c.agent == agent, DECISIONS.c.entry_key.in_(wanted))
            )
        )
    }
    for new, old in conn.execute(
        select(SUPERSESSIONS.c.new_key, SUPERSESSIONS.c.old_key).where(
            and_(
                SUPERSESSIONS.c.agent == agent,
                or_(SUPERSESSIONS.c.new_key.in_(wanted), SUPERSESSIONS.c.old_key.in_(wanted)),
            )
        )
    ):
        found |= {new, old}
    found |= set(
        conn.execute(
            select(JOURNAL.c.ref).where(
                and_(JOURNAL.c.agent == agent, JOURNAL.c.kind == "entry", JOURNAL.c.ref.in_(wanted))
            )
        ).scalars()
    )
    for (report,) in conn.execute(select(PURGES.c.report).where(PURGES.c.agent == agent)):
        try:
            removed = json.loads(report or "{}").get("entries_removed", [])
        except (ValueError, AttributeError):
            continue
        found |= set(removed) if isinstance(removed, list) else set()
    rest = [k for k in wanted if k not in found]
    for chunk in _chunks(rest, 200):
        for (targets,) in conn.execute(
            select(DECISIONS.c.targets).where(
                and_(
                    DECISIONS.c.agent == agent,
                    or_(*(DECISIONS.c.targets.contains(json.dumps(k)) for k in chunk)),
                )
            )
        ):
            found |= set(json.loads(targets or "[]"))
        for (content,) in conn.execute(
            select(MEMORY_BACKUPS.c.content).where(
                and_(
                    MEMORY_BACKUPS.c.agent == agent,
                    # Every form of a line shows at least the key's first digits.
                    or_(
                        *(MEMORY_BACKUPS.c.content.contains(memory_file.shortest(k)) for k in chunk)
                    ),
                )
            )
        ):
            found |= memory_file.parse(content).holds(chunk)
    return found & set(wanted)


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def adopt(
    engine: Engine, paths: Paths, agent: str, *, dry_run: bool, reconcile: bool = True
) -> RepairReport:
    """Give every managed MEMORY.md line the database has no record of its entry back.
    Lines a person edited (their text no longer matches their key) are left as they are:
    the person owns them; lines of entries the database retired stay retired.

    With `reconcile`, the file is then taken in as MEMORY.md's agreed state (entries the
    database held that the file no longer shows retire, as a person's deletion does); a
    night leaves that to its deep phase, which reconciles before it changes anything."""
    report = RepairReport(agent, dry_run)
    if reconcile and not dry_run:
        complete_pending(engine, paths, agent)  # a purge cut short is finished first
    files = memory_sync.Files.of(paths, agent)
    current = memory_file.load_text(files.memory)
    now = datetime.now(UTC)
    with engine.begin() as conn:
        found = strays(conn, agent, current)
        # The archive's lines are ours as MEMORY.md's are: adopted the same way (the next
        # write places them again).
        shelved = strays(conn, agent, archive.read(files.archive), StateKey.ARCHIVE_HASH)
        seen = {b.key for b in found.unrecorded}
        report.adopted = [
            {"key": b.key, "text": b.text}
            for b in [*found.unrecorded, *(b for b in shelved.unrecorded if b.key not in seen)]
        ]
        report.retired_left = found.retired
        report.edited_left = found.edited
        if report.adopted and not dry_run:
            lineage.adopt_entries(conn, agent, [(a["key"], a["text"]) for a in report.adopted], now)
    if reconcile and not dry_run:
        report.removed_by_person = memory_sync.reconcile(engine, agent, files).removed_by_person
    return report
