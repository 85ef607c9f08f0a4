"""What a night of one agent comes to: `AgentResult`, the phases' typed summaries, and their
JSON form both ways (`to_dict` for run records and `--json`, `summary_from_dict` to show a
recorded run as it was shown)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dreaming.phases import Phase
from dreaming.phases._rem_summary import RemSummary
from dreaming.phases.deep import DeepSummary
from dreaming.phases.light import LightSummary
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
        return LightSummary.from_dict(data)
    if phase == Phase.REM:
        return RemSummary.from_dict(data)
    return DeepSummary.from_dict(data)
