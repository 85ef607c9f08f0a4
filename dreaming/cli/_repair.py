"""`dreaming repair`: adopt MEMORY.md's managed lines after the database was lost."""

from __future__ import annotations

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json


@cli.command("repair")
@click.option("--agent", required=True, help="The agent whose MEMORY.md to adopt.")
@click.option("--dry-run", is_flag=True, help="Say what would be adopted, write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def repair_cmd(ctx: Context, agent: str, dry_run: bool, as_json: bool) -> None:
    """Give managed MEMORY.md lines with no entry behind them (a lost database) their entry
    back. Their sources are unknown, and recorded so."""
    from dreaming.memory.lineage import ADOPTED  # the store: imported when the command runs
    from dreaming.repair import adopt

    app = ctx.app
    app.agents([agent])
    with app.lock(agent, "repair"):
        report = adopt(app.engine(agent), app.paths, agent, dry_run=dry_run)
    if as_json:
        emit_json(report.to_dict())
        return
    verb = "would adopt" if dry_run else "adopted"
    echo(f"agent {agent}: {verb} {len(report.adopted)} entries from MEMORY.md")
    for item in report.adopted:
        echo(f"  {item['key']}  {item['text']}")
    if report.adopted:
        echo(f"  their sources are unknown: each has the one origin {ADOPTED}")
    for key in report.edited_left:
        echo(f"  left as it is (edited by a person): {key}")
    for key in report.retired_left:
        echo(f"  not adopted (the database retired it; the next write takes it out): {key}")
    for key in report.removed_by_person:
        echo(f"  retired (no longer in MEMORY.md): {key}")
