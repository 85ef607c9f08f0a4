"""`dreaming run`: run phases now."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json, note
from dreaming.cli._progress import progress
from dreaming.errors import DreamingError, ExitCode
from dreaming.phases import Phase

# The runner, the phases' summaries and the LLM settings pull in SQLAlchemy, pydantic and
# most of the library: imported where a command runs, so `dreaming --help` stays fast.
if TYPE_CHECKING:
    from dreaming.llm import BudgetSettings
    from dreaming.phases._rem_summary import RemSummary
    from dreaming.phases.deep import DeepSummary
    from dreaming.phases.light import LightSummary
    from dreaming.runner import AgentResult, Summary


def format_light(s: LightSummary) -> str:
    lines = [
        f"agent {s.agent}: light phase",
        f"  sessions: {s.sessions_seen} seen, {s.sessions_read} read,"
        f" {s.sessions_unchanged} unchanged"
        + (f", {s.files_rewritten} rewritten" if s.files_rewritten else ""),
    ]
    for reason, count in sorted(s.not_admitted.items()):
        lines.append(f"  not admitted: {count} ({reason})")
    if s.unclassified:
        lines.append(
            f"  unclassified: {len(s.unclassified)} (kept as untrusted evidence;"
            " `dreaming status` says how to admit them)"
        )
    if s.lines_rederived:
        lines.append(
            f"  edited transcripts: {s.lines_rederived} changed lines purged and read again"
        )
    for change in s.reclassified[:50]:
        old, new = change["from"], change["to"]
        lines.append(
            f"  re-derived {change['session_id']}: {old['status']}/{old['trust'] or '-'} ->"
            f" {new['status']}/{new['trust'] or '-'} ({change['reason'] or 'admitted'}),"
            f" {change.get('entries_removed', 0)} entries removed"
        )
    lines.append(f"  messages: {s.messages} spoken, {s.corpus_lines} new corpus lines")
    if s.dropped:
        lines.append("  dropped: " + _counts(s.dropped))
    if s.skips:
        lines.append("  skipped: " + _counts(s.skips))
    again = max(0, s.candidates_updated - s.candidates_new)
    lines.append(
        f"  candidates (statements that may become memory): {s.candidates_new} new,"
        f" {again} heard again; {s.candidates_pending} not in memory yet"
        " (`dreaming candidates` says why)"
    )
    if s.agent_unmatched:
        lines.append(
            f"  agent's own claims: {s.agent_unmatched} repeated nothing anyone else said"
            " (not kept: [deep] promote_agent_only keeps them)"
        )
    if s.recalls:
        lines.append(f"  recalls: {s.recalls} lines repeat what memory already holds")
    return "\n".join(lines)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items()))


def format_deep(s: DeepSummary) -> str:
    head = f"agent {s.agent}: deep phase" + (" (preview: nothing written)" if s.dry_run else "")
    lines = [
        head,
        f"  candidates selected: {s.selected} in {s.batches} batches",
        "  decisions: "
        + (_counts(s.actions) or "none")
        + (f"  (decided by: {_counts(s.paths)})" if s.paths else ""),
        f"  llm: {s.llm_calls} calls, {s.input_tokens}+{s.output_tokens} tokens,"
        f" ${round(s.cost_usd, 6):.4f}",
        f"  entries now: {s.entries}" + (f" (+{s.archived} archived)" if s.archived else ""),
    ]
    if s.max_chars is not None or s.max_lines is not None:
        lines.append("  MEMORY.md: " + _fill(s))
    if s.archived_now:
        lines.append(
            f"  archived: {len(s.archived_now)} entries (the least valuable: MEMORY.md's"
            " budget does not hold them; memory search still finds them)"
        )
    if s.restored:
        lines.append(f"  restored: {len(s.restored)} entries back in MEMORY.md from the archive")
    if s.over_budget:
        lines.append(f"  over budget: {s.over_budget}")
    if s.archive_repaired:
        lines.append("  archive: it was not what the database says (edited?): rewritten")
    if s.deferred:
        lines.append("  deferred: " + _counts(s.deferred))
    if s.ended_on_budget:
        lines.append("  ended on budget: the remaining candidates wait for the next run")
    if s.runaway_stop:
        lines.append("  stopped early: the model skipped every candidate in consecutive batches")
    if s.proposed:
        lines.append(
            f"  staged for review: {s.proposed} proposals (`dreaming review list`);"
            " MEMORY.md is unchanged by them"
        )
    for why in s.held:
        lines.append(f"  held for review (`dreaming review list`): {why[:300]}")
    for why in s.degraded:
        lines.append(f"  degraded: {why[:300]}")
    lines += [f"  fallback{n}: {fb[:200]}" for fb, n in collapse(s.fallbacks)]
    for key in s.edited_by_person:
        lines.append(f"  MEMORY.md block {key} was edited by a person: left as it is")
    for key in s.removed_by_person:
        lines.append(f"  MEMORY.md block {key} was removed by a person: entry retired")
    for key in s.duplicates_removed:
        lines.append(f"  MEMORY.md line {key} appeared more than once: the copies were removed")
    if s.dry_run:
        lines += [format_decision(d) for d in s.decisions]
        lines.append(s.diff.rstrip("\n") if s.diff else "  (MEMORY.md would not change)")
    return "\n".join(lines)


def _fill(s: DeepSummary) -> str:
    """ "9,812 / 12,000 chars" (bytes for Claude Code; and lines when they are bounded)."""
    unit = " bytes" if s.memory_unit == "bytes" else " chars"
    parts = [f"{s.memory_chars:,}" + (f" / {s.max_chars:,}" if s.max_chars else "") + unit]
    if s.max_lines is not None:
        parts.append(f"{s.memory_lines:,} / {s.max_lines:,} lines")
    return ", ".join(parts)


def format_decision(d: dict[str, Any]) -> str:
    """One decision as a preview shows it: the candidate as it was said, what becomes of it,
    and why (who decided, and the model's reason)."""
    said = (d.get("candidate_text") or d["candidate"]).strip()
    out = [f'  {d["action"]:<9} "{said[:160]}"']
    if d["action"] != "skip":
        into = f" into {', '.join(d['targets'])}:" if d["targets"] else ""
        out.append(f"            ->{into} {d['text'] or ''}".rstrip())
    out.append(f"            why ({d['path']}): {d['reason'] or '-'}")
    return "\n".join(out)


def collapse(messages: list[str]) -> list[tuple[str, str]]:
    """Repeated messages once each, in first-seen order, with " (N times)" when repeated."""
    counts: dict[str, int] = {}
    for m in messages:
        counts[m] = counts.get(m, 0) + 1
    return [(m, f" ({n} times)" if n > 1 else "") for m, n in counts.items()]


def _budget(
    app: Any, budget_usd: float | None, base: BudgetSettings | None = None
) -> BudgetSettings | None:
    """The run's budget: a job's (or the settings'), with --budget-usd as the run cap."""
    settings: BudgetSettings = base or app.settings.budget
    if budget_usd is None:
        return base
    return settings.model_copy(update={"max_usd": budget_usd})


def format_rem(s: RemSummary) -> str:
    themes = ", ".join(t.label for t in s.themes) or "none"
    lines = [
        f"agent {s.agent}: REM phase" + (" (dry run)" if s.dry_run else ""),
        f"  themes: {themes}; {s.boosted} candidates boosted",
        f"  diary ({s.diary_by}): " + ("written" if s.diary_written else "unchanged"),
    ]
    if s.fallback:
        lines.append(f"  fallback: {s.fallback[:200]}")
    return "\n".join(lines)


def format_summary(summary: Summary) -> str:
    from dreaming.phases._rem_summary import RemSummary
    from dreaming.phases.light import LightSummary

    if isinstance(summary, LightSummary):
        return format_light(summary)
    if isinstance(summary, RemSummary):
        return format_rem(summary)
    return format_deep(summary)


def format_result(result: AgentResult) -> str:
    lines = [format_adopted(result.agent, len(result.adopted))] if result.adopted else []
    lines += [format_summary(s) for s in result.summaries.values()]
    if result.refused is not None:
        lines.append(f"agent {result.agent}: {result.refused}")
    return "\n".join(lines)


def format_adopted(agent: str, count: int) -> str:
    """The one line a night prints when it adopted managed lines its database had no record
    of (the database was lost), as `dreaming repair` would have."""
    from dreaming.memory.lineage import ADOPTED

    return (
        f"agent {agent}: adopted {count} managed MEMORY.md entries the database had no record"
        f" of (was it deleted or rolled back?); their sources are unknown ({ADOPTED})"
    )


def format_recorded(phases: Mapping[str, Mapping[str, Any]]) -> str:
    """Phase summaries as recorded (a run record's, a scheduler's report), shown as run
    shows them. Raises KeyError, TypeError or ValueError on another version's shape."""
    from dreaming.results import summary_from_dict

    return "\n".join(
        format_summary(summary_from_dict(Phase(p), data)) for p, data in phases.items()
    )


def run_phases(
    ctx: Context,
    wanted: list[str],
    agents: tuple[str, ...],
    as_json: bool,
    *,
    dry_run: bool = False,
    budget_usd: float | None = None,
    job: str | None = None,
    llm: str | None = None,
    budget: BudgetSettings | None = None,
    reingest: bool = False,
    workers: int = 1,
    deep: dict[str, Any] | None = None,
) -> None:
    from dreaming import runner

    app = ctx.app
    if ctx.verbose:
        note(app.registry.banner())
    warnings = source_warnings(app)
    with progress(enabled=not as_json) as bar:
        results = runner.run(
            app,
            wanted,
            list(agents) or None,
            job=job,
            dry_run=dry_run,
            budget=_budget(app, budget_usd, budget),
            llm=llm,
            progress=bar,
            reingest=reingest,
            workers=workers,
            deep=deep,
        )
    if as_json:
        emit_json(
            {
                "phases": wanted,
                "job": job,
                "dry_run": dry_run,
                "warnings": warnings,
                "agents": {r.agent: r.phase_dicts() for r in results},
                "runs": [
                    {
                        "agent": r.agent,
                        "run_id": r.run_id,
                        "outcome": r.outcome,
                        **{
                            k: v
                            for k, v in (
                                ("error", r.error),
                                ("reason", r.reason),
                                ("adopted", list(r.adopted)),
                                ("refused", r.refused),
                            )
                            if v
                        },
                        **(where_files(app, r.agent) if r.error is None else {}),
                    }
                    for r in results
                ],
            }
        )
    else:
        echo("\n".join(format_run_result(app, r) for r in results) or nothing_yet(app))
        if dry_run and any(r.deep is not None for r in results):
            echo("preview only: run again with --apply to write MEMORY.md")
    exit_on_problems(results)


def source_warnings(app: Any) -> list[str]:
    """Configured sources whose path does not exist, each said once on stderr."""
    warnings: list[str] = app.source_warnings()
    for line in warnings:
        note(f"dreaming: warning: {line}")
    return warnings


def nothing_yet(app: Any) -> str:
    return f"no transcripts yet under {app.paths.state_dir}"


def where_files(app: Any, agent: str) -> dict[str, str]:
    """Where the agent's MEMORY.md and DREAMS.md are (empty when a path cannot be used:
    the run's own error says why)."""
    try:
        return {
            "memory": str(app.paths.memory_file(agent)),
            "dreams": str(app.paths.dreams_file(agent)),
        }
    except DreamingError:
        return {}


def format_run_result(app: Any, result: AgentResult) -> str:
    """What one agent's run did, then where its files are; one line for an agent that did
    not run (its error is on stderr)."""
    from dreaming.runs import Outcome

    if result.error is not None:
        why = "skipped" if result.outcome == Outcome.SKIPPED else "failed"
        return f"agent {result.agent}: {why} (the error is on stderr)"
    files = where_files(app, result.agent)
    where = (
        f"agent {result.agent}: MEMORY.md {files['memory']}, DREAMS.md {files['dreams']}"
        if files
        else ""
    )
    return "\n".join(part for part in (format_result(result), where) if part)


def exit_status(results: Sequence[AgentResult]) -> ExitCode:
    """The worst of the agents' outcomes: failed, then degraded, then busy (skipped because
    another run held it), else ok."""
    from dreaming.runs import Outcome

    outcomes = {r.outcome for r in results}
    if Outcome.FAILED in outcomes:
        return ExitCode.FAILED
    if any(r.degraded for r in results):
        return ExitCode.DEGRADED
    if Outcome.SKIPPED in outcomes:
        return ExitCode.BUSY
    return ExitCode.OK


def exit_on_problems(results: Sequence[AgentResult]) -> None:
    """A busy, failed or degraded agent is one line on stderr each; the exit status says
    the worst (`exit_status`). The agents that ran have been reported above."""
    for r in results:
        if r.error is not None:
            echo(f"dreaming: error: {r.error}", err=True)
    note_degraded([r for r in results if r.error is None])
    code = exit_status(results)
    if code != ExitCode.OK:
        sys.exit(int(code))


def note_degraded(results: Sequence[AgentResult]) -> bool:
    """One stderr line per degraded agent, with why; whether there was one."""
    degraded = [r for r in results if r.degraded]
    for r in degraded:
        note(f"dreaming: agent {r.agent} degraded: {'; '.join(r.degraded)[:400]}")
    return bool(degraded)


# click matches an Enum choice by member name (LIGHT); the option takes the values.
PHASE_NAMES = [p.value for p in Phase]


@cli.command("run")  # the function is named apart from `runner.run`, which it calls
@click.option(
    "--phase",
    "phases",
    type=click.Choice([*PHASE_NAMES, "all"]),
    multiple=True,
    default=["all"],
    show_default=True,
    help="Phase to run (repeatable). `all` runs every phase in order.",
)
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option(
    "--dry-run", is_flag=True, help="Deep: show decisions and the MEMORY.md diff, write nothing."
)
@click.option("--budget-usd", type=float, help="Deep: cap this run's LLM spending (USD).")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Run up to this many agents at once, each in its own process.",
)
@click.option(
    "--reingest",
    is_flag=True,
    help="Light: read every transcript from the start (forgotten sessions stay forgotten).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def run_command(
    ctx: Context,
    phases: tuple[str, ...],
    agents: tuple[str, ...],
    dry_run: bool,
    budget_usd: float | None,
    workers: int,
    reingest: bool,
    as_json: bool,
) -> None:
    """Run phases now over the agents' transcripts.

    Ends, per agent, with where its MEMORY.md and DREAMS.md are. Exit status: 0 ok, 1 an
    agent failed, 2 a usage or settings error (a missing API key included: nothing runs),
    3 degraded, 75 an agent was busy (another run held it), 130 interrupted."""
    wanted = PHASE_NAMES if "all" in phases else [p for p in PHASE_NAMES if p in phases]
    if dry_run and "light" in wanted and "deep" not in wanted:
        raise click.UsageError("--dry-run applies to the deep phase")
    run_phases(
        ctx,
        wanted,
        agents,
        as_json,
        dry_run=dry_run,
        budget_usd=budget_usd,
        reingest=reingest,
        workers=workers,
    )


