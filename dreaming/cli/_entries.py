"""`dreaming entries`: long-term memory entries and where each came from."""

from __future__ import annotations

from typing import Any

import click
from sqlalchemy import and_, select

from dreaming import lineage
from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import emit_json
from dreaming.corpus import reference
from dreaming.errors import StateError
from dreaming.store.models import DecisionRow, SupersessionRow

SUPERSESSIONS = SupersessionRow.__table__  # type: ignore[attr-defined]
DECISIONS = DecisionRow.__table__  # type: ignore[attr-defined]


def _entry(conn: Any, agent: str, key: str, text: str, *, detail: bool) -> dict[str, Any]:
    lin = lineage.entry_lineage(conn, agent, key)
    data: dict[str, Any] = {
        "agent": agent,
        "key": key,
        "text": text,
        "origins": [
            {
                "session_id": o.session_id,
                "session_key": o.session_key,
                "origin_class": o.origin_class,
                "observed_at": o.observed_at,
            }
            for o in lin.origins
        ],
    }
    if detail:
        data["evidence"] = [reference(agent, s, n) for s, n in lin.evidence]
        data["supersedes"] = [
            r[0]
            for r in conn.execute(
                select(SUPERSESSIONS.c.old_key).where(
                    and_(SUPERSESSIONS.c.agent == agent, SUPERSESSIONS.c.new_key == key)
                )
            )
        ]
        data["decisions"] = [
            dict(r)
            for r in conn.execute(
                select(
                    DECISIONS.c.run_id,
                    DECISIONS.c.action,
                    DECISIONS.c.candidate_key,
                    DECISIONS.c.targets,
                    DECISIONS.c.path,
                    DECISIONS.c.created_at,
                )
                .where(and_(DECISIONS.c.agent == agent, DECISIONS.c.entry_key == key))
                .order_by(DECISIONS.c.id)
            ).mappings()
        ]
    return data


def _agents(ctx: Context, agents: tuple[str, ...]) -> list[str]:
    app = ctx.app
    return app.agents_with_state(list(agents) or None)


@cli.group(invoke_without_command=True)
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@click.pass_context
def entries(click_ctx: click.Context, agents: tuple[str, ...], as_json: bool) -> None:
    """List live entries with their origins."""
    if click_ctx.invoked_subcommand is not None:
        return
    ctx = click_ctx.find_object(Context)
    assert ctx is not None
    out: list[dict[str, Any]] = []
    for agent in _agents(ctx, agents):
        with ctx.app.engine(agent, create=False).connect() as conn:
            for key, text in lineage.live_entries(conn, agent):
                out.append(_entry(conn, agent, key, text, detail=False))
    if as_json:
        emit_json({"entries": out})
        return
    if not out:
        click.echo("no entries yet: run `dreaming run` (light, then deep) first")
    for e in out:
        sessions = ", ".join(
            f"{o['session_key'] or o['session_id']} ({o['origin_class']})" for o in e["origins"]
        )
        click.echo(f"{e['agent']} {e['key']}  {e['text']}\n    from: {sessions}")


@entries.command("show")
@click.argument("key")
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def show(ctx: Context, key: str, agents: tuple[str, ...], as_json: bool) -> None:
    """Show one entry with its full lineage: origins, evidence lines, supersessions."""
    for agent in _agents(ctx, agents):
        with ctx.app.engine(agent, create=False).connect() as conn:
            live = dict(lineage.live_entries(conn, agent))
            if key not in live:
                continue
            data = _entry(conn, agent, key, live[key], detail=True)
        if as_json:
            emit_json(data)
            return
        click.echo(f"{data['key']} (agent {agent})\n  {data['text']}\n  origins:")
        for o in data["origins"]:
            click.echo(
                f"    {o['session_id']}  key={o['session_key'] or '-'}  class={o['origin_class']}"
                f"  observed={o['observed_at']}"
            )
        click.echo("  evidence:")
        for ref in data["evidence"]:
            click.echo(f"    [{ref}]")
        if data["supersedes"]:
            click.echo("  supersedes: " + ", ".join(data["supersedes"]))
        for d in data["decisions"]:
            click.echo(
                f"  run {d['run_id']}: {d['action']} by {d['path']} from {d['candidate_key']}"
            )
        return
    raise StateError(f"no live entry {key!r} (list them with `dreaming entries`)")
