"""PurgeReport: what one `forget` did (or, dry, would do), as a frozen value.

The purge fills a mutable `PurgeTally` while it works; drivers (the runner, the CLI, the
benchmarks) get this frozen report instead, whose `steps` name the purge's steps with their
counts in order, so no caller repeats the list of steps by hand, and whose `to_dict` is the
`--json` document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._purge import PurgeTally

# The numbered steps of a purge and the counts each reports, in the order they run (the
# package docstring describes them; step 6, the agent's own writes, is listed apart).
STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("corpus", ("corpus_lines",)),
    ("entries", ("entries",)),
    ("index", ("index_rows",)),
    (
        "state",
        (
            "candidates",
            "candidate_evidence",
            "recalls",
            "cursors",
            "memory_backups",
            "llm_calls",
            "run_summaries",
            "diary_entries",
            "report_files",
        ),
    ),
    ("origins and tombstones", ("origins", "tombstones")),
)


@dataclass(frozen=True)
class SessionOutcome:
    """One selected session and what the purge found it to be."""

    session_id: str
    session_key: str | None
    status: str  # "resolved", "already forgotten" or "unresolved"


@dataclass(frozen=True)
class PurgeStep:
    """One numbered step and its counts, in the order the report prints them."""

    number: int
    name: str
    counts: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PurgeReport:
    """The report of one purge of one agent (`other_agents`: the same sessions under the
    agents that read the same transcripts; None on those reports themselves)."""

    agent: str
    selector: Mapping[str, Any]
    dry_run: bool
    purge_id: int | None
    sessions: tuple[SessionOutcome, ...]
    counts: Mapping[str, int]
    entries_removed: tuple[str, ...]
    entries_emptied: tuple[str, ...]
    mixed_lineage: tuple[Mapping[str, Any], ...]  # key, other_sessions
    file_lines_removed: Mapping[str, int]  # path -> whole lines removed
    curated_writes: tuple[Mapping[str, Any], ...]  # session_id, path, at, ref
    diary_entries_removed: tuple[str, ...]  # days of DREAMS.md entries removed
    run_summaries_redacted: tuple[int, ...]
    report_files: tuple[Mapping[str, Any], ...]  # path, action
    nothing_left: bool
    other_agents: tuple[PurgeReport, ...] | None = None

    @classmethod
    def of(cls, tally: PurgeTally) -> PurgeReport:
        """The frozen report of a finished purge's tally."""
        d = tally.to_dict()
        return cls(
            agent=d["agent"],
            selector=MappingProxyType(dict(d["selector"])),
            dry_run=d["dry_run"],
            purge_id=d["purge_id"],
            sessions=tuple(SessionOutcome(**s) for s in d["sessions"]),
            counts=MappingProxyType(d["counts"]),
            entries_removed=tuple(d["entries_removed"]),
            entries_emptied=tuple(d["entries_emptied"]),
            mixed_lineage=tuple(d["mixed_lineage"]),
            file_lines_removed=MappingProxyType(d["file_lines_removed"]),
            curated_writes=tuple(d["curated_writes"]),
            diary_entries_removed=tuple(d["diary_entries_removed"]),
            run_summaries_redacted=tuple(d["run_summaries_redacted"]),
            report_files=tuple(d["report_files"]),
            nothing_left=d["nothing_left"],
        )

    @property
    def steps(self) -> tuple[PurgeStep, ...]:
        return tuple(
            PurgeStep(n, name, tuple((k, self.counts.get(k, 0)) for k in keys))
            for n, (name, keys) in enumerate(STEPS, 1)
        )

    @property
    def unresolved(self) -> tuple[str, ...]:
        return tuple(s.session_id for s in self.sessions if s.status == "unresolved")

    def to_dict(self) -> dict[str, Any]:
        """The JSON document `dreaming forget --json` prints (keys in this order)."""
        out: dict[str, Any] = {
            "agent": self.agent,
            "selector": dict(self.selector),
            "dry_run": self.dry_run,
            "purge_id": self.purge_id,
            "sessions": [
                {"session_id": s.session_id, "session_key": s.session_key, "status": s.status}
                for s in self.sessions
            ],
            "unresolved": list(self.unresolved),
            "counts": dict(self.counts),
            "entries_removed": list(self.entries_removed),
            "entries_emptied": list(self.entries_emptied),
            "mixed_lineage": [dict(m) for m in self.mixed_lineage],
            "file_lines_removed": dict(self.file_lines_removed),
            "curated_writes": [dict(w) for w in self.curated_writes],
            "diary_entries_removed": list(self.diary_entries_removed),
            "run_summaries_redacted": list(self.run_summaries_redacted),
            "report_files": [dict(f) for f in self.report_files],
            "nothing_left": self.nothing_left,
        }
        if self.other_agents is not None:
            out["other_agents"] = [r.to_dict() for r in self.other_agents]
        return out
