"""`dreaming logs`: the LLM calls REM and deep made, prompt and reply, newest first."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json

if TYPE_CHECKING:
    from dreaming.app import App
    from dreaming.llm.call_log import LoggedCall


def _calls(
    app: App, agents: tuple[str, ...], limit: int | None, run_id: int | None
) -> list[LoggedCall]:
    from dreaming.llm.call_log import list_calls, newest_first  # SQLAlchemy: only when read

    names = app.agents_with_state(list(agents) or None)  # an unknown name is an error
    if not names:
        return []
    if app.fleet:
        # One query over the shared database: a fleet may have thousands of agents.
        return list_calls(
            app.shared_engine(), names if agents else None, limit=limit, run_id=run_id
        )
    found: list[LoggedCall] = []
    for agent in names:
        found.extend(
            list_calls(app.engine(agent, create=False), [agent], limit=limit, run_id=run_id)
        )
    return newest_first(found)[:limit]


def _text(content: Any) -> str:
    """A message's content: a string, or OpenAI's list of parts (text parts shown as text)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p["text"] if isinstance(p, dict) and isinstance(p.get("text"), str) else json.dumps(p)
            for p in content
        ]
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


_HEADINGS = {"system": "System", "developer": "System", "user": "Prompt"}


def _request_sections(call: LoggedCall) -> list[tuple[str, str]]:
    messages = call.messages()
    if messages is None:
        return [("Request", call.request)]
    sections = []
    for message in messages:
        role = str(message.get("role"))
        sections.append((_HEADINGS.get(role, role.capitalize()), _text(message.get("content"))))
    return sections


def _response(text: str | None) -> str:
    if text is None:
        return "(none)"
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if isinstance(parsed, dict | list):  # a structured reply reads better indented
        return json.dumps(parsed, indent=2, ensure_ascii=False)
    return text


def _cost(usd: float | None) -> str:
    return "unpriced" if usd is None else f"${usd:.6f}"


def format_call(call: LoggedCall) -> str:
    """One call as a markdown-ish block, the way `llm logs` shows a prompt and response."""
    run = "-" if call.run_id is None else str(call.run_id)
    http = "-" if call.http_status is None else str(call.http_status)
    lines = [
        f"# {call.created_at.isoformat(timespec='seconds')}    agent: {call.agent}"
        f"    run: {run}    call: {call.id}",
        "",
        f"Model: **{call.model}**",
        f"Outcome: {call.outcome}, attempt {call.attempt}, HTTP {http}, {call.duration_s:.2f}s",
        f"Tokens: {call.input_tokens} input, {call.output_tokens} output;"
        f" cost {_cost(call.cost_usd)}",
    ]
    sections = [*_request_sections(call), ("Response", _response(call.response))]
    if call.error:
        sections.append(("Error", call.error))
    for heading, body in sections:
        lines += ["", f"## {heading}", "", body.rstrip("\n")]
    return "\n".join(lines)


def _nothing(app: App, agents: tuple[str, ...], run_id: int | None) -> str:
    where = f" for {', '.join(agents)}" if agents else ""
    if run_id is not None:
        where += f" in run {run_id}"
    return f"no LLM calls recorded{where} under {app.paths.home}"


@cli.command("logs")
@click.option(
    "-n",
    "--count",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Newest N calls; 0 for all.",
)
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option(
    "--run",
    "run_id",
    type=int,
    help="Only the calls of this run (run ids are per agent: every agent's run R is shown).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def logs(
    ctx: Context, count: int, agents: tuple[str, ...], run_id: int | None, as_json: bool
) -> None:
    """Show the LLM calls (every attempt), newest first: model, prompt, reply, tokens, cost."""
    app = ctx.app
    calls = _calls(app, agents, count or None, run_id)
    if as_json:
        emit_json({"state_dir": str(app.paths.state_dir), "calls": [c.to_dict() for c in calls]})
        return
    if not calls:
        echo(_nothing(app, agents, run_id))
        return
    echo("\n\n".join(format_call(c) for c in calls))
