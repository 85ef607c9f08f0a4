"""`dreaming worker`: a Procrastinate worker that runs agents' jobs from the fleet queue."""

from __future__ import annotations

import logging
from pathlib import Path

from dreaming.app import App
from dreaming.fleet._queue import ensure_queue_schema, libpq_dsn
from dreaming.fleet._tasks import WorkerState, bind, build_queue
from dreaming.runs import worker_name

log = logging.getLogger("dreaming.fleet")


def run_worker(
    app: App,
    jobs_dir: Path,
    *,
    concurrency: int = 1,
    drain: bool = False,
    poll_s: float = 5.0,
) -> None:
    """Take tasks from the fleet queue until stopped (SIGINT/SIGTERM finish the running
    tasks first), or with `drain` until the queue has nothing this worker may take.

    Concurrency is Procrastinate's: that many tasks at once in this process, each in a
    thread. A run is CPU-bound Python, so for more throughput run more worker processes
    (one per core), and keep concurrency for overlapping LLM waits."""
    settings = app.settings
    assert settings.database_url is not None  # the CLI checks; App.fleet is True
    ensure_queue_schema(libpq_dsn(settings.database_url))
    app.pool_size = max(app.pool_size, 2 * concurrency + 1)  # a run uses one or two at once
    app.shared_engine()  # migrations before the first task, not inside it
    queue = build_queue(settings)
    fleet = settings.fleet
    bind(WorkerState(app, jobs_dir, fleet))
    log.info(
        "worker %s started queue=%s concurrency=%d heartbeat=%ss stalled_after=%ss",
        worker_name(),
        fleet.queue,
        concurrency,
        fleet.heartbeat_s,
        fleet.stalled_after_s,
    )
    try:
        queue.run_worker(
            queues=[fleet.queue],
            name=worker_name(),
            concurrency=concurrency,
            wait=not drain,
            fetch_job_polling_interval=poll_s,
            update_heartbeat_interval=fleet.heartbeat_s,
            stalled_worker_timeout=fleet.stalled_after_s,
            install_signal_handlers=True,
        )
    finally:
        bind(None)
        app.close()
