"""The LLM call log read back, for `dreaming logs`: every attempt REM and deep made, with the
prompt and reply as stored. `dreaming.llm.calls.record_calls` writes it; this only reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select

from dreaming.store.tables import LLM_CALLS


@dataclass(frozen=True)
class LoggedCall:
    """One row of `llm_calls`: one HTTP attempt, or one the budget refused before sending.
    Ids are per agent database (a fleet's shared database numbers all agents together)."""

    id: int
    agent: str
    run_id: int | None  # None: a dry run's calls, which belong to no run record
    model: str
    request: str  # the chat messages as JSON text
    response: str | None  # the reply text, or the server's error body
    input_tokens: int
    output_tokens: int
    cost_usd: float | None  # None: the profile has no price
    duration_s: float
    attempt: int
    outcome: str
    error: str | None
    http_status: int | None
    created_at: datetime

    def messages(self) -> list[dict[str, Any]] | None:
        """The request as a list of chat messages; None when it was stored in another shape
        (a row written by another version, or edited by hand)."""
        try:
            parsed = json.loads(self.request)
        except ValueError:
            return None
        if isinstance(parsed, list) and all(isinstance(m, dict) for m in parsed):
            return parsed
        return None

    def to_dict(self) -> dict[str, Any]:
        messages = self.messages()
        return {
            "id": self.id,
            "agent": self.agent,
            "run_id": self.run_id,
            "model": self.model,
            "created_at": self.created_at.isoformat(),
            "duration_s": self.duration_s,
            "outcome": self.outcome,
            "attempt": self.attempt,
            "http_status": self.http_status,
            "error": self.error,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "request": messages if messages is not None else self.request,
            "response": self.response,
        }


def _call(row: Any) -> LoggedCall:
    return LoggedCall(
        id=int(row.id),
        agent=row.agent,
        run_id=None if row.run_id is None else int(row.run_id),
        model=row.model,
        request=row.request,
        response=row.response,
        input_tokens=int(row.input_tokens),
        output_tokens=int(row.output_tokens),
        cost_usd=None if row.cost_usd is None else float(row.cost_usd),
        duration_s=float(row.duration_s),
        attempt=int(row.attempt),
        outcome=row.outcome,
        error=row.error,
        http_status=None if row.status is None else int(row.status),
        created_at=row.created_at,
    )


def list_calls(
    engine: Engine,
    agents: Sequence[str] | None,
    *,
    limit: int | None = None,
    run_id: int | None = None,
) -> list[LoggedCall]:
    """The calls of `agents` (None: every agent in the database), newest first, at most
    `limit`, only those of run `run_id` when given."""
    query = select(LLM_CALLS)
    if agents is not None:
        query = query.where(LLM_CALLS.c.agent.in_(list(agents)))
    if run_id is not None:
        query = query.where(LLM_CALLS.c.run_id == run_id)
    # Ids follow the order calls were recorded in; the primary key sorts a fleet's table
    # without a scan, where created_at has no index.
    query = query.order_by(LLM_CALLS.c.id.desc())
    if limit is not None:
        query = query.limit(limit)
    with engine.connect() as conn:
        return [_call(r) for r in conn.execute(query)]


def newest_first(calls: Sequence[LoggedCall]) -> list[LoggedCall]:
    """Calls from several databases in one order: by when each attempt started."""
    return sorted(calls, key=lambda c: (c.created_at, c.agent, c.id), reverse=True)
