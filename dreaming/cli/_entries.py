"""`dreaming entries`: long-term memory entries and where each came from."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json
from dreaming.errors import NoSuchError, StateError

# Lineage and the store's statuses are SQLAlchemy: imported by the commands that read them,
# so registering these commands (every `dreaming` start) costs nothing.
if TYPE_CHECKING:
    from sqlalchemy import Connection

SHOWN_CHARS = 200  # an evidence line's text in the text output; JSON has it whole
GONE = "(text no longer in the corpus)"
MAX_LISTED_MATCHES = 10


def shorten(text: str, limit: int = SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def evidence(
    conn: Connection, agent: str, key: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Entry key -> its evidence lines as JSON data (text None once purged from the corpus)."""
    from dreaming.memory import lineage

    return {
        entry: [
            {
                "ref": ev.ref(agent),
                "path": ev.path,
                "session_id": ev.session_id,
                "line": ev.line,
                "role": ev.role,
                "origin_class": ev.origin_class,
                "ts": _iso(ev.ts),
                "text": ev.text,
            }
            for ev in lines
        ]
        for entry, lines in lineage.evidence_lines(conn, agent, key).items()
    }


def evidence_line(ev: dict[str, Any]) -> str:
    """`[ref] 2026-03-08 user: text…`, or `[ref] (text no longer in the corpus)`."""
    if ev["text"] is None:
        return f"[{ev['ref']}] {GONE}"
    date = ev["ts"][:10] + " " if ev["ts"] else ""
    return f"[{ev['ref']}] {date}{ev['role']}: {shorten(ev['text'])}"


def _entry(conn: Any, agent: str, key: str, text: str, *, detail: bool) -> dict[str, Any]:
    from dreaming.memory import lineage

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
        data["evidence"] = evidence(conn, agent, key).get(key, [])
        data["supersedes"] = lineage.supersedes(conn, agent, key).get(key, [])
        data["decisions"] = [
            {
                "run_id": d.run_id,
                "action": d.action,
                "candidate_key": d.candidate_key,
                "targets": json.dumps(list(d.targets)),
                "path": d.path,
                "created_at": d.created_at,
                "reason": d.reason,
            }
            for d in lineage.decisions(conn, agent, touching=key)
        ]
    return data


def _agents(ctx: Context, agents: tuple[str, ...]) -> list[str]:
    app = ctx.app
    return app.agents_with_state(list(agents) or None)


