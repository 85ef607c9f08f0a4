"""Jobs at run time: finding and describing one, its agents and budget, and the JobRunner
seam that runs it now.

A JobRunner runs one job over its agents and reports per agent. InProcessRunner does it
here through `App.run`, one agent at a time under each agent's lock; a queue-based runner
(Procrastinate, for fleets) is another implementation behind the same contract.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from tzlocal import get_localzone

from dreaming._scheduler._triggers import describe_trigger, next_fire_time
from dreaming.app import App
from dreaming.config import BudgetSettings, Paths
from dreaming.errors import ConfigError, DreamingError, LockedError, StateError
from dreaming.jobs import Job, JobFile, bundled_jobs_dir, load_job
from dreaming.progress import Progress
from dreaming.runs import record_skipped

log = logging.getLogger("dreaming.scheduler")

# The stable public name the job store keeps, whatever module defines the function.
RUN_JOB_FUNC = "dreaming.scheduler:run_scheduled_job"
AgentResult = dict[str, Any]
# The fire a scheduled call belongs to (set by the scheduler around the call): an executor
# that enqueues uses it to never enqueue one fire twice. None for on-demand runs.
SCHEDULED_FIRE: ContextVar[datetime | None] = ContextVar("scheduled_fire", default=None)


# -- where jobs live, and finding one ------------------------------------------------------


def jobs_dir(paths: Paths) -> Path:
    """`jobs_dir` from the settings, else `<state>/dreaming/jobs` if it exists, else the
    bundled examples."""
    if paths.settings.jobs_dir is not None:
        return paths.settings.jobs_dir
    own = paths.home / "jobs"
    return own if own.is_dir() else bundled_jobs_dir()


def find_job(folder: Path, name: str, profiles: Sequence[str] = ()) -> JobFile:
    """The job called `name` in `folder`. Other files that do not load do not stop it."""
    known: list[str] = []
    broken: list[str] = []
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        try:
            job = load_job(path, profiles)
        except ConfigError as err:
            broken.append(str(err))
            continue
        if job.name == name:
            return JobFile(path, job)
        known.append(job.name)
    hint = f" (known: {', '.join(known)})" if known else f" (no job files in {folder})"
    if broken:
        hint += "; files that did not load: " + "; ".join(broken)
    raise StateError(f"unknown job {name!r}{hint}")


def describe_job(job_file: JobFile, now: datetime | None = None) -> dict[str, Any]:
    """What `dreaming jobs list` shows for one job."""
    job = job_file.job
    fire = next_fire_time(job.trigger, now, job_file.path)
    trig = job.trigger
    return {
        "name": job.name,
        "description": job.description,
        "file": str(job_file.path),
        "phases": list(job.phases),
        "agents": job.agents if job.agents == "*" else list(job.agents),
        "trigger": describe_trigger(trig),
        "cron": trig.cron if trig else None,
        "interval_minutes": trig.interval_minutes if trig else None,
        "timezone": (trig.timezone or str(get_localzone())) if trig else None,
        "misfire_grace_minutes": trig.misfire_grace_minutes if trig else None,
        "next_fire_time": fire.isoformat(timespec="seconds") if fire else None,
        "budget": job.budget.model_dump(),
        "llm": job.llm,
        "dry_run": job.dry_run,
    }


class AgentOutcome(StrEnum):
    OK = "ok"
    BUDGET = "budget"  # deep stopped on its budget; the rest waits for the next run
    DEGRADED = "degraded"  # a fallback decided what the model should have (reason given)
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    SKIPPED = "skipped"  # another run held the agent's lock (or, queued: a duplicate)
    QUEUED = "queued"  # handed to the fleet queue; a worker runs it


def effective_budget(settings: BudgetSettings, job: BudgetSettings) -> BudgetSettings:
    """A job's per-run limits replace the settings' defaults; the daily caps are per agent
    and shared by every job, so the stricter of the two applies."""
    update: dict[str, Any] = {
        key: getattr(job, key)
        for key in ("max_usd", "max_tokens", "max_calls")
        if getattr(job, key) is not None
    }
    for key in ("daily_max_usd", "daily_max_tokens"):
        caps = [v for v in (getattr(settings, key), getattr(job, key)) if v is not None]
        if caps:
            update[key] = min(caps)
    return settings.model_copy(update=update)


class JobRunner(ABC):
    """Runs one job now over its agents and reports one result per agent.

    Contract: a result is `{"agent", "job", "phases", "dry_run", "run_id", "outcome"}` with
    `outcome` an `AgentOutcome` value (plus `reason` for skipped and `error` for failed
    agents). An agent that another run holds is reported `skipped`, never raised; a failure
    on one agent does not stop the others. An unknown job raises `StateError`.
    """

    @abstractmethod
    def run(
        self,
        job_name: str,
        *,
        agents: Sequence[str] | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> list[AgentResult]:
        """Run `job_name` now; `agents` narrows the job's agents, `dry_run` forces one."""


