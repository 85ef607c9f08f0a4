"""`dreaming demo`: build a synthetic state folder and run a whole night on it, offline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from dreaming.cli._main import Context, cli
from dreaming.cli._output import echo, emit_json, note
from dreaming.cli._run import format_result
from dreaming.phases import Phase


@cli.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("demo-state"),
    show_default=True,
    help="Where to write the demo state folder (replaced if it holds an earlier demo).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
def demo(directory: Path, as_json: bool) -> None:
    """Write a demo state folder and run the night on it with the embedded default (no LLM)."""
    # The library is imported when the command runs, not when it registers (`--help`).
    from dreaming import demo as demo_mod
    from dreaming import runner
    from dreaming.app import App

    root = demo_mod.build(directory.resolve())
    app = App.open(root, root / "dreaming.toml", env={})
    try:
        context = click.get_current_context().find_object(Context)
        if not as_json and context is not None and context.verbose:
            note(app.registry.banner())  # `dreaming tags` shows it any time
        results = runner.run(app, list(Phase))
        report: dict[str, Any] = {"state_dir": str(root), "agents": []}
        for result in results:
            agent = result.agent
            report["agents"].append(
                {
                    "agent": agent,
                    "memory": str(app.paths.memory_file(agent)),
                    "dreams": str(app.paths.dreams_file(agent)),
                    "corpus": str(app.paths.corpus_dir(agent)),
                    "phases": result.phase_dicts(),
                }
            )
    finally:
        app.close()
    if as_json:
        emit_json(report)
        return
    echo(f"demo state folder: {root}")
    for result, a in zip(results, report["agents"], strict=True):
        echo(format_result(result))
        echo(f"  MEMORY.md: {a['memory']}")
        echo(f"  DREAMS.md: {a['dreams']}")
        echo(f"  corpus:    {a['corpus']}")
    echo(f"next: {sys.argv[0]} --state-dir {root} status")
