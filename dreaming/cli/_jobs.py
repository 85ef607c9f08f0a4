"""`dreaming jobs`: the job definitions (the jobs folder over the bundled examples); run one
now, or copy the examples to edit."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from dreaming.cli._fleet import executor_option, require_fleet
from dreaming.cli._main import Context, cli, pass_ctx
from dreaming.cli._output import echo, emit_json, note, usd
from dreaming.cli._progress import progress
from dreaming.cli._run import (
    exit_status,
    format_result,
    note_degraded,
    source_warnings,
)
from dreaming.errors import ExitCode

# The scheduler package brings APScheduler and the whole library: the commands import it
# when they run, so registering them (every `dreaming` start) stays cheap.
if TYPE_CHECKING:
    from dreaming.app import App
    from dreaming.results import AgentResult
    from dreaming.scheduler import StoredSchedule

JSON_HELP = "Print one JSON document and nothing else."


def _origin(job: dict[str, Any]) -> str:
    if job["source"] == "bundled":
        return f"bundled example {job['file']}"
    if job["overrides"]:
        return f"{job['file']} (replaces the bundled example)"
    return str(job["file"])


def _stored(job: dict[str, Any], stores: Sequence[StoredSchedule]) -> str:
    """What the schedulers' stores say about a scheduled job, for the text listing."""
    out = []
    for store in stores:
        label = "scheduler" if store.name == "scheduler" else f"scheduler {store.name}"
        if not store.running:
            label += " (not running)"
        stored = job["scheduler_next_fire_time"]
        if store.name in stored:
            out.append(f"{label}: {stored[store.name] or 'paused'}")
        elif store.running:
            out.append(f"{label}: not scheduled yet (SIGHUP reloads the jobs)")
        else:
            out.append(f"{label}: not scheduled yet (added when it starts)")
    return "".join(f"; {text}" for text in out)


def _format_job(job: dict[str, Any], stores: Sequence[StoredSchedule]) -> str:
    if not job["enabled"]:
        head = f"{job['name']}: switched off (enabled = false)"
    elif job["trigger"] != "on demand" and not job["scheduled"]:
        head = (
            f"{job['name']}: {job['trigger']}; not scheduled (the jobs folder has its own"
            " jobs; run it by name, or copy it there)"
        )
    elif job["next_fire_time"] is None:
        head = f"{job['name']}: {job['trigger']}"
    else:
        head = f"{job['name']}: {job['trigger']}; next: {job['next_fire_time']}"
        head += _stored(job, stores)
    agents = "all" if job["agents"] == "*" else ", ".join(job["agents"])
    budget = job["budget"]
    lines = [
        head,
        f"  from: {_origin(job)}",
        f"  phases: {', '.join(job['phases'])}; agents: {agents}"
        + ("; dry run" if job["dry_run"] else ""),
        f"  budget: {usd(budget['max_usd'])} a run, {usd(budget['daily_max_usd'])} a day"
        f"; llm: {job['llm'] or 'settings default'}",
    ]
    if job["description"]:
        lines.insert(1, f"  {job['description']}")
    return "\n".join(lines)


def _format_store(store: StoredSchedule) -> str:
    state = f"running ({store.holder})" if store.running else "not running"
    return f"scheduler store {store.path}: {state}, {len(store.next_fire)} job(s) scheduled"


def format_agent_result(result: AgentResult) -> str:
    from dreaming.scheduler import AgentOutcome

    if result.outcome == AgentOutcome.QUEUED:
        return f"agent {result.agent}: queued as task {result.queue_job_id}"
    if result.outcome == AgentOutcome.SKIPPED:
        return f"agent {result.agent}: skipped, {result.reason}"
    if result.outcome == AgentOutcome.FAILED:
        return f"agent {result.agent}: failed: {result.error}"
    return format_result(result)


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP + " (as `jobs list --json`)")
@click.pass_context
def jobs(click_ctx: click.Context, as_json: bool) -> None:
    """Job definitions: the jobs folder (jobs_dir in the settings, else
    <state-dir>/dreaming/jobs) over the bundled examples; a file naming a bundled job
    replaces it. Without a subcommand: `jobs list`."""
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(list_jobs, as_json=as_json)
    elif as_json:
        raise click.UsageError(
            f"--json goes after the subcommand: jobs {click_ctx.invoked_subcommand} --json"
        )


