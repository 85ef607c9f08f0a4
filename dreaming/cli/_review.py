"""`dreaming review`: proposals deep staged in review mode; accept or reject them."""

from __future__ import annotations

from typing import Any

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json
from dreaming.errors import NoSuchError


def _agent(ctx: Context, agent: str | None) -> str:
    """Proposal ids are per agent: --agent, or the only agent with state."""
    known = ctx.app.agents_with_state([agent] if agent else None)
    if agent:
        return agent
    if len(known) == 1:
        return known[0]
    raise NoSuchError(
        "proposal ids are per agent: add --agent NAME (agents: "
        + (", ".join(known) or "none")
        + ")"
    )


def _format(p: dict[str, Any], full: bool) -> str:
    said = (p["candidate_text"] or p["candidate"]).strip()
    head = f'#{p["id"]} [{p["status"]}] {p["action"]}: "{said[:120]}"'
    lines = [head]
    if p["text"]:
        lines.append(f"    -> {p['text']}")
    lines.append(f"    why ({p['path']}): {p['reason'] or '-'}")
    if full:
        lines.append(f"    proposed {p['created_at']}, expires {p['expires_at'] or '-'}")
        for ev in p["evidence"]:
            lines.append(f"    evidence: {ev}")
        if p["diff"]:
            lines += ["    MEMORY.md:"] + [f"      {d}" for d in p["diff"].splitlines()]
        if p["note"]:
            lines.append(f"    note: {p['note']}")
    return "\n".join(lines)


@cli.group()
def review() -> None:
    """Review mode: proposals deep staged instead of writing ([deep] apply = "review")."""


@review.command("list")
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option("--all", "everything", is_flag=True, help="Decided proposals too.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def list_(ctx: Context, agents: tuple[str, ...], everything: bool, as_json: bool) -> None:
    """Pending proposals (with --all, decided ones too), oldest first."""
    from dreaming import oversight

    found = [p.to_dict() for p in oversight.proposals(ctx.app, agents, everything=everything)]
    if as_json:
        emit_json({"proposals": found})
        return
    if not found:
        echo("no proposals waiting" + ("" if everything else " (--all shows decided ones)"))
        return
    for agent in dict.fromkeys(p["agent"] for p in found):
        echo(f"agent {agent}:")
        echo("\n".join(_format(p, False) for p in found if p["agent"] == agent))


@review.command("show")
@click.argument("proposal_id", type=int)
@click.option("--agent", help="The agent whose proposal it is.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def show(ctx: Context, proposal_id: int, agent: str | None, as_json: bool) -> None:
    """One proposal in full: candidate, evidence, decision, reason, MEMORY.md diff."""
    from dreaming import oversight

    data = oversight.proposal(ctx.app, _agent(ctx, agent), proposal_id).to_dict()
    if as_json:
        emit_json(data)
    else:
        echo(_format(data, True))


@review.command("accept")
@click.argument("proposal_ids", type=int, nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Every pending proposal.")
@click.option("--agent", help="The agent whose proposals they are.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def accept(
    ctx: Context, proposal_ids: tuple[int, ...], everything: bool, agent: str | None, as_json: bool
) -> None:
    """Apply proposals to memory, in one transaction, as deep would have (stale ones are
    refused and proposed again the next night)."""
    from dreaming.oversight import accept as accept_proposals

    if bool(proposal_ids) == everything:
        raise click.UsageError("name proposal ids, or pass --all")
    name = _agent(ctx, agent)
    report = accept_proposals(ctx.app, name, None if everything else list(proposal_ids))
    if as_json:
        emit_json(report.to_dict())
        return
    lines = [f"agent {name}: accepted {len(report.accepted)}"]
    if report.run_id is not None:
        lines[0] += f" (run {report.run_id})"
    for pid, why in report.stale.items():
        lines.append(f"  #{pid} refused as stale: {why}; it is proposed again next night")
    for pid, why in report.waiting.items():
        lines.append(f"  #{pid} not accepted: {why}")
    for pid, status in report.not_pending.items():
        lines.append(f"  #{pid} is {status}, not pending: left as it is")
    echo("\n".join(lines))


@review.command("reject")
@click.argument("proposal_ids", type=int, nargs=-1, required=True)
@click.option("--reason", help="Why (kept with the proposal).")
@click.option("--agent", help="The agent whose proposals they are.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def reject(
    ctx: Context,
    proposal_ids: tuple[int, ...],
    reason: str | None,
    agent: str | None,
    as_json: bool,
) -> None:
    """Reject proposals: their candidates are not proposed again unless new evidence
    arrives."""
    from dreaming import oversight

    report = oversight.reject(ctx.app, _agent(ctx, agent), proposal_ids, reason)
    if as_json:
        emit_json(report.to_dict())
        return
    lines = [f"agent {report.agent}: rejected {len(report.rejected)}"]
    lines += [
        f"  #{pid} is {status}, not pending: left as it is"
        for pid, status in report.not_pending.items()
    ]
    echo("\n".join(lines))
