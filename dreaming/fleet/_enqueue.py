"""Enqueueing a job: one Procrastinate task per agent, never two for one (job, agent)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import delete, update

from dreaming.app import App
from dreaming.fleet._queue import defer_run, ensure_queue_schema, libpq_dsn
from dreaming.fleet._tasks import build_queue
from dreaming.scheduler import (
    SCHEDULED_FIRE,
    AgentOutcome,
    AgentResult,
    InProcessRunner,
    JobCatalog,
)
from dreaming.store.dialect import upsert
from dreaming.store.tables import FLEET_FIRES

log = logging.getLogger("dreaming.fleet")


def enqueue_job(
    app: App,
    jobs_dir: Path,
    job_name: str,
    *,
    agents: Sequence[str] | None = None,
    dry_run: bool = False,
    fire: datetime | None = None,
) -> list[AgentResult]:
    """Queue `job_name` (from `jobs_dir` over the bundled examples, as every runner looks
    jobs up) for each of its agents; report one result per agent, outcome
    `queued` or `skipped` (a duplicate: already waiting, or this fire already claimed).

    Two guards, because a fleet may run two schedulers for availability and both fire:
    a scheduled fire is claimed per agent by inserting (job, agent, fire) under a primary
    key before it is enqueued, so only one scheduler's insert wins whatever the timing;
    and the queueing lock "<job>:<agent>" makes Procrastinate refuse a second task while
    one waits (on-demand runs, which have no fire)."""
    from procrastinate.exceptions import AlreadyEnqueued

    settings = app.settings
    assert settings.database_url is not None
    runner = InProcessRunner(app, JobCatalog.over_bundled(jobs_dir))
    job = runner.job(job_name)
    names = runner.agents_for(job, agents)
    dry = dry_run or job.dry_run
    ensure_queue_schema(libpq_dsn(settings.database_url))
    # The same instant from two hosts in two time zones must give the same key.
    fire_key = fire.astimezone(UTC).isoformat() if fire is not None else None
    queue = build_queue(settings)
    results: list[AgentResult] = []
    with queue.open():
        for agent in names:
            base = AgentResult(agent, AgentOutcome.QUEUED, job.name, dry)
            if fire_key is not None and not _claim(app, job.name, agent, fire_key):
                results.append(_duplicate(base, f"fire {fire_key} is already enqueued"))
                continue
            try:
                queue_id = defer_run(queue, job.name, agent, dry_run=dry, fire=fire_key)
            except AlreadyEnqueued:
                results.append(_duplicate(base, "already waiting in the queue"))
                continue
            except BaseException:
                if fire_key is not None:  # not enqueued: let the other scheduler have it
                    _release(app, job.name, agent, fire_key)
                raise
            if fire_key is not None:
                _claimed(app, job.name, agent, fire_key, queue_id)
            log.info("job=%s agent=%s task=%s event=queued", job.name, agent, queue_id)
            results.append(replace(base, queue_job_id=queue_id))
    return results


# A claim whose scheduler died before enqueueing (no task id) is given up after this.
_ABANDONED_CLAIM = timedelta(minutes=10)


def _claim(app: App, job: str, agent: str, fire: str) -> bool:
    """True for the one process whose insert of (job, agent, fire) went in, or that took
    over a claim abandoned before its task was queued."""
    now = datetime.now(UTC)
    values = {"job": job, "agent": agent, "fire": fire, "created_at": now}
    mine = (
        (FLEET_FIRES.c.job == job) & (FLEET_FIRES.c.agent == agent) & (FLEET_FIRES.c.fire == fire)
    )
    with app.shared_engine().begin() as conn:
        inserted = conn.execute(
            upsert(conn, FLEET_FIRES)
            .values(**values)
            .on_conflict_do_nothing()
            .returning(FLEET_FIRES.c.job)
        ).first()
        if inserted is not None:
            return True
        taken_over = conn.execute(
            update(FLEET_FIRES)
            .where(
                mine
                & FLEET_FIRES.c.queue_job_id.is_(None)
                & (FLEET_FIRES.c.created_at < now - _ABANDONED_CLAIM)
            )
            .values(created_at=now)
            .returning(FLEET_FIRES.c.job)
        ).first()
    return taken_over is not None


def _claimed(app: App, job: str, agent: str, fire: str, queue_id: int) -> None:
    with app.shared_engine().begin() as conn:
        conn.execute(
            update(FLEET_FIRES)
            .where(
                (FLEET_FIRES.c.job == job)
                & (FLEET_FIRES.c.agent == agent)
                & (FLEET_FIRES.c.fire == fire)
            )
            .values(queue_job_id=queue_id)
        )


def _release(app: App, job: str, agent: str, fire: str) -> None:
    with app.shared_engine().begin() as conn:
        conn.execute(
            delete(FLEET_FIRES).where(
                (FLEET_FIRES.c.job == job)
                & (FLEET_FIRES.c.agent == agent)
                & (FLEET_FIRES.c.fire == fire)
            )
        )


def _duplicate(base: AgentResult, reason: str) -> AgentResult:
    log.info("job=%s agent=%s event=duplicate reason=%r", base.job, base.agent, reason)
    return replace(base, outcome=AgentOutcome.SKIPPED, reason=reason)


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
