"""What `dreaming status` reports for an agent, read from its database."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, and_, func, select

from dreaming.store.models import (
    CandidateRow,
    CorpusLineRow,
    EntryRow,
    RunRow,
    SessionRow,
    SpendRow,
    StateRow,
    TombstoneRow,
)

SESSIONS = SessionRow.__table__  # type: ignore[attr-defined]
LINES = CorpusLineRow.__table__  # type: ignore[attr-defined]
CANDIDATES = CandidateRow.__table__  # type: ignore[attr-defined]
ENTRIES = EntryRow.__table__  # type: ignore[attr-defined]
RUNS = RunRow.__table__  # type: ignore[attr-defined]
STATE = StateRow.__table__  # type: ignore[attr-defined]
TOMBSTONES = TombstoneRow.__table__  # type: ignore[attr-defined]
SPEND = SpendRow.__table__  # type: ignore[attr-defined]


def utc_day(now: datetime | None = None) -> str:
    """The day the daily LLM budget counts in: the UTC date."""
    return (now or datetime.now(UTC)).astimezone(UTC).date().isoformat()


def spend_on(conn: Any, agent: str, day: str, cap_usd: float | None = None) -> dict[str, Any]:
    """What the agent's LLM calls cost on `day`, against the daily cap (None: no cap)."""
    row = conn.execute(
        select(SPEND.c.usd, SPEND.c.tokens, SPEND.c.calls).where(
            and_(SPEND.c.agent == agent, SPEND.c.day == day)
        )
    ).first()
    usd, tokens, calls = (float(row[0]), int(row[1]), int(row[2])) if row else (0.0, 0, 0)
    return {
        "day": day,
        "usd": round(usd, 6),
        "tokens": tokens,
        "calls": calls,
        "cap_usd": cap_usd,
        "remaining_usd": None if cap_usd is None else round(max(0.0, cap_usd - usd), 6),
    }


def agent_status(
    engine: Engine, agent: str, *, daily_cap_usd: float | None = None, day: str | None = None
) -> dict[str, Any]:
    """`daily_cap_usd` is the settings' `budget.daily_max_usd`; `day` defaults to today (UTC)."""
    with engine.connect() as conn:
        spend = spend_on(conn, agent, day or utc_day(), daily_cap_usd)
        by_status: dict[str, int] = dict(
            conn.execute(
                select(SESSIONS.c.status, func.count())
                .where(SESSIONS.c.agent == agent)
                .group_by(SESSIONS.c.status)
            ).all()
        )
        not_admitted = [
            {"session_id": sid, "session_key": key, "status": st, "reason": reason}
            for sid, key, st, reason in conn.execute(
                select(
                    SESSIONS.c.session_id,
                    SESSIONS.c.session_key,
                    SESSIONS.c.status,
                    SESSIONS.c.reason,
                )
                .where(and_(SESSIONS.c.agent == agent, SESSIONS.c.status != "admitted"))
                .order_by(SESSIONS.c.session_id)
            )
        ]
        unclassified = [
            sid
            for (sid,) in conn.execute(
                select(SESSIONS.c.session_id)
                .where(
                    and_(
                        SESSIONS.c.agent == agent,
                        SESSIONS.c.status == "admitted",
                        SESSIONS.c.reason == "unclassified",
                    )
                )
                .order_by(SESSIONS.c.session_id)
            )
        ]
        forgotten = [
            {"session_id": sid, "session_key": key, "status": "forgotten", "reason": reason}
            for sid, key, reason in conn.execute(
                select(TOMBSTONES.c.session_id, TOMBSTONES.c.session_key, TOMBSTONES.c.reason)
                .where(TOMBSTONES.c.agent == agent)
                .order_by(TOMBSTONES.c.session_id)
            )
        ]
        candidates: dict[str, int] = dict(
            conn.execute(
                select(CANDIDATES.c.status, func.count())
                .where(CANDIDATES.c.agent == agent)
                .group_by(CANDIDATES.c.status)
            ).all()
        )
        entries = conn.execute(
            select(func.count()).where(and_(ENTRIES.c.agent == agent, ENTRIES.c.status == "live"))
        ).scalar_one()
        lines = conn.execute(select(func.count()).where(LINES.c.agent == agent)).scalar_one()
        clock = conn.execute(
            select(STATE.c.value).where(and_(STATE.c.agent == agent, STATE.c.key == "clock"))
        ).scalar()
        last_runs: dict[str, Any] = {}
        for phases, started, ended, outcome, summary in conn.execute(
            select(
                RUNS.c.phases, RUNS.c.started_at, RUNS.c.ended_at, RUNS.c.outcome, RUNS.c.summary
            )
            # a run skipped because the agent was busy did not run its phases
            .where(and_(RUNS.c.agent == agent, RUNS.c.outcome != "skipped"))
            .order_by(RUNS.c.id)
        ):
            for phase in phases.split(","):
                last_runs[phase] = {
                    "started_at": started,
                    "ended_at": ended,
                    "outcome": outcome,
                    "corpus_lines": json.loads(summary or "{}").get("corpus_lines"),
                }
    return {
        "agent": agent,
        "clock": clock,
        "sessions": {k: by_status.get(k, 0) for k in ("admitted", "excluded", "internal")}
        | {"forgotten": len(forgotten)},
        "not_admitted": not_admitted + [f for f in forgotten if f not in not_admitted],
        # Admitted as untrusted evidence only: nothing says whose chat they are.
        "unclassified": unclassified,
        "corpus_lines": lines,
        "candidates": candidates,
        "pending_candidates": candidates.get("pending", 0),
        "entries": entries,
        "last_runs": last_runs,
        "spend_today": spend,
    }
