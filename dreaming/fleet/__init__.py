"""Fleet mode: one PostgreSQL database for every agent's state, and the nightly work spread
over many worker processes (and machines) by Procrastinate, a PostgreSQL task queue.

    dreaming scheduler --executor procrastinate
        │   APScheduler still decides *when*; on a fire it enqueues one task per agent
        ▼   (queueing lock per job and agent: a second scheduler's duplicate is refused)
    procrastinate_jobs (PostgreSQL)
        ▼   lock per agent: a worker never fetches a task whose agent is running
    dreaming worker   runs "job J for agent A" through the same App.run as a local run,
                      under the agent's advisory lock on its own connection; a periodic
                      task hands the jobs of workers that stopped beating back to the queue.

Procrastinate and psycopg come with the `fleet` extra and are imported only here, so a
local install never needs them. See docs/fleet.md for operators.
"""

from __future__ import annotations

from dreaming.fleet._enqueue import enqueue_job, enqueue_scheduled_job
from dreaming.fleet._queue import (
    RUN_TASK,
    STALLED_TASK,
    ensure_queue_schema,
    libpq_dsn,
    queue_counts,
)
from dreaming.fleet._tasks import build_queue
from dreaming.fleet._worker import run_worker

__all__ = [
    "RUN_TASK",
    "STALLED_TASK",
    "build_queue",
    "enqueue_job",
    "enqueue_scheduled_job",
    "ensure_queue_schema",
    "libpq_dsn",
    "queue_counts",
    "run_worker",
]
