"""The Procrastinate queue on the fleet database: its connection, its schema, the names of
the tasks a fleet runs, deferring a run, and counting what waits. The task bodies and
their registration live in `_tasks`, which imports this module and not the reverse."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from dreaming.config import Settings
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


def connect_queue(settings: Settings) -> procrastinate.App:
    """A Procrastinate app on the fleet database, no tasks registered yet (`build_queue` in
    `_tasks` registers them)."""
    _require_procrastinate()
    import procrastinate

    if settings.database_url is None:
        raise StateError("fleet mode needs database_url in the settings (docs/fleet.md)")
    dsn = libpq_dsn(settings.database_url)
    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))


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
