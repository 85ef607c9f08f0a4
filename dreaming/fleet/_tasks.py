"""The tasks a fleet runs (the run of a job for an agent, and two housekeeping tasks), and
`build_queue`, which registers them on a connected queue. The task bodies find the
worker's App through `bind`, because Procrastinate calls tasks with their JSON arguments
only."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete

from dreaming.app import App
from dreaming.config import FleetSettings, Settings
from dreaming.errors import StateError
from dreaming.fleet._queue import (
    PRUNE_TASK,
    RUN_TASK,
    STALLED_TASK,
    connect_queue,
    defer_run,
)
from dreaming.scheduler import AgentOutcome, InProcessRunner, JobCatalog
from dreaming.store.tables import FLEET_FIRES

if TYPE_CHECKING:
    import procrastinate
    from procrastinate import JobContext

log = logging.getLogger("dreaming.fleet")

_HOUSEKEEPING_PRIORITY = 100  # runs use the default, 0; higher is fetched first


def build_queue(settings: Settings) -> procrastinate.App:
    """A Procrastinate app on the fleet database with our tasks registered. Open it with
    `with queue.open():` to defer, or run a worker on it."""
    app = connect_queue(settings)
    _register(app, settings.fleet)
    return app


def _register(app: procrastinate.App, fleet: FleetSettings) -> None:
    # A run that fails is recorded as failed and the next fire runs the agent again: no
    # automatic retry. A run that found its agent held outside the queue defers a fresh
    # task for later (run_agent_job); jobs of a dead worker are handed back by the
    # stalled-job task.
    app.task(name=RUN_TASK, queue=fleet.queue, pass_context=True)(run_agent_job)
    # Housekeeping goes first (priority) and never piles up (queueing lock): a nightly
    # backlog must not keep a dead worker's task stranded until the backlog drains.
    stalled = app.task(name=STALLED_TASK, queue=fleet.queue, pass_context=True)
    app.periodic(
        cron=fleet.stalled_check_cron,
        periodic_id="stalled",
        priority=_HOUSEKEEPING_PRIORITY,
        queueing_lock=f"{fleet.queue}:stalled",
    )(stalled(retry_stalled_jobs))
    prune = app.task(name=PRUNE_TASK, queue=fleet.queue, pass_context=True)
    app.periodic(
        cron="17 4 * * *",
        periodic_id="prune",
        priority=_HOUSEKEEPING_PRIORITY,
        queueing_lock=f"{fleet.queue}:prune",
    )(prune(prune_finished_jobs))


@dataclass(frozen=True)
class WorkerState:
    app: App
    jobs_dir: Path  # the user's folder; the bundled examples are found under it
    fleet: FleetSettings


_state: WorkerState | None = None


def bind(state: WorkerState | None) -> None:
    global _state
    _state = state


def _current() -> WorkerState:
    if _state is None:
        raise StateError("fleet task outside `dreaming worker` (no worker state bound)")
    return _state


def run_agent_job(
    context: JobContext,
    job: str,
    agent: str,
    dry_run: bool = False,
    fire: str | None = None,
    busy_attempt: int = 0,
) -> dict[str, Any]:
    """Run `job` for `agent` now, exactly as a local run would (App.run: the agent's lock,
    one run record). A crash half way is safe to run again: every phase resumes from what
    committed, which is what lets a dead worker's task simply be retried."""
    state = _current()
    queue_id = context.job.id if context.job is not None else None
    log.info("task=%s job=%s agent=%s fire=%s event=start", queue_id, job, agent, fire)
    runner = InProcessRunner(state.app, JobCatalog.over_bundled(state.jobs_dir))
    [result] = runner.run(job, agents=[agent], dry_run=dry_run)
    result = replace(result, queue_job_id=queue_id)
    # What the task returns is JSON for Procrastinate's log: the result's own form.
    report = result.to_dict()
    if result.outcome == AgentOutcome.SKIPPED:
        # Procrastinate's per-agent lock keeps queued runs apart, so whoever holds the agent
        # is outside the queue (a CLI run, a dead machine's session not yet dropped).
        report["busy_retry"] = _retry_busy_later(state, job, agent, dry_run, fire, busy_attempt)
    log.info(
        "task=%s job=%s agent=%s run=%s outcome=%s",
        queue_id,
        job,
        agent,
        result.run_id,
        result.outcome,
    )
    return report


