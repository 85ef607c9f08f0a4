"""`dreaming status`: per agent, what has been read, what was kept out and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json, note, usd

if TYPE_CHECKING:
    from dreaming.app import App


def _format(s: dict[str, Any]) -> str:
    sess = s["sessions"]
    out = [
        f"agent {s['agent']}  (latest message read: {s['clock'] or 'none yet'})",
        f"  sessions: {sess['admitted']} admitted, {sess['excluded']} excluded, "
        f"{sess['internal']} internal, {sess['forgotten']} forgotten",
        f"  corpus lines: {s['corpus_lines']}   pending candidates: {s['candidates']['pending']}"
        f"   entries: {s['entries']}" + (f" (+{s['archived']} archived)" if s["archived"] else ""),
    ]
    memory = s.get("memory")
    if memory is not None and memory.get("max_lines") is not None:
        count = f", {memory['lines']} lines" if memory.get("lines") is not None else ""
        out.append(
            f"  MEMORY.md: {memory['file']}{count} (Claude Code loads its first"
            f" {memory['max_lines']} lines or 25 KB)"
        )
        out += _format_fill(memory["fill"], s["archived"])
    elif memory is not None:
        out.append(
            f"  MEMORY.md: {memory['file']} (OpenClaw loads up to"
            f" {memory['bootstrap_max_chars']} characters: bootstrapMaxChars)"
        )
        out += _format_fill(memory["fill"], s["archived"])
        if memory["not_written"]:
            out.append(f"    {memory['not_written']}")
        elif memory["other_writer"]:
            out.append(
                f"    written by dreaming and by {memory['other_writer']} dreaming too"
                ' ([openclaw] coexist = "write")'
            )
    if memory is not None and memory.get("no_longer_read"):
        out.append(f"    {memory['no_longer_read']}")
    spend = s["spend_today"]
    out.append(
        f"  llm spend {spend['day']} (UTC): {usd(spend['usd'])}"
        f" ({spend['calls']} calls, {spend['tokens']} tokens)"
    )
    out.extend(f"    {_format_cap(cap)}" for cap in spend["caps"])
    for phase, run in sorted(s["last_runs"].items()):
        why = f": {run['reason'][:300]}" if run.get("reason") else ""
        out.append(f"  last {phase}: {run['started_at']} {run['outcome']}{why}")
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


# A budget that is what the agent loads, named in the line before the fill.
_LOADERS_OWN = ("bootstrapMaxChars", "Claude Code loads 25 KB")


def _format_fill(fill: dict[str, Any], archived: int) -> list[str]:
    """ "MEMORY.md 9,812 / 12,000 chars, 14 archived", and why when it cannot fit."""
    if "error" in fill:
        return [f"    fill unknown: {fill['error']}"]
    parts = [f"{fill['chars']:,}" + (f" / {fill['max_chars']:,}" if fill["max_chars"] else "")]
    parts[0] += " bytes" if fill.get("unit") == "bytes" else " chars"
    if fill["max_lines"] is not None:
        parts.append(f"{fill['lines']:,} / {fill['max_lines']:,} lines")
    parts.append(f"{archived:,} archived")
    line = "  MEMORY.md " + ", ".join(parts)
    if fill["max_chars_from"] and fill["max_chars_from"] not in _LOADERS_OWN:
        line += f" (budget: {fill['max_chars_from']})"
    out = [line]
    if fill["archive"] and archived:
        out.append(f"    archive (searched, not loaded): {fill['archive']}")
    if fill["over"]:
        out.append(f"    {fill['over']}")
    return out


def _openclaw_config(app: App) -> str | None:
    """The openclaw.json that was read (None: there is none; OpenClaw's defaults hold)."""
    oc = app.paths.openclaw
    return str(oc.path) if oc.found else None


def _format_cap(cap: dict[str, Any]) -> str:
    who = "run/promote (settings)" if cap["job"] is None else f"job {cap['job']}"
    limits = [usd(cap["daily_max_usd"])] if cap["daily_max_usd"] is not None else []
    left = [usd(cap["remaining_usd"])] if cap["remaining_usd"] is not None else []
    if cap["daily_max_tokens"] is not None:
        limits.append(f"{cap['daily_max_tokens']} tokens")
        left.append(f"{cap['remaining_tokens']} tokens")
    if not limits:
        return f"daily cap for {who}: none"
    state = "reached" if cap["reached"] else " and ".join(left) + " left"
    return f"daily cap for {who}: {' and '.join(limits)}, {state}"


def _shared_limits(app: App) -> dict[str, Any]:
    """What every agent shares: the fleet's daily budget and, in fleet mode, the queue."""
    out: dict[str, Any] = {}
    ledger = app.ledger()
    if ledger is not None:
        out["fleet_budget"] = ledger.spent()
    if app.fleet and app.settings.database_url is not None:
        try:
            from dreaming.fleet import libpq_dsn, queue_counts
        except ImportError:  # pragma: no cover - the fleet extra is missing
            return out
        out["queue"] = queue_counts(libpq_dsn(app.settings.database_url), app.settings.fleet.queue)
    return out


def _format_shared(shared: dict[str, Any]) -> list[str]:
    lines = []
    if (b := shared.get("fleet_budget")) is not None:
        caps = [
            (b["max_usd"], f"{usd(b['usd_spent'])} of {usd(b['max_usd'])}"),
            (b["max_calls"], f"{b['calls']} of {b['max_calls']} calls"),
            (b["max_tokens"], f"{b['tokens_spent']} of {b['max_tokens']} tokens"),
        ]
        spent = ", ".join(text for cap, text in caps if cap is not None)
        held = f"{usd(b['usd_reserved'])}, {b['calls_reserved']} calls"
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
    against each daily cap that applies (the settings' for run/promote, each job's own),
    last runs."""
    from dreaming.status import agent_status, every_job, memory_target  # the whole store

    app = ctx.app
    names = app.agents_with_state(list(agents) or None)
    if not names and not agents:
        app.agents()  # nothing at all under the state folder: the error says where it looked
    jobs, jobs_error = every_job(app.paths, list(app.settings.llm.profiles))
    budget = app.settings.budget
    report = [
        agent_status(app.engine(a, create=False), a, budget=budget, jobs=jobs)
        | {"memory": memory_target(app.paths, a)}
        for a in names
    ]
    shared = _shared_limits(app)
    if jobs_error is not None:
        note(f"dreaming: jobs' caps not shown: {jobs_error}")
    if as_json:
        emit_json(
            {
                "state_dir": str(app.paths.state_dir),
                "openclaw_config": _openclaw_config(app),
                "agents": report,
                "jobs_error": jobs_error,
            }
            | shared
        )
        return
    for line in _format_shared(shared):
        echo(line)
    config = _openclaw_config(app)
    if config is not None:
        echo(f"openclaw config: {config}")
    if not report:
        echo(f"no agent state under {app.paths.home} yet: run `dreaming run` first")
    for s in report:
        echo(_format(s))
