"""What `dreaming status` reports for an agent, read from its database: sessions, corpus,
candidates, entries, last runs, and today's LLM spend against every daily cap that applies
to the agent (the settings' for `run` and `promote`, and each job's effective one)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, and_, func, select

from dreaming.errors import ConfigError, WorkspaceFileError
from dreaming.ingest.admission import Status
from dreaming.llm import BudgetSettings, utc_today
from dreaming.memory import archive, capacity, memory_file, memory_sync
from dreaming.paths import Paths
from dreaming.runs import Outcome
from dreaming.scheduler import Job, effective_budget, job_catalog
from dreaming.store import state
from dreaming.store.state import StateKey
from dreaming.store.statuses import CandidateStatus, EntryStatus
from dreaming.store.tables import (
    CANDIDATES,
    CORPUS_LINES,
    ENTRIES,
    RUNS,
    SESSIONS,
    SPEND,
    TOMBSTONES,
)


def _left(cap: float | None, spent: float) -> float | None:
    return None if cap is None else round(max(0.0, cap - spent), 6)


@dataclass(frozen=True)
class DailyCap:
    """The limits one way of running the agent spends under: `job` None for the settings'
    (`run`, `promote`), else a job's effective ones."""

    job: str | None
    budget: BudgetSettings


def daily_caps(agent: str, settings: BudgetSettings, jobs: Sequence[Job] = ()) -> list[DailyCap]:
    """The daily caps the agent's spend counts against: the settings' (what `run` and
    `promote` run under), then each enabled job on the agent, with the cap it runs under
    (`effective_budget`: the stricter of its own and the settings')."""
    out = [DailyCap(None, settings)]
    for job in sorted(jobs, key=lambda j: j.name):
        if job.enabled and (job.agents == "*" or agent in job.agents):
            out.append(DailyCap(job.name, effective_budget(settings, job.budget)))
    return out


def every_job(paths: Paths, profiles: Sequence[str]) -> tuple[list[Job], str | None]:
    """Every job there is (for their caps), or none and why: a broken job file must not take
    `status` or the report down with it."""
    try:
        return [jf.job for jf in job_catalog(paths).load(list(profiles))], None
    except ConfigError as err:
        return [], str(err)


def spend_on(conn: Any, agent: str, day: str, caps: Sequence[DailyCap] = ()) -> dict[str, Any]:
    """What the agent's LLM calls cost on `day`, and what is left under each of `caps`
    (from `daily_caps`; a cap of None is no cap)."""
    row = conn.execute(
        select(SPEND.c.usd, SPEND.c.tokens, SPEND.c.calls).where(
            and_(SPEND.c.agent == agent, SPEND.c.day == day)
        )
    ).first()
    usd, tokens, calls = (float(row[0]), int(row[1]), int(row[2])) if row else (0.0, 0, 0)
    against = []
    for cap in caps:
        usd_cap, token_cap = cap.budget.daily_max_usd, cap.budget.daily_max_tokens
        left_tokens = None if token_cap is None else max(0, token_cap - tokens)
        against.append(
            {
                "scope": "settings" if cap.job is None else "job",
                "job": cap.job,
                "daily_max_usd": usd_cap,
                "daily_max_tokens": token_cap,
                "remaining_usd": _left(usd_cap, usd),
                "remaining_tokens": left_tokens,
                "reached": (usd_cap is not None and usd >= usd_cap)
                or (token_cap is not None and tokens >= token_cap),
                "max_usd": cap.budget.max_usd,  # per run, for the record
            }
        )
    return {"day": day, "usd": round(usd, 6), "tokens": tokens, "calls": calls, "caps": against}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _reason(summary: str | None) -> str | None:
    """Why a run ended as it did (a degraded or failed run says), from its summary."""
    try:
        data = json.loads(summary or "{}")
    except ValueError:
        return None
    why = data.get("reason") or data.get("error") if isinstance(data, dict) else None
    return str(why) if why else None


def _light_lines(summary: str | None) -> int | None:
    """Corpus lines the run's light phase wrote (None: the run had no light phase)."""
    try:
        data = json.loads(summary or "{}")
    except ValueError:
        return None
    light = (data.get("phases") or {}).get("light") if isinstance(data, dict) else None
    return light.get("corpus_lines") if isinstance(light, dict) else None


