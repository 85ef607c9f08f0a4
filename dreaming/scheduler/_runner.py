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
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from tzlocal import get_localzone

from dreaming import runner
from dreaming.app import App
from dreaming.errors import DreamingError, LockedError, NoSuchError
from dreaming.llm import BudgetSettings
from dreaming.paths import Paths
from dreaming.progress import Progress
from dreaming.results import AgentResult as AgentResult  # the scheduler reports these
from dreaming.runner import Outcome
from dreaming.runs import record_skipped

from ._jobs import Job, JobCatalog, JobFile, effective_budget
from ._store import StoredSchedule
from ._triggers import describe_trigger, next_fire_time

log = logging.getLogger("dreaming.scheduler")

# The stable public name the job store keeps, whatever module defines the function.
RUN_JOB_FUNC = "dreaming.scheduler:run_scheduled_job"
# The fire a scheduled call belongs to (set by the scheduler around the call): an executor
# that enqueues uses it to never enqueue one fire twice. None for on-demand runs.
SCHEDULED_FIRE: ContextVar[datetime | None] = ContextVar("scheduled_fire", default=None)


# -- where jobs live, and finding one ------------------------------------------------------


def jobs_dir(paths: Paths) -> Path:
    """The user's jobs folder: `jobs_dir` from the settings, else `<state>/dreaming/jobs`
    (whether it exists yet or not). The bundled examples lie under it (`job_catalog`)."""
    if paths.settings.jobs_dir is not None:
        return paths.settings.jobs_dir
    return paths.home / "jobs"


def job_catalog(paths: Paths) -> JobCatalog:
    """The jobs of a state folder: its jobs folder over the bundled examples."""
    return JobCatalog.over_bundled(jobs_dir(paths))


def find_job(catalog: JobCatalog, name: str, profiles: Sequence[str] = ()) -> JobFile:
    """The job called `name` in `catalog`, to run (see `JobCatalog.find`)."""
    return catalog.find(name, profiles)


def describe_job(
    job_file: JobFile,
    now: datetime | None = None,
    stores: Sequence[StoredSchedule] = (),
    *,
    scheduled: bool = True,
) -> dict[str, Any]:
    """What `dreaming jobs list` shows for one job. `next_fire_time` is computed from the
    trigger (None: on demand, switched off, or not `scheduled`: a bundled example once the
    jobs folder has jobs of its own); `scheduler_next_fire_time` is what each of `stores`
    holds for it, by store name (None: paused there; absent: not scheduled)."""
    job = job_file.job
    fires = job.enabled and scheduled
    fire = next_fire_time(job.trigger, now, job_file.path) if fires else None
    trig = job.trigger
    stored = {s.name: s.next_fire[job.name] for s in stores if job.name in s.next_fire}
    return {
        "name": job.name,
        "description": job.description,
        "file": str(job_file.path),
        "source": job_file.source.value,
        "overrides": str(job_file.overrides) if job_file.overrides else None,
        "enabled": job.enabled,
        "scheduled": fires and job.trigger is not None,
        "phases": list(job.phases),
        "agents": job.agents if job.agents == "*" else list(job.agents),
        "trigger": describe_trigger(trig),
        "cron": trig.cron if trig else None,
        "interval_minutes": trig.interval_minutes if trig else None,
        "timezone": (trig.timezone or str(get_localzone())) if trig else None,
        "misfire_grace_minutes": trig.misfire_grace_minutes if trig else None,
        "next_fire_time": fire.isoformat(timespec="seconds") if fire else None,
        "scheduler_next_fire_time": {
            name: at.isoformat(timespec="seconds") if at else None for name, at in stored.items()
        },
        "budget": job.budget.model_dump(),
        "llm": job.llm,
        "dry_run": job.dry_run,
    }


# The outcomes are the runner's; the scheduler reports them per agent.
AgentOutcome = Outcome


