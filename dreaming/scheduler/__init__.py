"""Jobs (`jobs/*.toml`) and their scheduling: job files, triggers, the runner seam, and the
long-running service.

    JobScheduler      decides *when*: APScheduler 3 with a persistent SQLite job store,
        │             coalesced misfires and a grace time per job. Due jobs are handed to
        │             the thread that serves (the main thread), which runs them one at a
        │             time and handles SIGHUP (reload) and SIGTERM/SIGINT (stop).
        ▼
    ScheduledCall     what the job store persists: an importable function and plain args.
        ▼
    run_scheduled_job opens an App and asks a JobRunner to run the job now.
        ▼
    JobRunner         decides *how*: InProcessRunner runs the job's phases agent by agent
                      under each agent's lock; a busy agent is skipped, not fatal. A queue
                      based runner (Procrastinate, for fleets) plugs in here and leaves the
                      trigger code alone.

A job file is a `Job` (with its `Trigger`), read by `load_job`. Jobs are looked up in a
JobCatalog: the user's jobs folder over the bundled examples, the same way when scheduling
and at each fire. `read_schedules` shows what a service's store
holds to other processes (`jobs list`, `scheduler status`).

The parts are private modules of this package (`_jobs`, `_triggers`, `_runner`, `_service`,
`_store`); this module is their public face, and everything outside the package imports from
here. `dreaming.scheduler:run_scheduled_job` is the name the job store keeps, so moving code
between the private modules never strands a stored job.
"""

from __future__ import annotations

from ._jobs import (
    CopiedJob,
    CopyOutcome,
    Job,
    JobCatalog,
    JobFile,
    JobSource,
    bundled_jobs_dir,
    copy_bundled_jobs,
    effective_budget,
    load_job,
    load_jobs,
)
from ._runner import (
    RUN_JOB_FUNC,
    SCHEDULED_FIRE,
    AgentOutcome,
    AgentResult,
    InProcessRunner,
    JobRunner,
    ScheduledCall,
    describe_job,
    find_job,
    job_catalog,
    jobs_dir,
    run_scheduled_job,
)
from ._service import (
    ENQUEUE_JOB_FUNC,
    Fire,
    FireStatus,
    JobScheduler,
    ReloadReport,
    ServiceState,
)
from ._store import Executor, StoredSchedule, read_schedules, store_url
from ._triggers import (
    Trigger,
    build_trigger,
    crontab_weekdays,
    describe_trigger,
    next_fire_time,
)

__all__ = [
    "ENQUEUE_JOB_FUNC",
    "RUN_JOB_FUNC",
    "SCHEDULED_FIRE",
    "AgentOutcome",
    "AgentResult",
    "CopiedJob",
    "CopyOutcome",
    "Executor",
    "Fire",
    "FireStatus",
    "InProcessRunner",
    "Job",
    "JobCatalog",
    "JobFile",
    "JobRunner",
    "JobScheduler",
    "JobSource",
    "ReloadReport",
    "ScheduledCall",
    "ServiceState",
    "StoredSchedule",
    "Trigger",
    "build_trigger",
    "bundled_jobs_dir",
    "copy_bundled_jobs",
    "crontab_weekdays",
    "describe_job",
    "describe_trigger",
    "effective_budget",
    "find_job",
    "job_catalog",
    "jobs_dir",
    "load_job",
    "load_jobs",
    "next_fire_time",
    "read_schedules",
    "run_scheduled_job",
    "store_url",
]
