"""`dreaming run`: run phases now."""

from __future__ import annotations

import sys
from typing import Any

import click

from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import emit_json, note
from dreaming.cli._progress import progress
from dreaming.config import BudgetSettings


def format_light(data: dict[str, Any]) -> str:
    s = data["sessions"]
    lines = [
        f"agent {data['agent']}: light phase",
        f"  sessions: {s['seen']} seen, {s['read']} read, {s['unchanged']} unchanged"
        + (f", {s['rewritten']} rewritten" if s["rewritten"] else ""),
    ]
    for reason, count in s["not_admitted"].items():
        lines.append(f"  not admitted: {count} ({reason})")
    if s.get("unclassified_count"):
        lines.append(
            f"  unclassified: {s['unclassified_count']} (kept as untrusted evidence;"
            " `dreaming status` says how to admit them)"
        )
    if s.get("lines_rederived"):
        lines.append(
            f"  edited transcripts: {s['lines_rederived']} changed lines purged and read again"
        )
    for change in s.get("reclassified", []):
        old, new = change["from"], change["to"]
        lines.append(
            f"  re-derived {change['session_id']}: {old['status']}/{old['trust'] or '-'} ->"
            f" {new['status']}/{new['trust'] or '-'} ({change['reason'] or 'admitted'}),"
            f" {change.get('entries_removed', 0)} entries removed"
        )
    lines.append(f"  messages: {data['messages']} spoken, {data['corpus_lines']} new corpus lines")
    if data["dropped"]:
        lines.append("  dropped: " + ", ".join(f"{k} {v}" for k, v in data["dropped"].items()))
    if data["skips"]:
        lines.append("  skipped: " + ", ".join(f"{k} {v}" for k, v in data["skips"].items()))
    c = data["candidates"]
    lines.append(
        f"  candidates: {c['new']} new, {c['updated']} updated, {c['pending']} pending;"
        f" {data['recalls']} recalls of existing entries"
    )
    return "\n".join(lines)


def format_deep(data: dict[str, Any]) -> str:
    llm = data["llm"]
    head = f"agent {data['agent']}: deep phase" + (
        " (dry run: nothing written)" if data["dry_run"] else ""
    )
    lines = [
        head,
        f"  candidates selected: {data['selected']} in {data['batches']} batches",
        "  decisions: "
        + (", ".join(f"{k} {v}" for k, v in data["actions"].items()) or "none")
        + (
            "  (decided by: " + ", ".join(f"{k} {v}" for k, v in data["paths"].items()) + ")"
            if data["paths"]
            else ""
        ),
        f"  llm: {llm['calls']} calls, {llm['input_tokens']}+{llm['output_tokens']} tokens,"
        f" ${llm['cost_usd']:.4f}",
        f"  entries now: {data['entries']}",
    ]
    if data["deferred"]:
        lines.append("  deferred: " + ", ".join(f"{k} {v}" for k, v in data["deferred"].items()))
    if data["ended_on_budget"]:
        lines.append("  ended on budget: the remaining candidates wait for the next run")
    if data["runaway_stop"]:
        lines.append("  stopped early: the model skipped every candidate in consecutive batches")
    for fb in data["fallbacks"]:
        lines.append(f"  fallback: {fb[:200]}")
    mem = data["memory"]
    for key in mem["edited_by_person"]:
        lines.append(f"  MEMORY.md block {key} was edited by a person: left as it is")
    for key in mem["removed_by_person"]:
        lines.append(f"  MEMORY.md block {key} was removed by a person: entry retired")
    for key in mem.get("duplicates_removed", []):
        lines.append(f"  MEMORY.md line {key} appeared more than once: the copies were removed")
    if data["dry_run"]:
        for d in data["decisions"]:
            lines.append(
                f"  {d['action']:<9} {d['candidate']} -> {d['entry'] or '-'}  {d['text'] or ''}"
            )
        lines.append(data["diff"] or "  (MEMORY.md would not change)")
    return "\n".join(lines)


def _budget(
    app: Any, budget_usd: float | None, base: BudgetSettings | None = None
) -> BudgetSettings | None:
    """The run's budget: a job's (or the settings'), with --budget-usd as the run cap."""
    settings: BudgetSettings = base or app.settings.budget
    if budget_usd is None:
        return base
    return settings.model_copy(update={"max_usd": budget_usd})


def format_rem(data: dict[str, Any]) -> str:
    themes = ", ".join(t["concept"] for t in data["themes"]) or "none"
    lines = [
        f"agent {data['agent']}: REM phase" + (" (dry run)" if data["dry_run"] else ""),
        f"  themes: {themes}; {data['boosted']} candidates boosted",
        f"  diary ({data['diary_by']}): " + ("written" if data["diary_written"] else "unchanged"),
    ]
    if data["fallback"]:
        lines.append(f"  fallback: {data['fallback'][:200]}")
    return "\n".join(lines)


FORMATTERS = {"light": format_light, "rem": format_rem, "deep": format_deep}


def format_result(result: dict[str, Any]) -> str:
    return "\n".join(FORMATTERS[p](d) for p, d in result["phases"].items())


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
) -> None:
    app = ctx.app
    note(app.registry.banner())
    with progress("light", enabled=not as_json and "light" in wanted) as bar:
        results = app.run(
            wanted,
            list(agents) or None,
            job=job,
            dry_run=dry_run,
            budget=_budget(app, budget_usd, budget),
            llm=llm,
            progress=bar,
            reingest=reingest,
            workers=workers,
        )
    if as_json:
        emit_json(
            {
                "phases": wanted,
                "job": job,
                "dry_run": dry_run,
                "agents": {r["agent"]: r["phases"] for r in results},
                "runs": [
                    {
                        "agent": r["agent"],
                        "run_id": r["run_id"],
                        "outcome": r["outcome"],
                        **({"error": r["error"]} if "error" in r else {}),
                    }
                    for r in results
                ],
            }
        )
        _exit_on_problems(results)
        return
    text = [format_result(r) for r in results if "error" not in r]
    click.echo("\n".join(text) if text else f"no agents found under {app.paths.state_dir}")
    _exit_on_problems(results)


def _exit_on_problems(results: list[dict[str, Any]]) -> None:
    """A busy or failed agent is one line on stderr each and exit status 1; the agents
    that ran have been reported above."""
    problems = [r for r in results if "error" in r]
    for r in problems:
        click.echo(f"dreaming: error: {r['error']}", err=True)
    if problems:
        sys.exit(1)


PHASES = ["light", "rem", "deep"]


@cli.command()
@click.option(
    "--phase",
    "phases",
    type=click.Choice([*PHASES, "all"]),
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
def run(
    ctx: Context,
    phases: tuple[str, ...],
    agents: tuple[str, ...],
    dry_run: bool,
    budget_usd: float | None,
    workers: int,
    reingest: bool,
    as_json: bool,
) -> None:
    """Run phases now over the agents' transcripts."""
    wanted = PHASES if "all" in phases else [p for p in PHASES if p in phases]
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
    "--dry-run", is_flag=True, help="Show decisions and the MEMORY.md diff, write nothing."
)
@click.option("--budget-usd", type=float, help="Cap this run's LLM spending (USD).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def promote(
    ctx: Context, agents: tuple[str, ...], dry_run: bool, budget_usd: float | None, as_json: bool
) -> None:
    """Promote candidates into MEMORY.md now (an on-demand deep run)."""
    run_phases(ctx, ["deep"], agents, as_json, dry_run=dry_run, budget_usd=budget_usd)