class InProcessRunner(JobRunner):
    """Runs a job in this process, agent by agent, through `App.run` (one lock, one run
    record per agent)."""

    def __init__(self, app: App, jobs_dir: Path) -> None:
        self.app = app
        self.jobs_dir = jobs_dir

    def job(self, job_name: str) -> Job:
        return find_job(self.jobs_dir, job_name, list(self.app.settings.llm.profiles)).job

    def agents_for(self, job: Job, only: Sequence[str] | None = None) -> list[str]:
        if not only:
            return job.agent_list(self.app.agents())
        chosen = self.app.agents(only)
        if job.agents != "*":
            outside = [a for a in chosen if a not in job.agents]
            if outside:
                raise StateError(
                    f"job {job.name!r} does not run on {', '.join(outside)} "
                    f"(its agents: {', '.join(job.agents)})"
                )
        return chosen

    def run(
        self,
        job_name: str,
        *,
        agents: Sequence[str] | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> list[AgentResult]:
        job = self.job(job_name)
        budget = effective_budget(self.app.settings.budget, job.budget)
        return [
            self._run_agent(job, agent, dry_run or job.dry_run, budget, progress)
            for agent in self.agents_for(job, agents)
        ]

    def _run_agent(
        self,
        job: Job,
        agent: str,
        dry_run: bool,
        budget: BudgetSettings,
        progress: Progress | None,
    ) -> AgentResult:
        base: AgentResult = {"agent": agent, "job": job.name, "phases": {}, "dry_run": dry_run}
        phases = ",".join(job.phases)
        log.info(
            "job=%s agent=%s phases=%s dry_run=%s event=start", job.name, agent, phases, dry_run
        )
        started = time.monotonic()
        try:
            [result] = self.app.run(
                job.phases,
                [agent],
                job=job.name,
                dry_run=dry_run,
                budget=budget,
                llm=job.llm,
                progress=progress,
            )
        except LockedError as err:
            result = base | {
                "run_id": None,
                "outcome": AgentOutcome.SKIPPED.value,
                "reason": f"locked by {err.holder}",
            }
            if not dry_run:
                result["run_id"] = self._record_skip(job, agent, result)
        except Exception as err:  # one agent's failure must not cost the others their run
            if isinstance(err, DreamingError):
                log.error("job=%s agent=%s error=%r", job.name, agent, str(err))
            else:
                log.exception("job=%s agent=%s crashed", job.name, agent)
            result = base | {"run_id": None, "outcome": AgentOutcome.FAILED.value}
            result["error"] = str(err) or type(err).__name__
        took = time.monotonic() - started
        why = result.get("reason") or result.get("error")
        if why is None:
            log.info(
                "job=%s agent=%s run=%s outcome=%s duration=%.1fs",
                job.name,
                agent,
                result["run_id"],
                result["outcome"],
                took,
            )
        else:
            log.warning(
                "job=%s agent=%s run=%s outcome=%s duration=%.1fs reason=%r",
                job.name,
                agent,
                result["run_id"],
                result["outcome"],
                took,
                why,
            )
        return result

    def _record_skip(self, job: Job, agent: str, result: AgentResult) -> int | None:
        try:
            return record_skipped(self.app.engine(agent), agent, list(job.phases), job.name, result)
        except (SQLAlchemyError, DreamingError) as err:
            log.warning("job=%s agent=%s cannot record the skipped run: %s", job.name, agent, err)
            return None


def run_scheduled_job(
    job_name: str, state_dir: str, config: str | None, jobs_folder: str
) -> list[AgentResult]:
    """The function the job store persists: plain arguments only, so a stored job survives
    restarts and could be dispatched anywhere."""
    app = App.open(Path(state_dir), Path(config) if config else None)
    try:
        return InProcessRunner(app, Path(jobs_folder)).run(job_name)
    finally:
        app.close()


@dataclass(frozen=True)
class ScheduledCall:
    """What every stored job calls: `func` (an importable "module:function") with
    (job name, state dir, config path, jobs dir). Another executor (a queue for fleets)
    is another `func`; the trigger code does not change."""

    state_dir: Path
    config: Path | None
    jobs_dir: Path
    func: str = RUN_JOB_FUNC

    def args(self, job_name: str) -> tuple[str, str, str | None, str]:
        config = str(self.config) if self.config is not None else None
        return (job_name, str(self.state_dir), config, str(self.jobs_dir))