def _retry_busy_later(
    state: WorkerState, job: str, agent: str, dry_run: bool, fire: str | None, attempt: int
) -> int | None:
    """Queue a fresh task for a busy agent, `busy_retry_s` from now, so it keeps its night.

    A fresh task rather than Procrastinate's retry of this one: putting this row back in
    the queue collides with any identical task queued meanwhile (the queueing lock), which
    would strand it. If an identical task already waits, that one will do."""
    from procrastinate.exceptions import AlreadyEnqueued

    fleet = state.fleet
    if attempt >= fleet.busy_retries:
        log.warning("job=%s agent=%s still busy after %d retries; giving up", job, agent, attempt)
        return None
    queue = build_queue(state.app.settings)
    with queue.open():
        try:
            retry = defer_run(
                queue,
                job,
                agent,
                dry_run=dry_run,
                fire=fire,
                busy_attempt=attempt + 1,
                delay_s=fleet.busy_retry_s,
            )
        except AlreadyEnqueued:
            return None
    log.info("job=%s agent=%s busy; retry %d as task %s", job, agent, attempt + 1, retry)
    return retry


async def retry_stalled_jobs(context: JobContext, timestamp: int) -> list[int]:
    """Hand the run tasks of workers that stopped sending heartbeats back to the queue.

    A worker killed mid-run leaves its task `doing` for ever, and the task's lock keeps
    every later task of that agent waiting; its advisory lock died with its connection,
    so once the task is back in the queue another worker can take it and finish it."""
    from procrastinate.exceptions import UniqueViolation
    from procrastinate.jobs import Status

    state = _current()
    manager = context.app.job_manager
    stalled = await manager.get_stalled_jobs(
        queue=state.fleet.queue,
        task_name=RUN_TASK,
        seconds_since_heartbeat=state.fleet.stalled_after_s,
    )
    retried: list[int] = []
    for job in stalled:
        agent = job.task_kwargs.get("agent")
        try:
            try:
                await manager.retry_job(job)
            except UniqueViolation:
                # An identical task was queued while this one ran (the queueing lock only
                # covers waiting tasks): that one will run the agent. Close this one.
                log.warning(
                    "task=%s agent=%s event=stalled action=close (a twin waits)", job.id, agent
                )
                await manager.finish_job(job, status=Status.FAILED, delete_job=False)
                continue
        except Exception:  # one bad row must not strand the others
            log.exception("task=%s agent=%s event=stalled action=retry failed", job.id, agent)
            continue
        log.warning(
            "task=%s agent=%s worker=%s event=stalled action=retry", job.id, agent, job.worker_id
        )
        if job.id is not None:
            retried.append(job.id)
    return retried


async def prune_finished_jobs(context: JobContext, timestamp: int) -> None:
    """Delete finished tasks older than [fleet] keep_finished_jobs_h (the stalled checks
    alone add one a minute). Failed ones too: runs keep the record of what happened."""
    state = _current()
    fleet = state.fleet
    await context.app.job_manager.delete_old_jobs(
        nb_hours=fleet.keep_finished_jobs_h, queue=fleet.queue, include_failed=True
    )
    # Fire claims only need to outlive the moment two schedulers fire together.
    cutoff = datetime.now(UTC) - timedelta(hours=fleet.keep_finished_jobs_h)
    with state.app.shared_engine().begin() as conn:
        conn.execute(delete(FLEET_FIRES).where(FLEET_FIRES.c.created_at < cutoff))
