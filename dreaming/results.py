"""What a night of one agent comes to: `AgentResult`, the phases' typed summaries, and their
JSON form both ways (`to_dict` for run records and `--json`, `summary_from_dict` to show a
recorded run as it was shown)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dreaming.phases import Phase
from dreaming.phases.deep import DeepSummary
from dreaming.phases.light import LightSummary
from dreaming.phases.rem import RemSummary, Theme
from dreaming.runs import Outcome

# Outcomes of a run that did not happen here: their results carry no phase summaries.
NOT_RUN = frozenset({Outcome.FAILED, Outcome.SKIPPED, Outcome.QUEUED})

Summary = LightSummary | RemSummary | DeepSummary


@dataclass(frozen=True)
class AgentResult:
    """One agent's run: its outcome and the summaries of the phases that ran."""

    agent: str
    outcome: Outcome
    job: str | None = None
    dry_run: bool = False
    run_id: int | None = None
    summaries: Mapping[Phase, Summary] = field(default_factory=dict)  # in phase order
    degraded: tuple[str, ...] = ()  # where a fallback decided what the model should have
    reason: str | None = None  # why it was degraded or skipped
    error: str | None = None  # why it failed
    queue_job_id: int | None = None  # the fleet task it was handed to
    # Managed MEMORY.md lines the database had no record of (it was lost), adopted before
    # the first phase as `dreaming repair` adopts them: their keys.
    adopted: tuple[str, ...] = ()
    # Why REM and deep did not run: another consolidator writes the agent's MEMORY.md
    # ([openclaw] coexist = "refuse"); one line with the setting to change.
    refused: str | None = None

    @property
    def light(self) -> LightSummary | None:
        summary = self.summaries.get(Phase.LIGHT)
        return summary if isinstance(summary, LightSummary) else None

    @property
    def rem(self) -> RemSummary | None:
        summary = self.summaries.get(Phase.REM)
        return summary if isinstance(summary, RemSummary) else None

    @property
    def deep(self) -> DeepSummary | None:
        summary = self.summaries.get(Phase.DEEP)
        return summary if isinstance(summary, DeepSummary) else None

    def phase_dicts(self) -> dict[str, dict[str, Any]]:
        """Each phase's summary as JSON, with the run it belongs to."""
        return {
            str(phase): s.to_dict() | {"run_id": self.run_id} for phase, s in self.summaries.items()
        }

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "agent": self.agent,
            "job": self.job,
            "phases": self.phase_dicts(),
            "dry_run": self.dry_run,
            "run_id": self.run_id,
        }
        if self.reason is not None:
            data["reason"] = self.reason
        if self.refused is not None:
            data["refused"] = self.refused
        if self.outcome not in NOT_RUN:
            data["degraded"] = list(self.degraded)
        data["outcome"] = self.outcome.value
        if self.error is not None:
            data["error"] = self.error
        if self.queue_job_id is not None:
            data["queue_job_id"] = self.queue_job_id
        if self.adopted:
            data["adopted"] = list(self.adopted)
        return data


def summary_from_dict(phase: Phase, data: Mapping[str, Any]) -> Summary:
    """A phase summary back from its JSON form (a run record's), to format as it was shown.
    Raises KeyError or TypeError on a summary of another shape (another version's)."""
    if phase == Phase.LIGHT:
        return _light_from(data)
    if phase == Phase.REM:
        return _rem_from(data)
    return _deep_from(data)


def _light_from(d: Mapping[str, Any]) -> LightSummary:
    s, c = d["sessions"], d["candidates"]
    unclassified = list(s.get("unclassified", []))
    unclassified += [""] * (s.get("unclassified_count", 0) - len(unclassified))  # count kept
    return LightSummary(
        agent=d["agent"],
        sessions_seen=s["seen"],
        sessions_read=s["read"],
        sessions_unchanged=s["unchanged"],
        files_rewritten=s["rewritten"],
        lines_rederived=s.get("lines_rederived", 0),
        not_admitted=Counter(s["not_admitted"]),
        unclassified=unclassified,
        reclassified=list(s.get("reclassified", [])),
        messages=d["messages"],
        corpus_lines=d["corpus_lines"],
        dropped=Counter(d["dropped"]),
        skips=Counter(d["skips"]),
        candidates_new=c["new"],
        candidates_updated=c["updated"],
        candidates_pending=c["pending"],
        recalls=d["recalls"],
    )


def _rem_from(d: Mapping[str, Any]) -> RemSummary:
    themes = [
        Theme(t["concept"], t["concept"], tuple(t["related"]), t["sessions"], t["days"], "")
        for t in d["themes"]
    ]
    return RemSummary(
        agent=d["agent"],
        themes=themes,
        boosted=d["boosted"],
        diary_written=d["diary_written"],
        diary_by=d["diary_by"],
        fallback=d["fallback"],
        dry_run=d["dry_run"],
    )


def _deep_from(d: Mapping[str, Any]) -> DeepSummary:
    llm, memory = d["llm"], d["memory"]
    return DeepSummary(
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
        archived_now=list(memory.get("archived_now", [])),
        restored=list(memory.get("restored", [])),
        over_budget=memory.get("over_budget"),
        archive_repaired=memory.get("archive_repaired", False),
        entries=d["entries"],
        archived=d.get("archived", 0),
        decisions=list(d["decisions"]),
        diff=d["diff"],
    )
