"""What a deep run reports: the counts, spend, memory changes and decisions of one agent's
run, and the dry run's preview of MEMORY.md."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dreaming.memory.memory_sync import SyncReport


@dataclass
class DeepSummary:
    agent: str
    dry_run: bool = False
    selected: int = 0
    batches: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    paths: Counter[str] = field(default_factory=Counter)
    deferred: Counter[str] = field(default_factory=Counter)
    fallbacks: list[str] = field(default_factory=list)
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    ended_on_budget: bool = False
    runaway_stop: bool = False
    # Why the model did not decide what it should have (it failed, or could not be reached):
    # the run is `degraded`. Empty when it decided everything, or when no model is set.
    degraded: list[str] = field(default_factory=list)
    proposed: int = 0  # review mode: decisions staged for a person instead of applied
    # Entries held for review whatever the mode, each with why (hold_reason: they would
    # tell the agent to set its instructions aside or send data out).
    held: list[str] = field(default_factory=list)
    memory_written: bool = False
    memory_repaired: bool = False
    edited_by_person: list[str] = field(default_factory=list)
    removed_by_person: list[str] = field(default_factory=list)
    duplicates_removed: list[str] = field(default_factory=list)
    # MEMORY.md's fill after the run, as the agent counts it, against its budget; entries
    # the run's writes moved to the archive or back; why nothing fits (operator text alone
    # over the budget: reported, never cut).
    memory_chars: int = 0
    memory_lines: int = 0
    max_chars: int | None = None
    max_lines: int | None = None
    memory_unit: str = "chars"  # what memory_chars and max_chars count ("bytes": Claude Code)
    archived_now: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    over_budget: str | None = None
    archive_repaired: bool = False
    entries: int = 0
    archived: int = 0  # entries in the archive after the run
    decisions: list[dict[str, Any]] = field(default_factory=list)
    diff: str = ""
    duration_s: float = 0.0

    def took_in(self, report: SyncReport) -> None:
        """What reconciling MEMORY.md before the run found: a repair, a person's edits."""
        self.memory_repaired = report.repaired
        self.edited_by_person = report.edited_by_person
        self.removed_by_person = report.removed_by_person
        self.duplicates_removed = report.duplicates_removed
        self.archive_repaired = report.archive_repaired
        self.wrote(report)

    def wrote(self, report: SyncReport) -> None:
        """What a write of MEMORY.md did: its fill, and the entries it moved."""
        # Ordered sets (a first write under a new budget archives thousands of entries:
        # list lookups made this quadratic, 2 s at 20,000).
        duplicates = dict.fromkeys(self.duplicates_removed)
        duplicates.update(dict.fromkeys(report.duplicates_removed))
        self.duplicates_removed = list(duplicates)
        self.memory_chars, self.memory_lines = report.chars, report.lines
        self.max_chars, self.max_lines = report.max_chars, report.max_lines
        self.memory_unit = report.unit
        self.archived = report.archived
        self.over_budget = report.over
        archived_now, restored = dict.fromkeys(self.archived_now), dict.fromkeys(self.restored)
        # An entry archived and restored within one run is back where it was: neither.
        for key in report.archived_now:
            if key in restored:
                del restored[key]
            else:
                archived_now[key] = None
        for key in report.restored:
            if key in archived_now:
                del archived_now[key]
            else:
                restored[key] = None
        self.archived_now, self.restored = list(archived_now), list(restored)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "dry_run": self.dry_run,
            "selected": self.selected,
            "batches": self.batches,
            "actions": dict(sorted(self.actions.items())),
            "paths": dict(sorted(self.paths.items())),
            "deferred": dict(sorted(self.deferred.items())),
            "fallbacks": self.fallbacks,
            "llm": {
                "calls": self.llm_calls,
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "cost_usd": round(self.cost_usd, 6),
            },
            "ended_on_budget": self.ended_on_budget,
            "runaway_stop": self.runaway_stop,
            "degraded": self.degraded,
            "proposed": self.proposed,
            "held": self.held,
            "memory": {
                "written": self.memory_written,
                "repaired": self.memory_repaired,
                "edited_by_person": self.edited_by_person,
                "removed_by_person": self.removed_by_person,
                "duplicates_removed": self.duplicates_removed,
                "chars": self.memory_chars,
                "lines": self.memory_lines,
                "max_chars": self.max_chars,
                "max_lines": self.max_lines,
                "unit": self.memory_unit,
                "archived_now": self.archived_now,
                "restored": self.restored,
                "over_budget": self.over_budget,
                "archive_repaired": self.archive_repaired,
            },
            "entries": self.entries,
            "archived": self.archived,
            "decisions": self.decisions,
            "diff": self.diff,
            "duration_s": round(self.duration_s, 3),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DeepSummary:
        """The summary back from `to_dict`'s JSON (a run record's), to show it as it was
        shown. Raises KeyError or TypeError on another shape (another version's)."""
        llm, memory = d["llm"], d["memory"]
        return cls(
            agent=d["agent"],
            dry_run=d["dry_run"],
            selected=d["selected"],
            batches=d["batches"],
            actions=Counter(d["actions"]),
            paths=Counter(d["paths"]),
            deferred=Counter(d["deferred"]),
            fallbacks=list(d["fallbacks"]),
            llm_calls=llm["calls"],
            input_tokens=llm["input_tokens"],
            output_tokens=llm["output_tokens"],
            cost_usd=llm["cost_usd"],
            ended_on_budget=d["ended_on_budget"],
            runaway_stop=d["runaway_stop"],
            degraded=list(d.get("degraded", [])),
            proposed=d.get("proposed", 0),
            edited_by_person=list(memory["edited_by_person"]),
            removed_by_person=list(memory["removed_by_person"]),
            duplicates_removed=list(memory.get("duplicates_removed", [])),
            memory_chars=memory.get("chars", 0),
            memory_lines=memory.get("lines", 0),
            max_chars=memory.get("max_chars"),
            max_lines=memory.get("max_lines"),
            memory_unit=memory.get("unit", "chars"),
            archived_now=list(memory.get("archived_now", [])),
            restored=list(memory.get("restored", [])),
            over_budget=memory.get("over_budget"),
            archive_repaired=memory.get("archive_repaired", False),
            entries=d["entries"],
            archived=d.get("archived", 0),
            decisions=list(d["decisions"]),
            diff=d["diff"],
        )


def preview_diff(before: str, after: str) -> str:
    """A dry run's preview: MEMORY.md as it is against MEMORY.md as the run would leave it."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile="MEMORY.md",
            tofile="MEMORY.md (after)",
        )
    )
