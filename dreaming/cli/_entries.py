"""`dreaming entries`: long-term memory entries and where each came from."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

import click
from sqlalchemy import Connection, and_, or_, select

from dreaming import lineage
from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import emit_json
from dreaming.corpus import reference
from dreaming.errors import StateError
from dreaming.memory_file import KEY_PREFIX
from dreaming.messages import Format
from dreaming.store.models import (
    CorpusLineRow,
    DecisionRow,
    EntryEvidenceRow,
    EntryRow,
    SessionRow,
    SupersessionRow,
)

SUPERSESSIONS = SupersessionRow.__table__  # type: ignore[attr-defined]
DECISIONS = DecisionRow.__table__  # type: ignore[attr-defined]
ENTRIES = EntryRow.__table__  # type: ignore[attr-defined]
EVIDENCE = EntryEvidenceRow.__table__  # type: ignore[attr-defined]
LINES = CorpusLineRow.__table__  # type: ignore[attr-defined]
SESSIONS = SessionRow.__table__  # type: ignore[attr-defined]

SHOWN_CHARS = 200  # an evidence line's text in the text output; JSON has it whole
GONE = "(text no longer in the corpus)"
MAX_LISTED_MATCHES = 10


def shorten(text: str, limit: int = SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def line_ref(agent: str, session_id: str, line: int, path: str | None, fmt: str | None) -> str:
    """Where an evidence line is. An OpenClaw session keeps the corpus's own reference
    (`<agent>/sessions/<agent>/<session>#L<n>`); a transcript from elsewhere (Claude Code's
    projects, an event log) is named by its file on disk, which that reference would not find."""
    if path is None or fmt == Format.OPENCLAW.value:
        return reference(agent, session_id, line)
    return f"{path}#L{line}"


def evidence(
    conn: Connection, agent: str, key: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Entry key -> its evidence lines with their corpus text (None once purged from the
    corpus) and their transcript file (None if the session is no longer recorded), in
    (session, line) order: one query for one entry, or for all of an agent's."""
    where = EVIDENCE.c.agent == agent
    if key is not None:
        where = and_(where, EVIDENCE.c.entry_key == key)
    rows = conn.execute(
        select(
            EVIDENCE.c.entry_key,
            EVIDENCE.c.session_id,
            EVIDENCE.c.line,
            LINES.c.role,
            LINES.c.origin_class,
            LINES.c.ts,
            LINES.c.text,
            SESSIONS.c.path,
            SESSIONS.c.format,
        )
        .select_from(
            EVIDENCE.outerjoin(
                LINES,
                and_(
                    LINES.c.agent == EVIDENCE.c.agent,
                    LINES.c.session_id == EVIDENCE.c.session_id,
                    LINES.c.line == EVIDENCE.c.line,
                ),
            ).outerjoin(
                SESSIONS,
                and_(
                    SESSIONS.c.agent == EVIDENCE.c.agent,
                    SESSIONS.c.session_id == EVIDENCE.c.session_id,
                ),
            )
        )
        .where(where)
        .order_by(EVIDENCE.c.entry_key, EVIDENCE.c.session_id, EVIDENCE.c.line)
    ).all()
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry, session_id, line, role, origin_class, ts, text, path, fmt in rows:
        out[entry].append(
            {
                "ref": line_ref(agent, session_id, int(line), path, fmt),
                "path": path,
                "session_id": session_id,
                "line": int(line),
                "role": role,
                "origin_class": origin_class,
                "ts": _iso(ts),
                "text": text,
            }
        )
    return dict(out)


