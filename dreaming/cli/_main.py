"""The `dreaming` command group, global options and error handling."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from dreaming import __version__
from dreaming.app import App
from dreaming.cli._output import echo
from dreaming.errors import ConfigError, DreamingError, NoAgentsError

F = TypeVar("F", bound=Callable[..., Any])
DEBUG_ENV = "DREAMING_DEBUG"
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
# The long-running services handle their stop signals themselves.
SERVICES = frozenset({"scheduler", "worker"})


class Context:
    """What every command gets: where state lives, and the App opened on first use."""

    def __init__(self, state_dir: Path | None, config: Path | None, verbose: int = 0) -> None:
        self.state_dir = state_dir
        self.config = config
        self.verbose = verbose  # -v: the tag registry banner and INFO logs
        self._app: App | None = None

    @property
    def app(self) -> App:
        if self._app is None:
            self._app = App.open(self.state_dir, self.config)
        return self._app

    def close(self) -> None:
        if self._app is not None:
            self._app.close()


pass_ctx = click.make_pass_decorator(Context)


class DreamingGroup(click.Group):
    """Turns library errors into one-line messages; DREAMING_DEBUG=1 shows the traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM: what was committed stays, the files were brought in step
            # with it (runner), the run is recorded `interrupted`; the next run goes on.
            echo("dreaming: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except DreamingError as err:
            if os.environ.get(DEBUG_ENV):
                raise
            echo(f"dreaming: error: {err}", err=True)
            sys.exit(2 if isinstance(err, ConfigError | NoAgentsError) else 1)


@click.group(cls=DreamingGroup)
@click.version_option(__version__, prog_name="dreaming")
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="DREAMING_STATE_DIR",
    help="State folder (default ~/.openclaw). Read as an OpenClaw root; "
    "dreaming keeps its own state in <state-dir>/dreaming.",
)
@click.option(
    "--config",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="DREAMING_CONFIG",
    help="Settings file (default <state-dir>/dreaming.toml when it exists).",
)
@click.option("-v", "--verbose", count=True, help="More log output on stderr.")
@click.pass_context
def cli(ctx: click.Context, state_dir: Path | None, config: Path | None, verbose: int) -> None:
    """dreaming: consolidate agent transcripts into long-term memory."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    context = Context(state_dir, config, verbose)
    ctx.obj = context
    ctx.call_on_close(context.close)
    if ctx.invoked_subcommand not in SERVICES:
        _interrupt_on_sigterm(ctx)


def _raise_interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _interrupt_on_sigterm(ctx: click.Context) -> None:
    """SIGTERM (`kill`, a service manager, a container stopping) stops a command the way
    Ctrl-C does, with its cleanup, rather than killing it mid-write."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers belong to the main thread
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    ctx.call_on_close(lambda: signal.signal(signal.SIGTERM, previous))


def main() -> None:
    from dreaming.cli import (  # noqa: F401  (registers commands)
        _candidates,
        _demo,
        _doctor,
        _entries,
        _forget,
        _jobs,
        _llm,
        _logs,
        _repair,
        _report,
        _review,
        _run,
        _runs,
        _scheduler,
        _search,
        _status,
        _tags,
        _verify,
        _worker,
    )

    cli()
