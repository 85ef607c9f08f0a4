"""`dreaming scheduler`: the foreground service that runs the jobs on their triggers, and
`scheduler status`: whether one runs and what its job store holds."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dreaming.cli._fleet import executor_option, require_fleet
from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json

# APScheduler and the library behind the scheduler load when a command runs, not when it
# registers: `dreaming --help` never needs them.
if TYPE_CHECKING:
    from dreaming.scheduler import Executor, StoredSchedule


def _service_logging() -> None:
    """A service logs every run: INFO for dreaming, timestamps on every line."""
    dreaming_log = logging.getLogger("dreaming")
    if dreaming_log.getEffectiveLevel() > logging.INFO:
        dreaming_log.setLevel(logging.INFO)
    stamped = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.setFormatter(stamped)


@cli.group(invoke_without_command=True)
@click.option(
    "--jobs-dir",
    "folder",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Jobs folder, over the bundled examples (default: jobs_dir from the settings, "
    "else <state-dir>/dreaming/jobs).",
)
@executor_option("run each due job here")
@click.pass_context
def scheduler(click_ctx: click.Context, folder: Path | None, executor: Executor) -> None:
    """Run the jobs on their triggers, in the foreground, until stopped (`scheduler status`
    tells whether one runs and what its store holds).

    The jobs are those of the jobs folder over the bundled examples, as `jobs list` shows
    them. The schedule persists in <state-dir>/dreaming/scheduler.sqlite: a run missed while
    the service was down runs once at start if within the job's misfire grace time. SIGHUP
    reloads the jobs folder; SIGTERM or SIGINT stop after the running job (a second one
    interrupts it, recorded `interrupted`, exit status 130). Every fire and its outcome is
    logged on stderr (a service prints log lines, not a --json document).

    With --executor procrastinate the store is scheduler-<host>.sqlite, so a second
    scheduler on another machine may run for availability: the queue refuses a task for
    a job and agent that is already waiting, and a fire that is already enqueued.
    """
    if click_ctx.invoked_subcommand is not None:
        return
    from dreaming.scheduler import JobScheduler, jobs_dir

    ctx = click_ctx.find_object(Context)
    assert ctx is not None
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


def _format_store(store: StoredSchedule) -> str:
    state = f"running ({store.holder})" if store.running else "not running"
    lines = [f"{store.name}: {state}; store {store.path}"]
    for name, fire in sorted(store.next_fire.items()):
        lines.append(f"  {name}: next {fire.isoformat() if fire else 'paused'}")
    if not store.next_fire:
        lines.append("  (no jobs scheduled)")
    return "\n".join(lines)


@scheduler.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def scheduler_status(ctx: Context, as_json: bool) -> None:
    """Whether a scheduler serves this state folder, and the next fire time of each job its
    store holds. Exit status: 0 when one runs, 3 when none does."""
    from dreaming.scheduler import read_schedules

    app = ctx.app
    stores = read_schedules(app.paths)
    running = any(s.running for s in stores)
    if as_json:
        emit_json(
            {
                "state_dir": str(app.paths.state_dir),
                "running": running,
                "stores": [s.to_dict() for s in stores],
            }
        )
    elif stores:
        echo("\n".join(_format_store(s) for s in stores))
    else:
        echo(f"no scheduler store under {app.paths.home}: `dreaming scheduler` never ran")
    if not running:
        sys.exit(3)
