"""`dreaming scheduler`: the foreground service that runs the jobs on their triggers."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from dreaming._scheduler._service import Executor
from dreaming.cli._fleet import executor_option, require_fleet
from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.scheduler import JobScheduler, jobs_dir


def _service_logging() -> None:
    """A service logs every run: INFO for dreaming, timestamps on every line."""
    dreaming_log = logging.getLogger("dreaming")
    if dreaming_log.getEffectiveLevel() > logging.INFO:
        dreaming_log.setLevel(logging.INFO)
    stamped = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.setFormatter(stamped)


@cli.command()
@click.option(
    "--jobs-dir",
    "folder",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Jobs folder, over the bundled examples (default: jobs_dir from the settings, "
    "else <state-dir>/dreaming/jobs).",
)
@executor_option("run each due job here")
@pass_ctx
def scheduler(ctx: Context, folder: Path | None, executor: Executor) -> None:
    """Run the jobs on their triggers, in the foreground, until stopped.

    The jobs are those of the jobs folder over the bundled examples, as `jobs list` shows
    them. The schedule persists in <state-dir>/dreaming/scheduler.sqlite: a run missed while
    the service was down runs once at start if within the job's misfire grace time. SIGHUP
    reloads the jobs folder; SIGTERM or SIGINT stop after the running job (a second one
    interrupts it, recorded `interrupted`, exit status 130).

    With --executor procrastinate the store is scheduler-<host>.sqlite, so a second
    scheduler on another machine may run for availability: the queue refuses a task for
    a job and agent that is already waiting, and a fire that is already enqueued.
    """
    app = ctx.app
    if executor == "procrastinate":
        url = require_fleet(app, "--executor procrastinate")
        from dreaming.fleet import ensure_queue_schema, libpq_dsn

        ensure_queue_schema(libpq_dsn(url))  # fail now, not at a fire
    _service_logging()
    service = JobScheduler.for_app(app, (folder or jobs_dir(app.paths)).resolve(), executor)
    code = service.serve()
    if code:
        sys.exit(code)
