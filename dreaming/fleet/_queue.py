"""The Procrastinate app: its connection, its schema, and the tasks a fleet runs (the run
of a job for an agent, and two housekeeping tasks)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from dreaming.config import FleetSettings, Settings
from dreaming.errors import StateError

if TYPE_CHECKING:
    import procrastinate

log = logging.getLogger("dreaming.fleet")

RUN_TASK = "dreaming.run_agent_job"
STALLED_TASK = "dreaming.retry_stalled_jobs"
PRUNE_TASK = "dreaming.prune_finished_jobs"
# Serialises schema creation between processes that start at once (two workers, a
# scheduler): the same advisory-lock idea as our own migrations, another key.
_SCHEMA_LOCK = 0x647265616D717565  # "dreamque"
_HOUSEKEEPING_PRIORITY = 100  # runs use the default, 0; higher is fetched first


def libpq_dsn(database_url: str) -> str:
    """The settings' SQLAlchemy-style URL as a libpq connection string for psycopg."""
    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        raise StateError("fleet mode needs database_url = 'postgresql://...' in the settings")
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def _require_procrastinate() -> None:
    try:
        import procrastinate  # noqa: F401
    except ImportError:
        raise StateError(
            "the procrastinate executor needs the fleet extra: pip install 'dreaming[fleet]'"
        ) from None


def ensure_queue_schema(dsn: str) -> bool:
    """Create Procrastinate's tables once. True when this call created them.

    Upgrading Procrastinate later means applying its migration scripts (its docs), like
    any schema it owns; ours are separate (dreaming.store.migrations)."""
    _require_procrastinate()
    import psycopg
    from procrastinate.schema import SchemaManager

    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        row = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
        if row is not None and row[0] is not None:
            return False
        conn.execute(SchemaManager.get_schema())
        log.info("created the Procrastinate schema")
        return True


def build_queue(settings: Settings) -> procrastinate.App:
    """A Procrastinate app on the fleet database with our tasks registered. Open it with
    `with queue.open():` to defer, or run a worker on it."""
    _require_procrastinate()
    import procrastinate

    if settings.database_url is None:
        raise StateError("fleet mode needs database_url in the settings (docs/fleet.md)")
    dsn = libpq_dsn(settings.database_url)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))
    _register(app, settings.fleet)
    return app


def _register(app: procrastinate.App, fleet: FleetSettings) -> None:
    from dreaming.fleet import _tasks

    # A run that fails is recorded as failed and the next fire runs the agent again: no
    # automatic retry. A run that found its agent held outside the queue defers a fresh
    # task for later (_tasks.run_agent_job); jobs of a dead worker are handed back by the
    # stalled-job task.
    app.task(name=RUN_TASK, queue=fleet.queue, pass_context=True)(_tasks.run_agent_job)
    # Housekeeping goes first (priority) and never piles up (queueing lock): a nightly
    # backlog must not keep a dead worker's task stranded until the backlog drains.
    stalled = app.task(name=STALLED_TASK, queue=fleet.queue, pass_context=True)
    app.periodic(
        cron=fleet.stalled_check_cron,
        periodic_id="stalled",
        priority=_HOUSEKEEPING_PRIORITY,
        queueing_lock=f"{fleet.queue}:stalled",
    )(stalled(_tasks.retry_stalled_jobs))
    prune = app.task(name=PRUNE_TASK, queue=fleet.queue, pass_context=True)
    app.periodic(
        cron="17 4 * * *",
        periodic_id="prune",
        priority=_HOUSEKEEPING_PRIORITY,
        queueing_lock=f"{fleet.queue}:prune",
    )(prune(_tasks.prune_finished_jobs))


def defer_run(
    queue: procrastinate.App,
    job: str,
    agent: str,
    *,
    dry_run: bool,
    fire: str | None,
    busy_attempt: int = 0,
    delay_s: float | None = None,
) -> int:
    """Queue "run `job` for `agent`". Raises AlreadyEnqueued when that task is already
    waiting (its queueing lock), which callers treat as "someone else has it".

    The task's arguments are names only, no paths: each worker resolves them against its
    own settings, so machines may mount the shared root wherever they like."""
    # One task per (job, agent) in the queue at a time; a dry run never takes a real run's
    # place nor the reverse. The lock per agent keeps any two of its tasks from running
    # at once.
    options: dict[str, Any] = {
        "lock": f"agent:{agent}",
        "queueing_lock": f"{job}:{agent}" + (":dry" if dry_run else ""),
    }
    if delay_s is not None:
        options["schedule_in"] = {"seconds": delay_s}
    args: dict[str, Any] = {"job": job, "agent": agent, "dry_run": dry_run, "fire": fire}
    if busy_attempt:
        args["busy_attempt"] = busy_attempt
    return int(queue.tasks[RUN_TASK].configure(**options).defer(**args))


def queue_counts(dsn: str, queue: str) -> dict[str, int] | None:
    """Tasks of our queue by status (None before the queue's schema exists), for status."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
        if row is None or row[0] is None:
            return None
        rows = conn.execute(
            "SELECT status::text, count(*) FROM procrastinate_jobs WHERE queue_name = %s "
            "AND task_name = %s GROUP BY status",
            (queue, RUN_TASK),
        ).fetchall()
    return {str(status): int(n) for status, n in rows}
