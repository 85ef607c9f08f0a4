"""Run records: every phase run is written down when it starts and when it ends, and read
back for `dreaming runs`."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Engine, and_, bindparam, delete, func, insert, select, update

from dreaming.llm import UNCHARGED_OUTCOMES
from dreaming.store.tables import LLM_CALLS, RUNS


class Outcome(StrEnum):
    """How a run ended: the `outcome` of its run record (and of one agent's result)."""

    RUNNING = "running"  # not ended yet (or its process died: see ABANDONED)
    OK = "ok"
    BUDGET = "budget"  # deep stopped on its budget; the rest waits for the next run
    DEGRADED = "degraded"  # a fallback decided what the model should have (reason given)
    PREVIEW = "preview"  # a dry run: nothing written
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    SKIPPED = "skipped"  # another run held the agent's lock (or, queued: a duplicate)
    QUEUED = "queued"  # handed to the fleet queue; a worker runs it
    ABANDONED = "abandoned"  # found still running under the agent's lock: its process died


def utcnow() -> datetime:
    return datetime.now(UTC)


def start_run(engine: Engine, agent: str, phases: list[str], job: str | None = None) -> int:
    row = {
        "agent": agent,
        "job": job,
        "phases": ",".join(phases),
        "started_at": utcnow(),
        "worker": worker_name(),
    }
    with engine.begin() as conn:
        return int(conn.execute(_START, row).scalar_one())


def close_abandoned(engine: Engine, agent: str) -> int:
    """Mark the agent's runs still `running` as `abandoned`. Called under the agent's lock,
    so no live process owns them: their process died (a killed worker, a power cut)."""
    with engine.begin() as conn:
        return int(conn.execute(_ABANDON, {"b_agent": agent}).rowcount or 0)


def worker_name() -> str:
    """Which process ran a run: host and pid, so a fleet's runs can be told apart."""
    return f"{socket.gethostname()}:{os.getpid()}"


def finish_run(engine: Engine, run_id: int, outcome: Outcome, summary: dict[str, Any]) -> None:
    row = {
        "b_id": run_id,
        "ended_at": utcnow(),
        "outcome": outcome,
        "summary": json.dumps(summary, default=str),
    }
    with engine.begin() as conn:
        conn.execute(_FINISH, row)


# Every night runs these: built once (see `store.compiled`).
_START = insert(RUNS).returning(RUNS.c.id)
_ABANDON = (
    update(RUNS)
    .where(and_(RUNS.c.agent == bindparam("b_agent"), RUNS.c.outcome == Outcome.RUNNING))
    .values(outcome=Outcome.ABANDONED)
)
_FINISH = update(RUNS).where(RUNS.c.id == bindparam("b_id"))
_SUMMARY = select(RUNS.c.summary).where(RUNS.c.id == bindparam("run"))


def run_has_calls(engine: Engine, agent: str, run_id: int) -> bool:
    """Whether the run left any LLM call record (sent or refused by the budget)."""
    with engine.connect() as conn:
        found = conn.execute(
            select(LLM_CALLS.c.id)
            .where(and_(LLM_CALLS.c.agent == agent, LLM_CALLS.c.run_id == run_id))
            .limit(1)
        ).first()
    return found is not None


def delete_run(engine: Engine, run_id: int) -> None:
    """Drop a run record that turned out to have nothing to say (a preview that called no
    model)."""
    with engine.begin() as conn:
        conn.execute(delete(RUNS).where(RUNS.c.id == run_id))


def record_skipped(
    engine: Engine, agent: str, phases: list[str], job: str | None, summary: dict[str, Any]
) -> int:
    """A run that did not happen because another run held the agent (outcome `skipped`)."""
    run_id = start_run(engine, agent, phases, job)
    finish_run(engine, run_id, Outcome.SKIPPED, summary | {"run_id": run_id})
    return run_id


# -- reading runs back ---------------------------------------------------------------------

PROMOTING_ACTIONS = ("add", "merge", "supersede")


@dataclass(frozen=True)
class LLMUsage:
    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True)
