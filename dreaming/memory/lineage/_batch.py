"""What a batch of decisions reads once and writes at once.

Applying decisions one by one cost a dozen statements each (the candidate's evidence count
and lineage, whether the entry exists, the entry, its origins, its evidence, three for the
search index). A batch reads what no decision of it changes up front (candidates' counts and
lineage, which entry keys exist) and gathers the rows it adds (entries, origins, evidence,
index rows), written together when the batch ends, or before anything reads or deletes the
entries' rows again (a merge reading its targets' lineage, a target retired): so every read
sees what the decisions before it wrote, as when each was written at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BindParameter, Connection, and_, bindparam, select

from dreaming.memory import entry_index
from dreaming.memory.lineage._read import Lineage, candidate_lineages
from dreaming.store.bulk import execute_many
from dreaming.store.dialect import insert_ignore
from dreaming.store.tables import (
    CANDIDATES,
    ENTRIES,
    ENTRY_EVIDENCE,
    ORIGINS,
)


@dataclass
class Batch:
    """One batch's shared reads and pending writes (see the module docstring)."""

    agent: str
    counts: dict[int, int]  # candidate -> its evidence count
    lineages: dict[int, Lineage]  # candidate -> its lineage
    held: set[str]  # entry keys with a row, as the decisions so far left them
    entries: list[dict[str, Any]] = field(default_factory=list)
    origins: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    index: list[tuple[str, str]] = field(default_factory=list)  # new entries: (key, text)

    @classmethod
    def load(
        cls, conn: Connection, agent: str, candidate_ids: Iterable[int], keys: Iterable[str]
    ) -> Batch:
        """The batch's reads: its candidates' counts and lineage, and which of the entry
        keys its decisions write exist already."""
        cids = sorted(set(candidate_ids))
        counts: dict[int, int] = {}
        held: set[str] = set()
        for chunk in _chunks(cids):
            counts.update(conn.execute(_COUNTS, {"ids": chunk}).all())
        for chunk in _chunks(sorted(set(keys))):
            held.update(conn.execute(_HELD, {"agent": agent, "keys": chunk}).scalars())
        return cls(agent, counts, candidate_lineages(conn, cids), held)

    def add_entry(self, key: str, values: dict[str, Any], text: str) -> None:
        """A new entry: its row and its index row, written with the batch."""
        self.entries.append(values)
        self.index.append((key, text))
        self.held.add(key)

    def add_lineage(self, key: str, lineage: Lineage) -> None:
        agent = self.agent
        self.origins += [
            {
                "agent": agent,
                "entry_key": key,
                "session_id": o.session_id,
                "session_key": o.session_key,
                "origin_class": o.origin_class,
                "observed_at": o.observed_at,
            }
            for o in lineage.origins
        ]
        self.evidence += [
            {"agent": agent, "entry_key": key, "session_id": s, "line": n}
            for s, n in lineage.evidence
        ]

    def flush(self, conn: Connection) -> None:
        """Write what the batch gathered (before a read of entries' rows, and at its end)."""
        if self.entries:
            execute_many(conn, _INSERT_ENTRY, self.entries)
        if self.origins:
            execute_many(conn, insert_ignore(conn, ORIGINS), self.origins)
        if self.evidence:
            execute_many(conn, insert_ignore(conn, ENTRY_EVIDENCE), self.evidence)
        entry_index.add_entries(conn, self.agent, self.index)
        self.entries, self.origins, self.evidence, self.index = [], [], [], []


def _chunks(items: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


_IDS: BindParameter[Any] = bindparam("ids", expanding=True)
_INSERT_ENTRY = ENTRIES.insert()
_COUNTS = select(CANDIDATES.c.id, CANDIDATES.c.evidence_count).where(CANDIDATES.c.id.in_(_IDS))
_HELD = select(ENTRIES.c.key).where(
    and_(
        ENTRIES.c.agent == bindparam("agent"), ENTRIES.c.key.in_(bindparam("keys", expanding=True))
    )
)
