"""`dreaming run`: run phases now."""

from __future__ import annotations

from typing import Any

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import emit_json, note
from dreaming.cli._progress import progress


def format_light(data: dict[str, Any]) -> str:
    s = data["sessions"]
    lines = [
        f"agent {data['agent']}: light phase",
        f"  sessions: {s['seen']} seen, {s['read']} read, {s['unchanged']} unchanged"
        + (f", {s['rewritten']} rewritten" if s["rewritten"] else ""),
    ]
    for reason, count in s["not_admitted"].items():
        lines.append(f"  not admitted: {count} ({reason})")
    lines.append(f"  messages: {data['messages']} spoken, {data['corpus_lines']} new corpus lines")
    if data["dropped"]:
        lines.append("  dropped: " + ", ".join(f"{k} {v}" for k, v in data["dropped"].items()))
    if data["skips"]:
        lines.append("  skipped: " + ", ".join(f"{k} {v}" for k, v in data["skips"].items()))
    c = data["candidates"]
    lines.append(
        f"  candidates: {c['new']} new, {c['updated']} updated, {c['pending']} pending;"
        f" {data['recalls']} recalls of existing entries"
    )
    return "\n".join(lines)


@cli.command()
@click.option(
    "--phase",
    "phases",
    type=click.Choice(["light", "all"]),
    multiple=True,
    default=["all"],
    show_default=True,
    help="Phase to run (repeatable). `all` runs every phase in order.",
)
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def run(ctx: Context, phases: tuple[str, ...], agents: tuple[str, ...], as_json: bool) -> None:
    """Run phases now over the agents' transcripts."""
    app = ctx.app
    note(app.registry.banner())
    wanted = ["light"] if "all" in phases else list(dict.fromkeys(phases))
    report: dict[str, Any] = {"phases": wanted, "agents": []}
    if "light" in wanted:
        with progress("light", enabled=True) as bar:
            results = app.run_light(list(agents) or None, progress=bar)
        report["agents"] = results
    if as_json:
        emit_json(report)
        return
    for data in report["agents"]:
        click.echo(format_light(data))
    if not report["agents"]:
        click.echo(f"no agents found under {app.paths.state_dir} (and no configured sources)")