class RunRecord:
    """One row of `runs`, with its summary parsed. Ids are per agent database."""

    id: int
    agent: str
    job: str | None
    phases: tuple[str, ...]
    started_at: datetime
    ended_at: datetime | None
    outcome: str
    summary: dict[str, Any]
    usage: LLMUsage | None = None  # from the LLM call log, when it has rows for the run

    @property
    def duration_s(self) -> float | None:
        if self.ended_at is None:
            return None
        return round((self.ended_at - self.started_at).total_seconds(), 3)

    def digest(self) -> dict[str, Any]:
        """The listing's numbers: pending candidates after light, promotions (deep adds,
        merges and supersedes), LLM calls/tokens/cost, and skipped transcript input."""
        phases = self.summary.get("phases") or {}
        light = phases.get("light") or {}
        deep = phases.get("deep") or {}
        rem = phases.get("rem") or {}
        actions = deep.get("actions") or {}
        llm = deep.get("llm") or {}
        usage = self.usage or LLMUsage(
            calls=int(llm.get("calls", 0)) + int(rem.get("llm_calls", 0)),
            tokens=int(llm.get("input_tokens", 0)) + int(llm.get("output_tokens", 0)),
            cost_usd=float(llm.get("cost_usd") or 0.0),
        )
        return {
            "id": self.id,
            "agent": self.agent,
            "job": self.job,
            "phases": list(self.phases),
            "started_at": self.started_at.isoformat(),
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "duration_s": self.duration_s,
            "outcome": self.outcome,
            "dry_run": bool(self.summary.get("dry_run", False)),
            "candidates": (light.get("candidates") or {}).get("pending") if light else None,
            "promotions": sum(int(actions.get(a, 0)) for a in PROMOTING_ACTIONS) if deep else None,
            "llm_calls": usage.calls,
            "tokens": usage.tokens,
            "cost_usd": round(usage.cost_usd, 6),
            "skips": sum(int(v) for v in (light.get("skips") or {}).values()),
            "reason": self.summary.get("reason") or self.summary.get("error"),
        }

    def to_dict(self) -> dict[str, Any]:
        return self.digest() | {"summary": self.summary}


def _record(row: Any, usage: dict[int, LLMUsage]) -> RunRecord:
    try:
        summary = json.loads(row.summary or "{}")
    except ValueError:
        summary = {"unreadable_summary": row.summary}
    return RunRecord(
        id=int(row.id),
        agent=row.agent,
        job=row.job,
        phases=tuple(p for p in (row.phases or "").split(",") if p),
        started_at=row.started_at,
        ended_at=row.ended_at,
        outcome=row.outcome,
        summary=summary if isinstance(summary, dict) else {"summary": summary},
        usage=usage.get(int(row.id)),
    )


def _usage(conn: Any, agent: str, run_ids: list[int]) -> dict[int, LLMUsage]:
    if not run_ids:
        return {}
    rows = conn.execute(
        select(
            LLM_CALLS.c.run_id,
            func.count(),
            func.coalesce(func.sum(LLM_CALLS.c.input_tokens + LLM_CALLS.c.output_tokens), 0),
            func.coalesce(func.sum(LLM_CALLS.c.cost_usd), 0.0),
        )
        .where(
            and_(
                LLM_CALLS.c.agent == agent,
                LLM_CALLS.c.run_id.in_(run_ids),
                LLM_CALLS.c.outcome.not_in(UNCHARGED_OUTCOMES),  # never sent: nothing spent
            )
        )
        .group_by(LLM_CALLS.c.run_id)
    )
    return {int(r[0]): LLMUsage(int(r[1]), int(r[2]), float(r[3])) for r in rows}


