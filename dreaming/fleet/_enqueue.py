"""Enqueueing a job: one Procrastinate task per agent, never two for one (job, agent)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import text

from dreaming._scheduler._runner import SCHEDULED_FIRE, AgentOutcome, AgentResult, InProcessRunner
from dreaming.app import App
from dreaming.fleet._queue import RUN_TASK, build_queue, ensure_queue_schema, job_args, libpq_dsn

log = logging.getLogger("dreaming.fleet")


@dataclass(frozen=True)
class Enqueued:
    agent: str
    queue_job_id: int | None  # None: refused as a duplicate

    @property
    def duplicate(self) -> bool:
        return self.queue_job_id is None


def enqueue_job(
    app: App,
    jobs_dir: Path,
    job_name: str,
    *,
    agents: Sequence[str] | None = None,
    dry_run: bool = False,
    fire: datetime | None = None,
) -> list[AgentResult]:
    """Queue `job_name` for each of its agents; report one result per agent, outcome
    `queued` or `skipped` (a duplicate: already queued, or this fire already enqueued).

    Two guards, because a fleet may run two schedulers for availability and both fire:
    the queueing lock "<job>:<agent>" makes Procrastinate refuse a second task while one
    waits in the queue, and a scheduled fire's time travels in the task's arguments, so
    the same fire is never enqueued twice even after the first task has started."""
    from procrastinate.exceptions import AlreadyEnqueued

    settings = app.settings
    assert settings.database_url is not None
    runner = InProcessRunner(app, jobs_dir)
    job = runner.job(job_name)
    names = runner.agents_for(job, agents)
    ensure_queue_schema(libpq_dsn(settings.database_url))
    fire_key = fire.isoformat() if fire is not None else None
    queue = build_queue(settings)
    results: list[AgentResult] = []
    with queue.open():
        task = queue.tasks[RUN_TASK]
        for agent in names:
            base: AgentResult = {
                "agent": agent,
                "job": job.name,
                "phases": {},
                "dry_run": dry_run or job.dry_run,
                "run_id": None,
            }
            if fire_key is not None and _fired(app, job.name, agent, fire_key):
                results.append(_duplicate(base, f"fire {fire_key} is already enqueued"))
                continue
            try:
                queue_id = task.configure(
                    lock=f"agent:{agent}", queueing_lock=f"{job.name}:{agent}"
                ).defer(**job_args(job.name, agent, dry_run or job.dry_run, fire_key))
            except AlreadyEnqueued:
                results.append(_duplicate(base, "already waiting in the queue"))
                continue
            log.info("job=%s agent=%s task=%s event=queued", job.name, agent, queue_id)
            results.append(base | {"outcome": AgentOutcome.QUEUED.value, "queue_job_id": queue_id})
    return results


def _fired(app: App, job: str, agent: str, fire: str) -> bool:
    query = text(
        "SELECT 1 FROM procrastinate_jobs WHERE task_name = :t AND args->>'job' = :j "
        "AND args->>'agent' = :a AND args->>'fire' = :f LIMIT 1"
    )
    with app.shared_engine().connect() as conn:
        params = {"t": RUN_TASK, "j": job, "a": agent, "f": fire}
        return conn.execute(query, params).first() is not None


def _duplicate(base: AgentResult, reason: str) -> AgentResult:
    log.info("job=%s agent=%s event=duplicate reason=%r", base["job"], base["agent"], reason)
    return base | {"outcome": AgentOutcome.SKIPPED.value, "reason": reason}


def enqueue_scheduled_job(
    job_name: str, state_dir: str, config: str | None, jobs_folder: str
) -> list[AgentResult]:
    """What a scheduler with `--executor procrastinate` stores and calls on a fire (the
    same plain arguments as dreaming.scheduler:run_scheduled_job)."""
    app = App.open(Path(state_dir), Path(config) if config else None)
    try:
        return enqueue_job(app, Path(jobs_folder), job_name, fire=SCHEDULED_FIRE.get())
    finally:
        app.close()
