"""`dreaming verify`: an invariant checker; exit status 1 on any violation."""

from __future__ import annotations

import sys

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json
from dreaming.errors import NoAgentsError


@cli.command("verify")
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def verify_cmd(ctx: Context, agents: tuple[str, ...], as_json: bool) -> None:
    """Check MEMORY.md, lineage, tombstones, corpus files, index and schema agree."""
    from dreaming.verify import verify, verify_without_state  # reads every store: heavy

    app = ctx.app
    names = app.agents_with_state(list(agents) or None)
    verdicts = [verify(app.engine(a, create=False), app.paths, a) for a in names]
    # An agent with transcripts but no database: its MEMORY.md may still show the entries
    # of a database that was deleted.
    try:
        stateless = [a for a in app.agents(list(agents) or None) if a not in names]
    except NoAgentsError:
        stateless = []
    for a in stateless:
        verdict = verify_without_state(app.paths, a)
        if verdict.violations:
            verdicts.append(verdict)
    verdicts.sort(key=lambda v: v.agent)
    ok = all(v.ok for v in verdicts)
    if as_json:
        emit_json({"ok": ok, "agents": [v.to_dict() for v in verdicts]})
    else:
        for v in verdicts:
            echo(f"agent {v.agent}: {'ok' if v.ok else 'VIOLATIONS'}")
            for line in v.violations:
                echo(f"  violation: {line}")
            for line in v.notes:
                echo(f"  note: {line}")
        if not verdicts:
            echo("no agent state to verify")
    if not ok:
        sys.exit(1)