class JobRunner(ABC):
    """Runs one job now over its agents and reports one result per agent.

    Contract: one `AgentResult` per agent (the runner's, as `dreaming run` gets it), with
    `reason` set for skipped and `error` for failed agents. An agent that another run holds
    is reported `skipped`, never raised; a failure on one agent does not stop the others.
    An unknown job raises `StateError`.
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

    def __init__(self, app: App, jobs: JobCatalog) -> None:
        self.app = app
        self.jobs = jobs

    def job(self, job_name: str) -> Job:
        return self.jobs.find(job_name, list(self.app.settings.llm.profiles)).job

    def agents_for(self, job: Job, only: Sequence[str] | None = None) -> list[str]:
        if not only:
            return job.agent_list(self.app.agents())
        chosen = self.app.agents(only)
        if job.agents != "*":
            outside = [a for a in chosen if a not in job.agents]
            if outside:
                raise NoSuchError(
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
        phases = ",".join(job.phases)
        log.info(
            "job=%s agent=%s phases=%s dry_run=%s event=start", job.name, agent, phases, dry_run
        )
        started = time.monotonic()
        try:
            [result] = runner.run(
                self.app,
                job.phases,
                [agent],
                job=job.name,
                dry_run=dry_run,
                budget=budget,
                llm=job.llm,
                progress=progress,
            )
        except LockedError as err:
            result = AgentResult(
                agent, AgentOutcome.SKIPPED, job.name, dry_run, reason=f"locked by {err.holder}"
            )
            if not dry_run:
                result = replace(result, run_id=self._record_skip(job, agent, result))
        except Exception as err:  # one agent's failure must not cost the others their run
            if isinstance(err, DreamingError):
                log.error("job=%s agent=%s error=%r", job.name, agent, str(err))
            else:
                log.exception("job=%s agent=%s crashed", job.name, agent)
            error = str(err) or type(err).__name__
            result = AgentResult(agent, AgentOutcome.FAILED, job.name, dry_run, error=error)
        took = time.monotonic() - started
        why = result.reason or result.error
        if why is None:
            log.info(
                "job=%s agent=%s run=%s outcome=%s duration=%.1fs",
                job.name,
                agent,
                result.run_id,
                result.outcome,
                took,
            )
        else:
            log.warning(
                "job=%s agent=%s run=%s outcome=%s duration=%.1fs reason=%r",
                job.name,
                agent,
                result.run_id,
                result.outcome,
                took,
                why,
            )
        return result

    def _record_skip(self, job: Job, agent: str, result: AgentResult) -> int | None:
        try:
            engine, summary = self.app.engine(agent), result.to_dict()
            return record_skipped(engine, agent, list(job.phases), job.name, summary)
        except (SQLAlchemyError, DreamingError) as err:
            log.warning("job=%s agent=%s cannot record the skipped run: %s", job.name, agent, err)
            return None


def run_scheduled_job(
    job_name: str, state_dir: str, config: str | None, jobs_folder: str
) -> list[AgentResult]:
    """The function the job store persists: plain arguments only, so a stored job survives
    restarts and could be dispatched anywhere. The job is looked up when it fires, in the
    folder over the bundled examples of the dreaming that runs it."""
    app = App.open(Path(state_dir), Path(config) if config else None)
    try:
        return InProcessRunner(app, JobCatalog.over_bundled(Path(jobs_folder))).run(job_name)
    finally:
        app.close()


@dataclass(frozen=True)
class ScheduledCall:
    """What every stored job calls: `func` (an importable "module:function") with
    (job name, state dir, config path, jobs dir). Another executor (a queue for fleets)
    is another `func`; the trigger code does not change. `jobs_dir` is the user's folder
    only: the bundled examples are found under it at each fire, wherever they are
    installed then."""

    state_dir: Path
    config: Path | None
    jobs_dir: Path
    func: str = RUN_JOB_FUNC

    def args(self, job_name: str) -> tuple[str, str, str | None, str]:
        config = str(self.config) if self.config is not None else None
        return (job_name, str(self.state_dir), config, str(self.jobs_dir))