def agent_status(
    engine: Engine,
    agent: str,
    *,
    budget: BudgetSettings | None = None,
    jobs: Sequence[Job] = (),
    day: str | None = None,
) -> dict[str, Any]:
    """`budget` is the settings' `[budget]`, `jobs` every job there is (those that do not
    run on the agent are left out); `day` defaults to today (UTC)."""
    caps = daily_caps(agent, budget or BudgetSettings(), jobs)
    with engine.connect() as conn:
        spend = spend_on(conn, agent, day or utc_today(), caps)
        by_status = _count_by(conn, SESSIONS, agent)
        not_admitted = _not_admitted(conn, agent)
        forgotten = _forgotten(conn, agent)
        candidates = _count_by(conn, CANDIDATES, agent)
        entries = _count_by(conn, ENTRIES, agent)
        lines = conn.execute(select(func.count()).where(CORPUS_LINES.c.agent == agent)).scalar_one()
        clock = state.get(conn, agent, StateKey.CLOCK)
        return {
            "agent": agent,
            "clock": clock,
            "sessions": {
                s.value: by_status.get(s, 0)
                for s in (Status.ADMITTED, Status.EXCLUDED, Status.INTERNAL)
            }
            | {Status.FORGOTTEN.value: len(forgotten)},
            "not_admitted": not_admitted + [f for f in forgotten if f not in not_admitted],
            # Admitted as untrusted evidence only: nothing says whose chat they are.
            "unclassified": _unclassified(conn, agent),
            "corpus_lines": lines,
            # by status; "pending" (what deep will consider) is always there
            "candidates": {CandidateStatus.PENDING.value: 0} | candidates,
            "entries": entries.get(EntryStatus.LIVE, 0),
            "archived": entries.get(EntryStatus.ARCHIVED, 0),
            "last_runs": _last_runs(conn, agent),
            "spend_today": spend,
        }


def memory_target(paths: Paths, agent: str) -> dict[str, Any]:
    """Where the agent's MEMORY.md is (as OpenClaw's configuration says, or a Claude Code
    project's `memory/`), how much of it the agent loads, who writes it: dreaming, or
    (`not_written` says why and what to change) the OpenClaw plugin that consolidates the
    agent itself, and how full it is against its budget (`fill`). `no_longer_read` explains
    a Claude Code source's pooled agent left from before its projects became agents of
    their own."""
    owner = paths.dreaming_owner(agent)
    refused = paths.not_written(agent)
    project = paths.claude_project(agent)
    # What Claude Code loads of it, for a project's agent and for one whose transcripts are
    # all Claude Code's (its budget is Claude Code's: `Paths.capacity`).
    lines = paths.default_max_lines(agent)[0]
    pooled = paths.pooled_projects(agent)
    file = paths.memory_file(agent)
    return {
        "file": str(file),
        "claude_code_project": str(project.folder) if project is not None else None,
        # Claude Code loads whole lines, so their count is what fits or not.
        "lines": _line_count(file) if lines is not None else None,
        "bootstrap_max_chars": None if lines is not None else paths.bootstrap_max_chars(agent),
        "max_lines": lines,
        "written_by_dreaming": refused is None,
        "other_writer": owner.plugin if owner is not None else None,
        "not_written": refused,
        "no_longer_read": (
            f"no transcript feeds this agent any more: the claude-code source"
            f" {', '.join(str(s.path) for s in pooled)} has one agent per project now"
            f" ({agent}:<project>), which started fresh. This state stays as it is: its"
            f" sessions can be forgotten (`dreaming forget --agent {agent}`), or drop it by"
            f" deleting {paths.database(agent)} (its tombstones stay in force); or set"
            " per_project = false on the source to keep pooling"
            if pooled
            else None
        ),
        "fill": memory_fill(paths, agent),
    }


def _line_count(path: Path) -> int | None:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return None