def list_runs(engine: Engine, agent: str, limit: int | None = None) -> list[RunRecord]:
    """The agent's runs, newest first."""
    with engine.connect() as conn:
        query = select(RUNS).where(RUNS.c.agent == agent).order_by(RUNS.c.id.desc())
        if limit is not None:
            query = query.limit(limit)
        rows = list(conn.execute(query))
        usage = _usage(conn, agent, [int(r.id) for r in rows])
    return [_record(r, usage) for r in rows]


def get_run(engine: Engine, agent: str, run_id: int) -> RunRecord | None:
    with engine.connect() as conn:
        row = conn.execute(
            select(RUNS).where(and_(RUNS.c.agent == agent, RUNS.c.id == run_id))
        ).first()
        if row is None:
            return None
        usage = _usage(conn, agent, [run_id])
    return _record(row, usage)


def redact_summaries(
    conn: Connection, run_ids: Sequence[int], redact: Callable[[Any], Any]
) -> None:
    """A purge's part here: the summaries of `run_ids` are kept, rewritten by `redact` (which
    replaces the values that quote purged text)."""
    for run_id in run_ids:
        summary = conn.execute(select(RUNS.c.summary).where(RUNS.c.id == run_id)).scalar_one()
        redacted = redact(json.loads(summary or "{}"))
        conn.execute(update(RUNS).where(RUNS.c.id == run_id).values(summary=json.dumps(redacted)))


def summaries_carrying(
    conn: Connection, agent: str, carries: Callable[[str | None], bool]
) -> list[int]:
    """Ids of the agent's runs whose summary `carries` (purged text)."""
    rows = conn.execute(select(RUNS.c.id, RUNS.c.summary).where(RUNS.c.agent == agent))
    return [i for i, summary in rows if carries(summary)]


# What a purge writes in place of the theme words and diary text of a REM run whose window
# read a purged session (the same mark forget leaves for any redacted value).
FORGOTTEN = "[forgotten]"


def rem_summaries(conn: Connection, agent: str) -> list[tuple[int, dict[str, Any]]]:
    """(run id, REM phase summary) of every recorded run of the agent that ran REM, dry runs
    included: what a purge checks for themes and diary text derived from its sessions."""
    out: list[tuple[int, dict[str, Any]]] = []
    rows = conn.execute(
        select(RUNS.c.id, RUNS.c.summary).where(
            and_(RUNS.c.agent == agent, RUNS.c.summary.is_not(None))
        )
    )
    for run_id, text in rows:
        try:
            summary = json.loads(text)
        except ValueError:
            continue
        phases = summary.get("phases") if isinstance(summary, dict) else None
        rem = phases.get("rem") if isinstance(phases, dict) else None
        if isinstance(rem, dict):
            out.append((int(run_id), rem))
    return out


def rem_summary(conn: Connection, run_id: int) -> dict[str, Any] | None:
    """The REM phase summary of run `run_id` as recorded, or None (no such run, no REM, a
    summary a purge redacted, or one that cannot be read)."""
    text = conn.execute(_SUMMARY, {"run": run_id}).scalar()
    try:
        summary = json.loads(text) if text else None
    except ValueError:
        return None
    phases = summary.get("phases") if isinstance(summary, dict) else None
    rem = phases.get("rem") if isinstance(phases, dict) else None
    return rem if isinstance(rem, dict) and not rem.get("forgotten") else None


def forget_rem(summary: Any) -> Any:
    """`summary` with its REM themes and diary text replaced by FORGOTTEN: `runs show` says
    a theme was forgotten, never what it was. Counts stay; the sessions read stay (their ids
    are tombstones' too)."""
    if not isinstance(summary, dict):
        return summary
    rem = (summary.get("phases") or {}).get("rem")
    if not isinstance(rem, dict):
        return summary
    rem["themes"] = [
        {**t, "concept": FORGOTTEN, "related": []} if isinstance(t, dict) else FORGOTTEN
        for t in rem.get("themes") or []
    ]
    for key in ("diary_text", "example", "quotes"):
        if rem.get(key):
            rem[key] = FORGOTTEN
    rem["forgotten"] = True
    return summary
