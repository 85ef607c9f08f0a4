"""The `dreaming` command group, global options and error handling."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from dreaming import __version__
from dreaming.cli import _output
from dreaming.cli._output import echo, emit_json
from dreaming.errors import DreamingError, ExitCode, exit_code
from dreaming.gc_tuning import pause_for_start_up, start_up_done

if TYPE_CHECKING:
    from dreaming.app import App

F = TypeVar("F", bound=Callable[..., Any])
DEBUG_ENV = "DREAMING_DEBUG"
EXIT_INTERRUPTED = ExitCode.INTERRUPTED
# The long-running services handle their stop signals themselves.
SERVICES = frozenset({"scheduler", "worker"})


class Context:
    """What every command gets: where state lives, and the App opened on first use."""

    def __init__(self, state_dir: Path | None, config: Path | None, verbose: int = 0) -> None:
        self.state_dir = state_dir
        self.config = config
        self.verbose = verbose  # -v: the tag registry banner and INFO logs
        self.as_json = False  # the command was asked for --json: errors are a document too
        self._app: App | None = None

    @property
    def app(self) -> App:
        if self._app is None:
            # Imported here, not at the top: the App pulls in SQLAlchemy, pydantic and the
            # whole library, which `--help`, `--version` and usage errors never need.
            from dreaming.app import App

            self._app = App.open(self.state_dir, self.config)
            start_up_done()  # what the command does from here on runs with collection
        return self._app

    def close(self) -> None:
        if self._app is not None:
            self._app.close()


pass_ctx = click.make_pass_decorator(Context)


def _log_level(verbose: int) -> int:
    return logging.WARNING - 10 * min(verbose, 2)


def _more_verbose(ctx: click.Context, _param: click.Parameter, value: int) -> None:
    """`-v` after the command name counts as it does before it (`dreaming run -v`)."""
    context = ctx.find_object(Context)
    if value and context is not None:
        context.verbose += value
        logging.getLogger().setLevel(_log_level(context.verbose))


def _verbose_option() -> click.Option:
    return click.Option(
        ["-v", "--verbose"],
        count=True,
        expose_value=False,
        callback=_more_verbose,
        help="More log output on stderr (as before the command name).",
    )


def _note_json(ctx: click.Context) -> None:
    context = ctx.find_object(Context)
    if context is not None and ctx.params.get("as_json"):
        context.as_json = True


class _Verbose(click.Command):
    """Takes -v too, and says when it was asked for --json: every command and group."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(_verbose_option())

    def invoke(self, ctx: click.Context) -> Any:
        _note_json(ctx)
        return super().invoke(ctx)


class DreamingCommand(_Verbose):
    """Every command: takes -v too, and says when it was asked for --json."""


class DreamingSubGroup(_Verbose, click.Group):
    """A command group under `dreaming` (jobs, runs, review, ...): as DreamingCommand."""

    command_class = DreamingCommand
    group_class = type  # its own groups are of this class too


class DreamingGroup(click.Group):
    """Turns library errors into one-line messages with the exit status `ExitCode` gives
    (and, for a command asked for --json that printed nothing yet, a document saying so);
    storage faults the library did not name (an OSError) become one line too.
    DREAMING_DEBUG=1 shows the traceback."""

    command_class = DreamingCommand
    group_class = DreamingSubGroup

    def invoke(self, ctx: click.Context) -> Any:
        _output.reset()
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM: what was committed stays, the files were brought in step
            # with it (runner), the run is recorded `interrupted`; the next run goes on.
            echo("dreaming: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except DreamingError as err:
            self._fail(ctx, err, str(err))
        except BrokenPipeError:
            # The reader went away (`| head`): nothing to say, and nothing more to flush.
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(int(ExitCode.FAILED))
        except OSError as err:
            from dreaming.store.storage import os_fault  # the store is heavy: only on a fault

            fault = os_fault(err)
            self._fail(ctx, err, str(fault) if fault else _os_line(err))
        except UnicodeDecodeError as err:
            self._fail(ctx, err, f"a file is not valid UTF-8 ({err}); {DEBUG_ENV}=1 shows which")

    @staticmethod
    def _fail(ctx: click.Context, err: Exception, message: str) -> None:
        if os.environ.get(DEBUG_ENV):
            raise err
        code = exit_code(err)
        context = ctx.find_object(Context)
        if context is not None and context.as_json and not _output.emitted():
            emit_json({"error": message, "exit_code": int(code)})
        echo(f"dreaming: error: {message}", err=True)
        sys.exit(int(code))


def _os_line(err: OSError) -> str:
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{err.strerror or err}"


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
    level = _log_level(verbose)
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


def register_commands() -> click.Group:
    """`cli` with every command on it: importing a command module registers its commands.
    The modules import the library only inside their commands, so this stays cheap."""
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

    return cli


def main() -> None:
    pause_for_start_up()  # until the command has its App (`Context.app`)
    register_commands()()
