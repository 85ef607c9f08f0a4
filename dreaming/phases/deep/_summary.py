"""What a deep run reports: the counts, spend, memory changes and decisions of one agent's
run, and the dry run's preview of MEMORY.md."""

from __future__ import annotations

import difflib
from collections import Counter
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
    entries: int = 0
    decisions: list[dict[str, Any]] = field(default_factory=list)
    diff: str = ""
    duration_s: float = 0.0

    def took_in(self, report: SyncReport) -> None:
        """What reconciling MEMORY.md before the run found: a repair, a person's edits."""
        self.memory_repaired = report.repaired
        self.edited_by_person = report.edited_by_person
        self.removed_by_person = report.removed_by_person
        self.duplicates_removed = report.duplicates_removed

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
            },
            "entries": self.entries,
            "decisions": self.decisions,
            "diff": self.diff,
            "duration_s": round(self.duration_s, 3),
        }


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
