"""`dreaming jobs`: the job definitions in the jobs folder; run one now."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any

import click

from dreaming.app import App
from dreaming.cli._fleet import executor_option, require_fleet
from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import EXIT_DEGRADED, EXIT_FAILED, emit_json, note
from dreaming.cli._progress import progress
from dreaming.cli._run import format_result
from dreaming.jobs import load_jobs
from dreaming.scheduler import AgentOutcome, InProcessRunner, describe_job, jobs_dir


def _money(value: float | None) -> str:
    return f"${value:.2f}" if value is not None else "-"


def _format_job(job: dict[str, Any]) -> str:
    fire = f"; next: {job['next_fire_time']}" if job["next_fire_time"] else ""
    agents = "all" if job["agents"] == "*" else ", ".join(job["agents"])
    budget = job["budget"]
    lines = [
        f"{job['name']}: {job['trigger']}{fire}",
        f"  phases: {', '.join(job['phases'])}; agents: {agents}"
        + ("; dry run" if job["dry_run"] else ""),
        f"  budget: {_money(budget['max_usd'])} a run, {_money(budget['daily_max_usd'])} a day"
        f"; llm: {job['llm'] or 'settings default'}",
    ]
    if job["description"]:
        lines.insert(1, f"  {job['description']}")
    return "\n".join(lines)


def format_agent_result(result: dict[str, Any]) -> str:
    if result["outcome"] == AgentOutcome.QUEUED:
        return f"agent {result['agent']}: queued as task {result['queue_job_id']}"
    if result["outcome"] == AgentOutcome.SKIPPED:
        return f"agent {result['agent']}: skipped, {result['reason']}"
    if result["outcome"] == AgentOutcome.FAILED:
        return f"agent {result['agent']}: failed: {result['error']}"
    return format_result(result)


@cli.group()
def jobs() -> None:
    """Job definitions (jobs/*.toml): list them, or run one now."""


@jobs.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def list_jobs(ctx: Context, as_json: bool) -> None:
    """List the jobs with their triggers and next fire times."""
    app = ctx.app
    folder = jobs_dir(app.paths)
    now = datetime.now(UTC)
    found = [describe_job(jf, now) for jf in load_jobs(folder, list(app.settings.llm.profiles))]
    if as_json:
        emit_json({"jobs_dir": str(folder), "now": now.isoformat(), "jobs": found})
        return
    click.echo(f"jobs in {folder}")
    if not found:
        click.echo("  (none: add a jobs/*.toml file)")
    for job in found:
        click.echo(_format_job(job))


@jobs.command("run")
@click.argument("name")
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option("--dry-run", is_flag=True, help="Show what deep would do; write nothing.")
@executor_option("run it here now")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document and nothing else.")
@pass_ctx
def run_job(
    ctx: Context, name: str, agents: tuple[str, ...], dry_run: bool, executor: str, as_json: bool
) -> None:
    """Run job NAME now, the way the scheduler runs it (or queue it for fleet workers).

    An agent that another run holds is skipped and reported ("locked by ..."); the others
    run. Queued, an agent whose task is already waiting is skipped ("already waiting").
    Exit status: 1 when an agent failed, 3 when one was degraded (a fallback decided what
    the model should have), else 0 (skipped agents included).
    """
    app = ctx.app
    runner = InProcessRunner(app, jobs_dir(app.paths))
    job = runner.job(name)
    dry = dry_run or job.dry_run
    if executor == "procrastinate":
        _enqueue(app, name, agents, dry, as_json)
        return
    if ctx.verbose:
        note(app.registry.banner())
    with progress(enabled=not as_json) as bar:
        results = runner.run(name, agents=list(agents) or None, dry_run=dry, progress=bar)
    if as_json:
        emit_json(
            {
                "phases": list(job.phases),
                "job": job.name,
                "dry_run": dry,
                "agents": {r["agent"]: r["phases"] for r in results},
                "runs": [
                    {k: r[k] for k in ("agent", "run_id", "outcome", "reason", "error") if k in r}
                    for r in results
                ],
            }
        )
    elif results:
        click.echo("\n".join(format_agent_result(r) for r in results))
    else:
        click.echo(f"job {job.name}: no agents found under {app.paths.state_dir}")
    if any(r["outcome"] == AgentOutcome.FAILED for r in results):
        sys.exit(EXIT_FAILED)
    if any(r.get("degraded") for r in results):
        for r in results:
            if r.get("degraded"):
                note(f"dreaming: agent {r['agent']} degraded: {'; '.join(r['degraded'])[:400]}")
        sys.exit(EXIT_DEGRADED)


def _enqueue(app: App, name: str, agents: tuple[str, ...], dry: bool, as_json: bool) -> None:
    require_fleet(app, "--executor procrastinate")
    from dreaming.fleet import enqueue_job

    results = enqueue_job(app, jobs_dir(app.paths), name, agents=list(agents) or None, dry_run=dry)
    if as_json:
        keys = ("agent", "outcome", "queue_job_id", "reason")
        emit_json({"job": name, "queued": [{k: r[k] for k in keys if k in r} for r in results]})
    else:
        click.echo("\n".join(format_agent_result(r) for r in results) or "no agents")
