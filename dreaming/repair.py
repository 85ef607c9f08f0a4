"""`dreaming repair`: take MEMORY.md's managed entries back after the database was lost.

A night can only keep MEMORY.md in step with the entries its database knows. When that
database is deleted or replaced, the managed lines stay in the file with no entry behind
them: every night then reports `entries now: 0` and `verify` fails. Adopting them gives each
line its entry back, with one origin that says plainly what is known of it: nothing. An
adopted entry is `adopted:MEMORY.md`; `entries show` and `verify` say so, and a `forget`
still scrubs it from the file when it quotes purged text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine

from dreaming.config import Paths
from dreaming.memory import lineage, memory_file, memory_sync
from dreaming.memory.lineage import ADOPTED


@dataclass
class RepairReport:
    agent: str
    dry_run: bool
    adopted: list[dict[str, str]] = field(default_factory=list)
    edited_left: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "dry_run": self.dry_run,
            "adopted": self.adopted,
            "edited_left": self.edited_left,
            "origins": f"unknown (recorded as {ADOPTED})",
        }


def adopt(engine: Engine, paths: Paths, agent: str, *, dry_run: bool) -> RepairReport:
    """Give every managed MEMORY.md line that has no live entry its entry back. Lines a
    person edited (their text no longer matches their key) are left as they are: the
    person owns them."""
    report = RepairReport(agent, dry_run)
    path = paths.memory_file(agent)
    doc = memory_file.read(path)
    now = datetime.now(UTC)
    with engine.begin() as conn:
        live = dict(lineage.live_entries(conn, agent))
        seen: set[str] = set()
        for block in doc.blocks:
            if block.key in live or block.key in seen:
                continue
            seen.add(block.key)
            if block.edited:
                report.edited_left.append(block.key)
                continue
            report.adopted.append({"key": block.key, "text": block.text})
        if report.adopted and not dry_run:
            lineage.adopt_entries(conn, agent, [(a["key"], a["text"]) for a in report.adopted], now)
            memory_sync.mark_dirty(conn, agent)
    if report.adopted and not dry_run:
        memory_sync.write(engine, agent, path, run_id=None)
    return report