@cli.group(invoke_without_command=True)
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option(
    "--evidence",
    "with_evidence",
    is_flag=True,
    help="Also give each entry's evidence lines with their corpus text.",
)
@click.option(
    "--archived",
    is_flag=True,
    help="List the archived entries instead: kept, with their lineage, in the archive the"
    " agent searches but does not load (they did not fit MEMORY.md's budget).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@click.pass_context
def entries(
    click_ctx: click.Context,
    agents: tuple[str, ...],
    with_evidence: bool,
    archived: bool,
    as_json: bool,
) -> None:
    """List live entries (those in MEMORY.md) with their origins; `--archived` for those in
    the archive (`entries show KEY` for one in full)."""
    if click_ctx.invoked_subcommand is not None:
        return
    from dreaming.memory import lineage
    from dreaming.store.statuses import EntryStatus

    ctx = click_ctx.find_object(Context)
    assert ctx is not None
    status = EntryStatus.ARCHIVED if archived else EntryStatus.LIVE
    listed = lineage.archived_entries if archived else lineage.live_entries
    out: list[dict[str, Any]] = []
    for agent in _agents(ctx, agents):
        with ctx.app.engine(agent, create=False).connect() as conn:
            lines = evidence(conn, agent) if with_evidence else {}
            for key, text in listed(conn, agent):
                data = _entry(conn, agent, key, text, detail=False) | {"status": status.value}
                if with_evidence:
                    data["evidence"] = lines.get(key, [])
                out.append(data)
    if as_json:
        emit_json({"entries": out})
        return
    if not out:
        echo(
            "no archived entries: everything fits in MEMORY.md"
            if archived
            else "no entries yet: run `dreaming run` (light, then deep) first"
        )
    for e in out:
        sessions = ", ".join(
            f"{o['session_key'] or o['session_id']} ({o['origin_class']})" for o in e["origins"]
        )
        echo(f"{e['agent']} {e['key']}  {e['text']}\n    from: {sessions}")
        if with_evidence:
            for ev in e["evidence"]:
                echo(f"      {evidence_line(ev)}")


def _replaced(ctx: Context, key: str, wanted: str, agents: tuple[str, ...], as_json: bool) -> None:
    """A key that left memory because a later statement superseded it: say by what (and
    return normally only when it is no such key)."""
    from dreaming.memory import lineage

    for agent in _agents(ctx, agents):
        with ctx.app.engine(agent, create=False).connect() as conn:
            by = lineage.superseded_by(conn, agent, wanted)
        if by is None:
            continue
        old, new = by
        if as_json:
            emit_json({"agent": agent, "key": old, "live": False, "superseded_by": new})
        else:
            echo(f"{old} (agent {agent}) is no longer in memory: superseded by {new}")
            echo(f"  see `dreaming entries show {new}`")
        raise SystemExit(0)


@entries.command("show")
@click.argument("key")
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def show(ctx: Context, key: str, agents: tuple[str, ...], as_json: bool) -> None:
    """Show one entry with its full lineage: origins, evidence lines and their text,
    supersessions, decisions. KEY may be a unique prefix (`m:76f5` or `76f5`)."""
    from dreaming.memory import lineage
    from dreaming.store.statuses import HELD, EntryStatus

    wanted = key.strip().lower()
    if not wanted:
        raise StateError("give an entry key or a prefix of one (list them with `dreaming entries`)")
    found: list[tuple[str, str, str]] = []  # (agent, key, text)
    for agent in _agents(ctx, agents):
        with ctx.app.engine(agent, create=False).connect() as conn:
            found.extend(
                (agent, k, t) for k, t in lineage.live_entries_by_prefix(conn, agent, wanted, HELD)
            )
    exact = [m for m in found if m[1] == wanted]
    if exact:
        found = exact[:1]  # a whole key wins over longer keys it prefixes (first agent's)
    if not found:
        _replaced(ctx, key, wanted, agents, as_json)
        raise NoSuchError(
            f"no live entry {key!r} nor an archived one (list them with `dreaming entries`,"
            " `dreaming entries --archived`)"
        )
    if len(found) > 1:
        one_agent = len({a for a, _, _ in found}) == 1
        listed = ", ".join(
            k if one_agent else f"{k} ({a})" for a, k, _ in found[:MAX_LISTED_MATCHES]
        )
        extra = len(found) - MAX_LISTED_MATCHES
        more = f" and {extra} more" if extra > 0 else ""
        raise NoSuchError(
            f"key prefix {key!r} matches {len(found)} entries ({listed}{more}): "
            "give more of the key, or --agent NAME"
        )
    agent, full_key, text = found[0]
    with ctx.app.engine(agent, create=False).connect() as conn:
        data = _entry(conn, agent, full_key, text, detail=True)
        data["status"] = lineage.entry_statuses(conn, agent).get(full_key, EntryStatus.LIVE)
    if data["status"] == EntryStatus.ARCHIVED:
        data["archive"] = str(ctx.app.paths.archive_file(agent))
    if as_json:
        emit_json(data)
        return
    where = f", archived in {data['archive']}" if "archive" in data else ""
    echo(f"{data['key']} (agent {agent}{where})\n  {data['text']}\n  origins:")
    for o in data["origins"]:
        echo(
            f"    {o['session_id']}  key={o['session_key'] or '-'}  class={o['origin_class']}"
            f"  observed={o['observed_at']}"
        )
    echo("  evidence:")
    for ev in data["evidence"]:
        echo(f"    {evidence_line(ev)}")
    if data["supersedes"]:
        echo("  supersedes: " + ", ".join(data["supersedes"]))
    for d in data["decisions"]:
        reason = f": {d['reason']}" if d["reason"] else ""
        echo(f"  run {d['run_id']}: {d['action']} by {d['path']} from {d['candidate_key']}{reason}")
