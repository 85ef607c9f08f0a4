"""`dreaming status`: per agent, what has been read, what was kept out and why."""

from __future__ import annotations

from typing import Any

import click

from dreaming.app import App
from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import emit_json
from dreaming.status import agent_status


def _format(s: dict[str, Any]) -> str:
    sess = s["sessions"]
    out = [
        f"agent {s['agent']}  (clock {s['clock'] or 'unset'})",
        f"  sessions: {sess['admitted']} admitted, {sess['excluded']} excluded, "
        f"{sess['internal']} internal, {sess['forgotten']} forgotten",
        f"  corpus lines: {s['corpus_lines']}   pending candidates: {s['pending_candidates']}"
        f"   entries: {s['entries']}",
    ]
    spend = s["spend_today"]
    cap = "no daily cap" if spend["cap_usd"] is None else f"of ${spend['cap_usd']:.2f} daily cap"
    out.append(
        f"  llm spend {spend['day']} (UTC): ${spend['usd']:.4f} {cap}"
        f" ({spend['calls']} calls, {spend['tokens']} tokens)"
    )
    for phase, run in sorted(s["last_runs"].items()):
        out.append(f"  last {phase}: {run['started_at']} {run['outcome']}")
    if s["unclassified"]:
        ids = s["unclassified"]
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        out.append(
            f"  unclassified: {len(ids)} session(s) kept as untrusted evidence, never promoted"
            f" on their own: {shown}"
        )
        out.append(
            "    nothing says whose chat they are (no index entry, no earlier record, no"
            " metadata in the transcript)."
        )
        out.append(
            "    if they are your own chats, list them in dreaming.toml: [admission]"
            ' owner_sessions = ["<id>", ...] (patterns allowed), or set unclassified = "owner"'
        )
    if s["not_admitted"]:
        out.append("  not admitted:")
        for row in s["not_admitted"]:
            label = row["session_key"] or row["session_id"]
            out.append(f"    {label}: {row['reason']}")
    return "\n".join(out)


def _shared_limits(app: App) -> dict[str, Any]:
    """What every agent shares: the fleet's daily budget and, in fleet mode, the queue."""
    out: dict[str, Any] = {}
    ledger = app.ledger()
    if ledger is not None:
        out["fleet_budget"] = ledger.spent()
    if app.fleet and app.settings.database_url is not None:
        try:
            from dreaming.fleet._queue import libpq_dsn, queue_counts
        except ImportError:  # pragma: no cover - the fleet extra is missing
            return out
        out["queue"] = queue_counts(libpq_dsn(app.settings.database_url), app.settings.fleet.queue)
    return out


def _format_shared(shared: dict[str, Any]) -> list[str]:
    lines = []
    if (b := shared.get("fleet_budget")) is not None:
        caps = [
            (b["max_usd"], f"${b['usd_spent']:.4f} of ${b['max_usd'] or 0:.2f}"),
            (b["max_calls"], f"{b['calls']} of {b['max_calls']} calls"),
            (b["max_tokens"], f"{b['tokens_spent']} of {b['max_tokens']} tokens"),
        ]
        spent = ", ".join(text for cap, text in caps if cap is not None)
        held = f"${b['usd_reserved']:.4f}, {b['calls_reserved']} calls"
        lines.append(f"fleet budget {b['day']} (UTC): {spent}; reserved in flight: {held}")
    if "queue" in shared:
        counts = shared["queue"]
        text = (
            "not created yet"
            if counts is None
            else " ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "empty"
        )
        lines.append(f"fleet queue: {text}")
    return lines


@cli.command()
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def status(ctx: Context, agents: tuple[str, ...], as_json: bool) -> None:
    """Show each agent's state: sessions, corpus, candidates, entries, today's LLM spend
    against the daily cap, last runs."""
    app = ctx.app
    names = app.agents_with_state(list(agents) or None)
    cap = app.settings.budget.daily_max_usd
    report = [agent_status(app.engine(a, create=False), a, daily_cap_usd=cap) for a in names]
    shared = _shared_limits(app)
    if as_json:
        emit_json({"state_dir": str(app.paths.state_dir), "agents": report} | shared)
        return
    for line in _format_shared(shared):
        click.echo(line)
    if not report:
        click.echo(f"no agent state under {app.paths.home} yet: run `dreaming run` first")
    for s in report:
        click.echo(_format(s))
