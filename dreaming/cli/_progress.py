"""Progress for long runs: a bar per phase on a terminal, one summary line per phase
elsewhere (a cron night's stderr stays a few lines)."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dreaming.cli._output import echo
from dreaming.progress import Progress as ProgressFn
from dreaming.progress import Tick

# rich loads when a run shows progress, not with every command that might.
if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID


@contextlib.contextmanager
def progress(enabled: bool = True) -> Iterator[ProgressFn | None]:
    """A Progress for `App.run`, or None when nothing should be shown (--json)."""
    if not enabled:
        yield None
        return
    if _may_be_a_terminal():
        from rich.console import Console

        console = Console(stderr=True)
        if console.is_terminal:
            with _Bars(console) as bars:
                yield bars.tick
            return
    totals = _Totals()
    interrupted = False
    try:
        yield totals.tick
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        for line in totals.lines(interrupted=interrupted):
            echo(line, err=True)


def _may_be_a_terminal() -> bool:
    """Whether rich could take stderr for a terminal: by its own rules only a tty, or an
    environment that says so (TTY_COMPATIBLE, FORCE_COLOR). Asked first, so a night under
    cron or into a pipe never imports rich (a twentieth of a small run's start-up)."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return False


# The bars are redrawn by the ticks themselves, at most this often. rich's own refresh runs
# in a thread, and a process running another thread does not fork light's reading child
# (`dreaming.forking`): a night at a terminal would read in one process.
REDRAW_S = 0.1


class _Bars:
    """One rich bar per phase and agent, cleared when the run ends (stdout has the result)."""

    def __init__(self, console: Console) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} {task.fields[unit]}"),
            TextColumn("{task.fields[size]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            auto_refresh=False,
        )
        self.tasks: dict[tuple[str, str], TaskID] = {}
        self.drawn = 0.0

    def __enter__(self) -> _Bars:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def tick(self, t: Tick) -> None:
        key = (t.phase, t.agent)
        size = f"{_bytes(t.bytes_done)} of {_bytes(t.bytes_total)}" if t.bytes_total else ""
        if key not in self.tasks:
            self.tasks[key] = self.bar.add_task(
                f"{t.phase} {t.agent}", total=t.total, unit=t.unit, size=size
            )
        self.bar.update(self.tasks[key], completed=t.done, total=t.total, size=size)
        now = time.monotonic()
        if now - self.drawn >= REDRAW_S or t.done >= t.total:
            self.bar.refresh()
            self.drawn = now


@dataclass
class _Phase:
    agents: set[str] = field(default_factory=set)
    done: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    unit: str = ""
    started: float = field(default_factory=time.monotonic)
    ended: float = 0.0


class _Totals:
    """What each phase did across the run's agents, for one line per phase at the end."""

    def __init__(self) -> None:
        self.phases: dict[str, _Phase] = {}

    def tick(self, t: Tick) -> None:
        phase = self.phases.setdefault(t.phase, _Phase(unit=t.unit))
        phase.agents.add(t.agent)
        phase.done[t.agent] = t.done
        phase.bytes[t.agent] = t.bytes_done
        phase.ended = time.monotonic()

    def lines(self, *, interrupted: bool = False) -> list[str]:
        """One line per phase; with `interrupted`, the last phase's says it did not finish
        (what it counts is what was done before the interrupt)."""
        out = []
        for name, p in self.phases.items():
            agents = len(p.agents)
            size = sum(p.bytes.values())
            done = sum(p.done.values())
            unit = _SINGULAR.get(p.unit, p.unit) if done == 1 else p.unit
            out.append(
                f"{name}: {done} {unit}"
                + (f" ({_bytes(size)})" if size else "")
                + f" for {agents} agent{'s' if agents != 1 else ''}"
                + f" in {max(p.ended - p.started, 0.0):.1f}s"
            )
        if interrupted and out:
            out[-1] += ", then interrupted"
        return out


_SINGULAR = {"files": "file", "batches": "batch"}


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
