"""What the README promises about --json: every command that reports something takes it;
only the two long-running services print log lines instead."""

from __future__ import annotations

from collections.abc import Iterator

import click

from dreaming.cli import cli

# Foreground services: they print log lines, not a document (README, "Using it"); and
# `report`, which writes an HTML page (to a file, or stdout with `--out -`).
SERVICES = {"scheduler", "worker"}
NOT_A_DOCUMENT = SERVICES | {"report"}


def commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        path = f"{prefix}{name}"
        yield path, command
        if isinstance(command, click.Group):
            yield from commands(command, f"{path} ")


def test_every_command_but_the_services_takes_json() -> None:
    from dreaming.cli import (  # noqa: F401  (registers every command, as main() does)
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

    found = dict(commands(cli))
    assert {"jobs init", "scheduler status", "tags strip", "entries search", "doctor"} <= set(found)
    # A group that only dispatches to its subcommands prints nothing of its own.
    acting = {
        path: command
        for path, command in found.items()
        if not isinstance(command, click.Group) or command.invoke_without_command
    }
    assert {"jobs", "tags", "runs", "entries"} <= set(acting)
    without = {
        path
        for path, command in acting.items()
        if not any("--json" in p.opts for p in command.params if isinstance(p, click.Option))
    }
    assert without == NOT_A_DOCUMENT
