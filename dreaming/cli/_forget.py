"""`dreaming forget`: auditable purge by session, source or participant."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json

if TYPE_CHECKING:
    from dreaming.forget import PurgeReport


def format_report(r: PurgeReport) -> str:
    head = "forget (dry run: nothing written)" if r.dry_run else f"forget #{r.purge_id}"
    out = [f"{head} for agent {r.agent}"]
    for s in r.sessions:
        out.append(f"  session {s.session_id}  key={s.session_key or '-'}  {s.status}")
    if not r.sessions:
        out.append("  no session matches")
    for step in r.steps:
        out.append(
            f"  {step.number}. {step.name}: " + ", ".join(f"{k} {n}" for k, n in step.counts)
        )
    out.extend(_details(r))
    out.append(
        f"  {len(r.steps) + 1}. files the agent wrote in these sessions (reported, not edited): "
        f"{len(r.curated_writes)}"
    )
    for w in r.curated_writes:
        out.append(f"     {w['path']}  at {w['at']}  [{w['ref']}]")
    if r.nothing_left and not r.dry_run:
        out.append("  nothing left to remove")
    for other in r.other_agents or ():
        out.append(f"the same sessions under agent {other.agent} (it reads the same transcripts):")
        out.append(format_report(other))
    return "\n".join(out)


def _details(r: PurgeReport) -> list[str]:
    """The lines under the steps: what each removal was, by name."""
    out = [f"     entry {key}: every origin was purged" for key in r.entries_emptied]
    for m in r.mixed_lineage:
        out.append(
            f"     entry {m['key']}: mixed lineage (also from {', '.join(m['other_sessions'])});"
            " removed whole, a later night may rebuild it from those sessions"
        )
    for path, n in r.file_lines_removed.items():
        out.append(f"     {path}: {n} line(s) quoting purged text")
    for day in r.diary_entries_removed:
        out.append(f"     DREAMS.md entry {day}: its night read a purged session; removed")
    if r.run_summaries_redacted:
        runs_ = ", ".join(map(str, r.run_summaries_redacted))
        out.append(f"     run summaries redacted (themes, diary text, purged quotes): {runs_}")
    verb = "would remove" if r.dry_run else "removed"
    for f in r.report_files:
        what = {
            "remove": f"mentions what is purged: {verb}",
            "keep": "mentions nothing purged: kept",
            "missing": "no longer there",
        }[f["action"]]
        out.append(f"     report file {f['path']}: {what}")
    return out


@cli.command()
@click.option("--agent", required=True, help="The agent whose memory to purge.")
@click.option("--session", "sessions", multiple=True, help="Session id or key (repeatable).")
@click.option("--hook-source", help="Every session from this external source, e.g. gmail.")
@click.option("--since", help="With --hook-source: sessions created on or after this date.")
@click.option("--participant", help="Every session this participant took part in.")
@click.option("--dry-run", is_flag=True, help="Print the complete report, write nothing.")
@click.option(
    "--pre-tombstone",
    is_flag=True,
    help="With --session: tombstone ids no session has yet, so they are never read.",
)
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    default=0,
    metavar="SECONDS",
    help="When a run holds the agent, wait up to this long for it (runs that would start"
    " meanwhile step aside); without it a busy agent is an error at once.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def forget(
    ctx: Context,
    agent: str,
    sessions: tuple[str, ...],
    hook_source: str | None,
    since: str | None,
    participant: str | None,
    dry_run: bool,
    pre_tombstone: bool,
    wait_s: float,
    as_json: bool,
) -> None:
    """Purge every memory derived from sessions, a source class or a participant.

    A selector that matches no session is an error that forgets nothing (exit 2). A run
    holding the agent makes it busy (exit 75) unless --wait gives it time."""
    from dreaming import runner  # loads the library: only when the command runs
    from dreaming.forget import Selector, parse_since

    try:
        selector = Selector(
            sessions=sessions,
            hook_source=hook_source,
            since=parse_since(since) if since else None,
            participant=participant,
        )
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    report = runner.forget(
        ctx.app, agent, selector, dry_run=dry_run, pre_tombstone=pre_tombstone, wait_s=wait_s
    )
    if as_json:
        emit_json(report.to_dict())
    else:
        echo(format_report(report))