@cli.command()
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option(
    "--apply", is_flag=True, help="Write the decisions to MEMORY.md (without it: a preview)."
)
@click.option(
    "--dry-run", is_flag=True, help="Preview only: decisions and the MEMORY.md diff (the default)."
)
@click.option(
    "--review",
    is_flag=True,
    help="Stage the decisions as proposals for `dreaming review` instead of writing them.",
)
@click.option("--limit", type=click.IntRange(min=1), help="Consider at most this many candidates.")
@click.option(
    "--min-score",
    type=click.FloatRange(min=0),
    help="Consider only candidates scoring at least this (default: [deep] min_score).",
)
@click.option("--budget-usd", type=float, help="Cap this run's LLM spending (USD).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def promote(
    ctx: Context,
    agents: tuple[str, ...],
    apply: bool,
    dry_run: bool,
    review: bool,
    limit: int | None,
    min_score: float | None,
    budget_usd: float | None,
    as_json: bool,
) -> None:
    """Promote candidates into MEMORY.md now (an on-demand deep run).

    Previews by default: each decision with the candidate's text and the reason, and the
    MEMORY.md diff; nothing is written. --apply writes; --review stages the decisions for a
    person (`dreaming review`). A preview that asked the model is recorded in `dreaming
    runs` (outcome `preview`) with what it cost.
    """
    if apply and dry_run:
        raise click.UsageError("--apply and --dry-run contradict each other")
    if review and dry_run:
        raise click.UsageError("--review stages proposals (MEMORY.md is not written): no --dry-run")
    overrides: dict[str, Any] = {"apply": "review"} if review else {}
    if limit is not None:
        overrides["max_candidates"] = limit
    if min_score is not None:
        overrides["min_score"] = min_score
    run_phases(
        ctx,
        ["deep"],
        agents,
        as_json,
        dry_run=not (apply or review),
        budget_usd=budget_usd,
        deep=overrides or None,
    )
