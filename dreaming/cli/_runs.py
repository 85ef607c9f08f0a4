"""`dreaming runs`: past runs across agents, and one run in full."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json, json_default
from dreaming.cli._run import format_recorded
from dreaming.errors import NoSuchError

# Run records are SQLAlchemy: read by the commands when they run, not when they register.
if TYPE_CHECKING:
    from dreaming.runs import RunRecord


def _agents(ctx: Context, agents: tuple[str, ...]) -> list[str]:
    app = ctx.app
    return app.agents_with_state(list(agents) or None)


def _num(value: Any) -> str:
    return "-" if value is None else str(value)


HEADER = (
    f"{'agent':<10} {'id':>5} {'job':<12} {'phases':<15} {'started (UTC)':<19} "
    f"{'took':>7} {'outcome':<11} {'cand':>5} {'prom':>5} {'calls':>5} {'tokens':>7} "
    f"{'cost':>8} {'skips':>5}"
)


def _row(d: dict[str, Any]) -> str:
    took = "-" if d["duration_s"] is None else f"{d['duration_s']:.1f}s"
    started = d["started_at"][:19].replace("T", " ")
    phases = ",".join(d["phases"])
    return (
        f"{d['agent']:<10} {d['id']:>5} {d['job'] or '-':<12} {phases:<15} "
        f"{started:<19} {took:>7} {d['outcome']:<11} {_num(d['candidates']):>5} "
        f"{_num(d['promotions']):>5} {d['llm_calls']:>5} {d['tokens']:>7} "
        f"{'$' + format(d['cost_usd'], '.4f'):>8} {d['skips']:>5}"
    ) + (f"  undone by run {d['undone_by']}" if d.get("undone_by") else "")


@cli.group(invoke_without_command=True)
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Newest N runs."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@click.pass_context
def runs(click_ctx: click.Context, agents: tuple[str, ...], limit: int, as_json: bool) -> None:
    """List past runs across agents, newest first (`runs show ID` for one in full)."""
    if click_ctx.invoked_subcommand is not None:
        return
    from dreaming.oversight import undone_by
    from dreaming.runs import list_runs

    ctx = click_ctx.find_object(Context)
    assert ctx is not None
    app = ctx.app
    records: list[RunRecord] = []
    for agent in _agents(ctx, agents):
        records.extend(list_runs(app.engine(agent, create=False), agent, limit))
    records.sort(key=lambda r: (r.started_at, r.agent, r.id), reverse=True)
    undone = undone_by(records)
    listing = [r.digest() | {"undone_by": undone.get((r.agent, r.id))} for r in records[:limit]]
    if as_json:
        emit_json({"state_dir": str(app.paths.state_dir), "runs": listing})
        return
    if not listing:
        echo(f"no runs recorded under {app.paths.home} yet: run `dreaming run` first")
        return
    echo(HEADER)
    for d in listing:
        echo(_row(d))


@runs.command("show")
@click.argument("run_id", type=int)
@click.option("--agent", help="The agent whose run it is (run ids are per agent).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def show(ctx: Context, run_id: int, agent: str | None, as_json: bool) -> None:
    """Show run RUN_ID in full: its numbers and the summary of every phase."""
    from dreaming.oversight import undone_by
    from dreaming.runs import get_run, list_runs

    app = ctx.app
    found = [
        rec
        for a in _agents(ctx, (agent,) if agent else ())
        if (rec := get_run(app.engine(a, create=False), a, run_id)) is not None
    ]
    if not found:
        where = f"agent {agent!r}" if agent else "any agent"
        raise NoSuchError(f"no run {run_id} for {where} (see `dreaming runs`)")
    if len(found) > 1:
        owners = ", ".join(r.agent for r in found)
        raise NoSuchError(
            f"run ids are per agent and {run_id} exists for {owners}: add --agent NAME"
        )
    record = found[0]
    later = list_runs(app.engine(record.agent, create=False), record.agent)
    by = undone_by(later).get((record.agent, record.id))
    if as_json:
        emit_json(record.to_dict() | {"undone_by": by})
        return
    d = record.digest()
    took = "-" if d["duration_s"] is None else f"{d['duration_s']:.2f}s"
    phases = ",".join(d["phases"])
    lines = [
        f"run {d['id']} of agent {d['agent']}: job {d['job'] or '-'}, phases {phases}",
        f"  started {d['started_at']}, ended {d['ended_at'] or '-'} ({took})",
        f"  outcome: {d['outcome']}" + (f" (undone by run {by})" if by else ""),
        f"  candidates pending: {_num(d['candidates'])}; promotions: {_num(d['promotions'])};"
        f" llm: {d['llm_calls']} calls, {d['tokens']} tokens, ${d['cost_usd']:.4f};"
        f" skips: {d['skips']}",
    ]
    if d["reason"]:
        lines.append(f"  reason: {d['reason']}")
    echo("\n".join(lines))
    phase_data = record.summary.get("phases")
    if isinstance(phase_data, dict) and phase_data:
        try:
            echo(format_recorded(phase_data))
        except (
            KeyError,
            TypeError,
            ValueError,
        ):  # a summary written by another version: show it raw
            echo(json.dumps(phase_data, indent=2, default=json_default))


@runs.command("undo")
@click.argument("run_id", type=int)
@click.option("--agent", help="The agent whose run it is (run ids are per agent).")
@click.option("--cascade", is_flag=True, help="Undo later runs that changed the same entries.")
@click.option("--dry-run", is_flag=True, help="Say what would be restored; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def undo(
    ctx: Context, run_id: int, agent: str | None, cascade: bool, dry_run: bool, as_json: bool
) -> None:
    """Take run RUN_ID back: entries, their lineage and MEMORY.md's managed lines return to
    how they were before its decisions. The operator's text and blocks a person edited
    since are left alone; nothing a purge removed comes back."""
    from dreaming.oversight import undo as undo_run
    from dreaming.runs import get_run

    app = ctx.app
    owners = [
        a
        for a in _agents(ctx, (agent,) if agent else ())
        if get_run(app.engine(a, create=False), a, run_id) is not None
    ]
    if not owners:
        where = f"agent {agent!r}" if agent else "any agent"
        raise NoSuchError(f"no run {run_id} for {where} (see `dreaming runs`)")
    if len(owners) > 1:
        raise NoSuchError(
            f"run ids are per agent and {run_id} exists for {', '.join(owners)}: add --agent NAME"
        )
    report = undo_run(app, owners[0], run_id, cascade=cascade, dry_run=dry_run)
    if as_json:
        emit_json(report.to_dict())
        return
    verb = "would undo" if dry_run else "undid"
    runs_ = ", ".join(map(str, report.undone))
    lines = [f"agent {report.agent}: {verb} run(s) {runs_}"]
    lines.append(f"  entries restored: {len(report.restored)}, removed: {len(report.removed)}")
    for verb_, keys in (("restore", report.restored), ("remove", report.removed)):
        for key in keys:
            said = report.texts.get(key, "")
            lines.append(f"    {verb_ if dry_run else verb_ + 'd'} {key}  {said[:160]}".rstrip())
    for key in report.left_alone:
        lines.append(f"  MEMORY.md block {key} was edited by a person since: left as it is")
    if report.undo_run_id is not None:
        lines.append(f"  recorded as run {report.undo_run_id}")
    echo("\n".join(lines))