@jobs.command("list")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@pass_ctx
def list_jobs(ctx: Context, as_json: bool) -> None:
    """List the jobs: where each comes from, its trigger and next fire time (computed, and
    as the scheduler's job store holds it when there is one)."""
    from dreaming.scheduler import describe_job, job_catalog, read_schedules

    app = ctx.app
    catalog = job_catalog(app.paths)
    stores = read_schedules(app.paths)
    now = datetime.now(UTC)
    profiles = list(app.settings.llm.profiles)
    fired = {jf.job.name for jf in catalog.scheduled(profiles)}
    found = [
        describe_job(jf, now, stores, scheduled=jf.job.name in fired)
        for jf in catalog.load(profiles)
    ]
    if as_json:
        emit_json(
            {
                "jobs_dir": str(catalog.folder),
                "bundled_dir": str(catalog.bundled) if catalog.bundled else None,
                "now": now.isoformat(),
                "schedulers": [s.to_dict() for s in stores],
                "jobs": found,
            }
        )
        return
    over = f", over the bundled examples in {catalog.bundled}" if catalog.bundled else ""
    echo(f"jobs in {catalog.folder}{over}")
    for store in stores:
        echo(_format_store(store))
    if not found:
        echo("  (none: `dreaming jobs init` copies the examples to edit)")
    for job in found:
        echo(_format_job(job, stores))


@jobs.command("init")
@click.option("--force", is_flag=True, help="Replace files that exist (your edits are lost).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@pass_ctx
def init_jobs(ctx: Context, force: bool, as_json: bool) -> None:
    """Copy the bundled example jobs into the jobs folder to edit.

    A file that exists is kept unless --force. Copies replace the bundled jobs of the same
    name; to switch one off, keep its file and set `enabled = false`.
    """
    from dreaming.scheduler import CopyOutcome, copy_bundled_jobs, jobs_dir

    folder = jobs_dir(ctx.app.paths)
    copied = copy_bundled_jobs(folder, force=force)
    if as_json:
        emit_json(
            {
                "jobs_dir": str(folder),
                "files": [
                    {"path": str(c.path), "outcome": c.outcome.value, "reason": c.reason or None}
                    for c in copied
                ],
            }
        )
        return
    for c in copied:
        reason = f" ({c.reason})" if c.reason else ""
        echo(f"{c.outcome.value:>8} {c.path}{reason}")
    if any(c.outcome is not CopyOutcome.KEPT for c in copied):
        echo(f"edit them in {folder}; `dreaming jobs list` shows what is in effect")


@jobs.command("run")
@click.argument("name")
@click.option("--agent", "agents", multiple=True, help="Only this agent (repeatable).")
@click.option("--dry-run", is_flag=True, help="Show what deep would do; write nothing.")
@executor_option("run it here now")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@pass_ctx
def run_job(
    ctx: Context, name: str, agents: tuple[str, ...], dry_run: bool, executor: str, as_json: bool
) -> None:
    """Run job NAME now, the way the scheduler runs it (or queue it for fleet workers).

    An agent that another run holds is skipped and reported ("locked by ..."); the others
    run. Queued, an agent whose task is already waiting is skipped ("already waiting").
    Exit status as `run`'s: 1 when an agent failed, 3 when one was degraded (a fallback
    decided what the model should have), 75 when one was skipped because another run held
    it, else 0; 2 for a settings error (a missing API key included) before anything ran.
    """
    from dreaming.scheduler import InProcessRunner, job_catalog

    app = ctx.app
    runner = InProcessRunner(app, job_catalog(app.paths))
    job = runner.job(name)
    dry = dry_run or job.dry_run
    if executor == "procrastinate":
        _enqueue(app, name, agents, dry, as_json)
        return
    if ctx.verbose:
        note(app.registry.banner())
    profile = job.llm or app.settings.deep.llm
    if profile is not None and {"rem", "deep"} & {str(p) for p in job.phases}:
        app.check_llm(profile)  # as `run`: a missing key stops the job before any agent
    warnings = source_warnings(app)
    with progress(enabled=not as_json) as bar:
        results = runner.run(name, agents=list(agents) or None, dry_run=dry, progress=bar)
    if as_json:
        emit_json(
            {
                "phases": list(job.phases),
                "job": job.name,
                "dry_run": dry,
                "warnings": warnings,
                "agents": {r.agent: r.phase_dicts() for r in results},
                "runs": [_run_keys(r.to_dict()) for r in results],
            }
        )
    elif results:
        echo("\n".join(format_agent_result(r) for r in results))
    else:
        echo(f"job {job.name}: no agents found under {app.paths.state_dir}")
    note_degraded(results)
    code = exit_status(results)
    if code != ExitCode.OK:
        sys.exit(int(code))


def _run_keys(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("agent", "run_id", "outcome", "reason", "error")
    return {k: result[k] for k in keys if k in result}


def _enqueue(app: App, name: str, agents: tuple[str, ...], dry: bool, as_json: bool) -> None:
    require_fleet(app, "--executor procrastinate")
    from dreaming.fleet import enqueue_job
    from dreaming.scheduler import jobs_dir

    results = enqueue_job(app, jobs_dir(app.paths), name, agents=list(agents) or None, dry_run=dry)
    if as_json:
        keys = ("agent", "outcome", "queue_job_id", "reason")
        queued = [r.to_dict() for r in results]
        emit_json({"job": name, "queued": [{k: r[k] for k in keys if k in r} for r in queued]})
    else:
        echo("\n".join(format_agent_result(r) for r in results) or "no agents")
