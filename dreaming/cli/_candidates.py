"""`dreaming candidates`: what light collected, and which gate keeps each from memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from dreaming.cli._entries import shorten
from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json
from dreaming.errors import StateError

if TYPE_CHECKING:
    from collections.abc import Sequence


def _speakers() -> Sequence[tuple[str, str]]:
    """Who said a candidate's lines, and the column that counts them. Admission (with the
    settings and pydantic behind it) is imported when a listing is printed, not at start-up."""
    from dreaming.ingest.admission import OriginClass

    return (
        (OriginClass.OWNER.value, "owner_lines"),
        (OriginClass.AGENT.value, "agent_lines"),
        (OriginClass.UNTRUSTED.value, "untrusted_lines"),
    )


def _agents(ctx: Context, agents: tuple[str, ...]) -> list[str]:
    """The agents to list; a named agent that has never been run is an error."""
    found = ctx.app.agents_with_state(list(agents) or None)
    missing = [a for a in agents if a not in found]
    if missing:
        names = ", ".join(missing)
        raise StateError(
            f"no state for agent(s) {names} yet: run `dreaming run --agent {missing[0]}` first"
        )
    return found


def _said_by(c: dict[str, Any]) -> str:
    said = [f"{name} {c[column]}" for name, column in _speakers() if c[column]]
    if c["system_lines"]:
        said.append(f"system {c['system_lines']}")
    return ", ".join(said) or "nobody"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def format_candidate(c: dict[str, Any]) -> str:
    salience = "-" if c["salience"] is None else f"{c['salience']:.2f}"
    features = " ".join(c["features"]) or "-"
    status = c["status"] + (", stale" if c["stale"] else "")
    if c["durable_cue"]:
        status += ", durable cue"
    last = c["last_seen"][:10] if c["last_seen"] else "-"
    return (
        f"{c['score']:.3f}  {c['gate']:<13}  features: {features}\n"
        f"    #{c['id']} {c['key']}  salience {salience}  said by {_said_by(c)}  "
        f"{_plural(c['sessions'], 'session')}, {_plural(c['days'], 'day')}  "
        f"last seen {last}  {status}\n"
        f"    {shorten(c['text'])}"
    )


def format_footer(agent: str, counts: dict[str, int]) -> str:
    parts = [f"{gate} {n}" for gate, n in counts.items() if n]
    return f"{agent}: " + (", ".join(parts) if parts else "no candidates")


@cli.command()
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option("--all", "include_decided", is_flag=True, help="Also decided candidates.")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="At most N candidates per agent (0: all of them). Gate counts cover all.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def candidates(
    ctx: Context, agents: tuple[str, ...], include_decided: bool, limit: int, as_json: bool
) -> None:
    """List an agent's candidates by score, each with the gate that keeps it from memory.

    Pending candidates only unless --all. The gate is the first of deep's rules the
    candidate fails ("passes": deep considers it tonight, highest score first)."""
    from dreaming.memory.gates import gate_counts, list_candidates

    app = ctx.app
    deep = app.settings.deep
    shown: list[dict[str, Any]] = []
    gates: dict[str, dict[str, int]] = {}
    blocks: list[str] = []
    which = "candidates" if include_decided else "pending candidates"
    for agent in _agents(ctx, agents):
        with app.engine(agent, create=False).connect() as conn:
            listed = list_candidates(conn, agent, deep, include_decided=include_decided)
        gates[agent] = gate_counts(listed)
        head = listed[:limit] if limit else listed
        shown.extend(head)
        if as_json:
            continue
        lines = [
            f"agent {agent}: {len(listed)} {which}"
            f" (deep.min_score {deep.min_score}, deep.min_sessions {deep.min_sessions})"
        ]
        lines.extend(format_candidate(c) for c in head)
        footer = format_footer(agent, gates[agent])
        if len(head) < len(listed):
            footer += f" (showing {len(head)} of {len(listed)}: --limit 0 for all)"
        lines.append(footer)
        blocks.append("\n".join(lines))
    if as_json:
        emit_json({"candidates": shown, "gates": gates})
        return
    if not blocks:
        echo("no agent has state yet: run `dreaming run` first")
        return
    echo("\n\n".join(blocks))