def memory_fill(paths: Paths, agent: str) -> dict[str, Any]:
    """MEMORY.md's size as the agent counts it against its budget, and the archive. `over`
    says why nothing fits when the operator's text alone is over the budget (it is never
    cut); `error` when a file cannot be read as it is."""
    cap = paths.capacity(agent)
    out: dict[str, Any] = {
        "chars": 0,
        "lines": 0,
        "max_chars": cap.max_chars,
        "max_lines": cap.max_lines,
        "max_chars_from": cap.chars_from,
        "unit": cap.unit,  # what chars and max_chars count: "chars", or "bytes" (Claude Code)
        "max_lines_from": cap.lines_from or None,
        "archive": None,
        "archive_lines": 0,
        "over": None,
    }
    try:
        memory = paths.memory_file(agent)
        content = memory_file.load_text(memory) or ""
        shelf = paths.archive_file(agent)
        shelved = archive.read(shelf)
    except WorkspaceFileError as err:
        return out | {"error": str(err)}
    crlf = memory_sync.is_crlf(memory)
    out["chars"], out["lines"] = capacity.measure(content, crlf=crlf, unit=cap.unit)
    if shelved is not None:
        out["archive"] = str(shelf)
        out["archive_lines"] = len(archive.keys(shelved))
    doc = memory_file.parse(content)
    fixed = memory_file.apply_entries(doc, [], memory_sync.group_of).render()
    chars, lines = capacity.measure(fixed, crlf=crlf, unit=cap.unit)
    probe = capacity.Placement(
        (), (), chars, lines, chars, lines, cap.max_chars, cap.max_lines, cap.unit
    )
    out["over"] = probe.over
    return out


def _count_by(conn: Connection, table: Table, agent: str) -> dict[str, int]:
    """The agent's rows of `table` counted by their status."""
    query = (
        select(table.c.status, func.count()).where(table.c.agent == agent).group_by(table.c.status)
    )
    return {status: n for status, n in conn.execute(query)}


def _not_admitted(conn: Connection, agent: str) -> list[dict[str, Any]]:
    return [
        {"session_id": sid, "session_key": key, "status": st, "reason": reason}
        for sid, key, st, reason in conn.execute(
            select(
                SESSIONS.c.session_id,
                SESSIONS.c.session_key,
                SESSIONS.c.status,
                SESSIONS.c.reason,
            )
            .where(and_(SESSIONS.c.agent == agent, SESSIONS.c.status != Status.ADMITTED))
            .order_by(SESSIONS.c.session_id)
        )
    ]


def _unclassified(conn: Connection, agent: str) -> list[str]:
    return [
        sid
        for (sid,) in conn.execute(
            select(SESSIONS.c.session_id)
            .where(
                and_(
                    SESSIONS.c.agent == agent,
                    SESSIONS.c.status == Status.ADMITTED,
                    SESSIONS.c.reason == "unclassified",
                )
            )
            .order_by(SESSIONS.c.session_id)
        )
    ]


def _forgotten(conn: Connection, agent: str) -> list[dict[str, Any]]:
    return [
        {"session_id": sid, "session_key": key, "status": Status.FORGOTTEN.value, "reason": reason}
        for sid, key, reason in conn.execute(
            select(TOMBSTONES.c.session_id, TOMBSTONES.c.session_key, TOMBSTONES.c.reason)
            .where(TOMBSTONES.c.agent == agent)
            .order_by(TOMBSTONES.c.session_id)
        )
    ]


def _last_runs(conn: Connection, agent: str) -> dict[str, Any]:
    """Each phase's latest run (the runs in id order, later ones overwriting)."""
    last_runs: dict[str, Any] = {}
    for phases, started, ended, outcome, summary in conn.execute(
        select(RUNS.c.phases, RUNS.c.started_at, RUNS.c.ended_at, RUNS.c.outcome, RUNS.c.summary)
        # a run skipped because the agent was busy did not run its phases
        .where(and_(RUNS.c.agent == agent, RUNS.c.outcome != Outcome.SKIPPED))
        .order_by(RUNS.c.id)
    ):
        corpus_lines = _light_lines(summary)
        for phase in phases.split(","):
            last_runs[phase] = {
                "started_at": _iso(started),
                "ended_at": _iso(ended),
                "outcome": outcome,
                "reason": None if outcome in (Outcome.OK, Outcome.RUNNING) else _reason(summary),
                "corpus_lines": corpus_lines,
            }
    return last_runs
