"""Progress for long runs: a rich bar on a terminal, a few plain lines otherwise."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dreaming.phases.light import Progress as ProgressFn


@contextlib.contextmanager
def progress(label: str, enabled: bool = True) -> Iterator[ProgressFn | None]:
    if not enabled:
        yield None
        return
    console = Console(stderr=True)
    if console.is_terminal:
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as bar:
            task = bar.add_task(label, total=None)

            def update(done: int, total: int, item: str) -> None:
                bar.update(task, completed=done, total=total, description=f"{label} {item[:24]}")

            yield update
        return

    last = {"pct": -1}

    def plain(done: int, total: int, item: str) -> None:
        # Every 10% when not a terminal: logs stay readable, cron mail stays short.
        pct = (done * 10) // max(total, 1)
        if pct != last["pct"]:
            last["pct"] = pct
            click.echo(f"{label}: {done}/{total} sessions", err=True)

    yield plain
