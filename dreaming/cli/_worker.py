"""`dreaming worker`: take fleet tasks from the Procrastinate queue and run them."""

from __future__ import annotations

from pathlib import Path

import click

from dreaming.cli._fleet import require_fleet
from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._scheduler import _service_logging


@cli.command()
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Tasks at once in this process (threads). Runs are CPU-bound: for throughput, "
    "start one worker process per core instead.",
)
@click.option(
    "--drain",
    is_flag=True,
    help="Exit once the queue holds nothing this worker can take (batch nights, tests).",
)
@click.option(
    "--jobs-dir",
    "folder",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Jobs folder the queued job names are looked up in, over the bundled examples "
    "(default as for `scheduler`).",
)
@click.option(
    "--poll",
    "poll_s",
    type=click.FloatRange(min=0.05),
    default=5.0,
    show_default=True,
    help="Seconds between queue polls when no notification arrives.",
)
@pass_ctx
def worker(ctx: Context, concurrency: int, drain: bool, folder: Path | None, poll_s: float) -> None:
    """Run a fleet worker: agents' jobs from the Procrastinate queue in PostgreSQL.

    Needs database_url (PostgreSQL) in the settings and the fleet extra. Each task runs one
    job for one agent under the agent's lock; the jobs of a worker that dies are handed back
    to the queue once it has missed heartbeats for [fleet] stalled_after_s. SIGTERM or
    SIGINT finish the running tasks, then stop. A worker prints log lines on stderr, not a
    --json document (`runs --json` and `status --json` report what it ran).
    """
    app = ctx.app
    require_fleet(app, "`dreaming worker`")
    from dreaming.fleet import run_worker
    from dreaming.scheduler import jobs_dir

    _service_logging()
    run_worker(
        app,
        (folder or jobs_dir(app.paths)).resolve(),
        concurrency=concurrency,
        drain=drain,
        poll_s=poll_s,
    )