def evidence_line(ev: dict[str, Any]) -> str:
    """`[ref] 2026-03-08 user: text…`, or `[ref] (text no longer in the corpus)`."""
    if ev["text"] is None:
        return f"[{ev['ref']}] {GONE}"
    date = ev["ts"][:10] + " " if ev["ts"] else ""
    return f"[{ev['ref']}] {date}{ev['role']}: {shorten(ev['text'])}"


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
        data["evidence"] = evidence(conn, agent, key).get(key, [])
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
                    DECISIONS.c.reason,
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
@click.option(
    "--evidence",
    "with_evidence",
    is_flag=True,
    help="Also give each entry's evidence lines with their corpus text.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@click.pass_context
def entries(
    click_ctx: click.Context, agents: tuple[str, ...], with_evidence: bool, as_json: bool
) -> None:
    """List live entries with their origins (`entries show KEY` for one in full)."""
    if click_ctx.invoked_subcommand is not None:
        return
    ctx = click_ctx.find_object(Context)
    assert ctx is not None
    out: list[dict[str, Any]] = []
    for agent in _agents(ctx, agents):
        with ctx.app.engine(agent, create=False).connect() as conn:
            lines = evidence(conn, agent) if with_evidence else {}
            for key, text in lineage.live_entries(conn, agent):
                data = _entry(conn, agent, key, text, detail=False)
                if with_evidence:
                    data["evidence"] = lines.get(key, [])
                out.append(data)
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
        if with_evidence:
            for ev in e["evidence"]:
                click.echo(f"      {evidence_line(ev)}")


def _matches(conn: Connection, agent: str, wanted: str) -> list[tuple[str, str]]:
    """(key, text) of the agent's live entries whose key is `wanted` or starts with it;
    a prefix may leave out the `m:`."""
    prefixes = {wanted}
    if not wanted.startswith(KEY_PREFIX):
        prefixes.add(KEY_PREFIX + wanted)
    # autoescape: the prefix is matched literally, whatever characters the user typed.
    starts = [
        or_(ENTRIES.c.key == p, ENTRIES.c.key.startswith(p, autoescape=True)) for p in prefixes
    ]
    return [
        (k, t)
        for k, t in conn.execute(
            select(ENTRIES.c.key, ENTRIES.c.text)
            .where(and_(ENTRIES.c.agent == agent, ENTRIES.c.status == "live", or_(*starts)))
            .order_by(ENTRIES.c.key)
        )
    ]


@entries.command("show")
@click.argument("key")
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def show(ctx: Context, key: str, agents: tuple[str, ...], as_json: bool) -> None:
    """Show one entry with its full lineage: origins, evidence lines and their text,
    supersessions, decisions. KEY may be a unique prefix (`m:76f5` or `76f5`)."""
    wanted = key.strip().lower()
    if not wanted:
        raise StateError("give an entry key or a prefix of one (list them with `dreaming entries`)")
    found: list[tuple[str, str, str]] = []  # (agent, key, text)
    for agent in _agents(ctx, agents):
        with ctx.app.engine(agent, create=False).connect() as conn:
            found.extend((agent, k, t) for k, t in _matches(conn, agent, wanted))
    exact = [m for m in found if m[1] == wanted]
    if exact:
        found = exact[:1]  # a whole key wins over longer keys it prefixes (first agent's)
    if not found:
        raise StateError(f"no live entry {key!r} (list them with `dreaming entries`)")
    if len(found) > 1:
        one_agent = len({a for a, _, _ in found}) == 1
        listed = ", ".join(
            k if one_agent else f"{k} ({a})" for a, k, _ in found[:MAX_LISTED_MATCHES]
        )
        extra = len(found) - MAX_LISTED_MATCHES
        more = f" and {extra} more" if extra > 0 else ""
        raise StateError(
            f"key prefix {key!r} matches {len(found)} entries ({listed}{more}): "
            "give more of the key, or --agent NAME"
        )
    agent, full_key, text = found[0]
    with ctx.app.engine(agent, create=False).connect() as conn:
        data = _entry(conn, agent, full_key, text, detail=True)
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
    for ev in data["evidence"]:
        click.echo(f"    {evidence_line(ev)}")
    if data["supersedes"]:
        click.echo("  supersedes: " + ", ".join(data["supersedes"]))
    for d in data["decisions"]:
        reason = f": {d['reason']}" if d["reason"] else ""
        click.echo(
            f"  run {d['run_id']}: {d['action']} by {d['path']} from {d['candidate_key']}{reason}"
        )
