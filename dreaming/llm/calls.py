"""The LLM call log and spend: every attempt written down, each UTC day's spend per agent,
and a run's budget built from what is left of the day. The phases that call a model (REM,
deep) record through here and receive an `LLMAccess`: how to make a client, and the run's
budget, as one value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, and_, select

from dreaming.llm._day import utc_today
from dreaming.llm._records import CallRecord
from dreaming.llm.budget import Budget, BudgetSettings
from dreaming.store.dialect import upsert
from dreaming.store.tables import LLM_CALLS, SPEND

if TYPE_CHECKING:
    from dreaming.llm._client import LLMClient
    from dreaming.llm.ledger import Ledger


@dataclass(frozen=True)
class LLMAccess:
    """What a phase needs to ask a model: clients for the run's profile (sharing the run's
    circuit breaker) and the run's budget, which REM and deep draw on together."""

    client_factory: Callable[[], LLMClient]
    budget: Budget


@dataclass(frozen=True)
class CallTotals:
    """What a list of attempts cost; attempts never sent (over budget, unreachable) count
    for nothing."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0

    @classmethod
    def of(cls, records: Sequence[CallRecord]) -> CallTotals:
        sent = [c for c in records if c.outcome.charged]
        return cls(
            calls=len(sent),
            input_tokens=sum(c.input_tokens for c in sent),
            output_tokens=sum(c.output_tokens for c in sent),
            usd=sum(c.cost_usd or 0.0 for c in sent),
        )


def spent_today(conn: Connection, agent: str) -> tuple[float, int, int]:
    row = conn.execute(
        select(SPEND.c.usd, SPEND.c.tokens, SPEND.c.calls).where(
            and_(SPEND.c.agent == agent, SPEND.c.day == utc_today())
        )
    ).first()
    return (float(row[0]), int(row[1]), int(row[2])) if row else (0.0, 0, 0)


def record_calls(
    conn: Connection, agent: str, run_id: int | None, calls: Sequence[CallRecord]
) -> None:
    """Log every attempt and charge it to the day (what was spent was spent, dry run or not)."""
    if not calls:
        return
    conn.execute(
        LLM_CALLS.insert(),
        [
            {
                "agent": agent,
                "run_id": run_id,
                "model": c.model,
                "request": c.request,
                "response": c.response,
                "input_tokens": c.input_tokens,
                "output_tokens": c.output_tokens,
                "cost_usd": c.cost_usd,
                "duration_s": c.duration_s,
                "attempt": c.attempt,
                "outcome": c.outcome.value,
                "error": c.error,
                "status": c.http_status,
                "created_at": c.started_at,
            }
            for c in calls
        ],
    )
    t = CallTotals.of(calls)
    tokens = t.input_tokens + t.output_tokens
    conn.execute(
        upsert(conn, SPEND)
        .values(agent=agent, day=utc_today(), usd=t.usd, tokens=tokens, calls=t.calls)
        .on_conflict_do_update(
            index_elements=["agent", "day"],
            set_={
                "usd": SPEND.c.usd + t.usd,
                "tokens": SPEND.c.tokens + tokens,
                "calls": SPEND.c.calls + t.calls,
            },
        )
    )


def run_budget(
    engine: Engine, agent: str, settings: BudgetSettings, *, ledger: Ledger | None = None
) -> Budget:
    """A run's budget: its own limits, capped by what is left of the agent's day, and (in
    fleet mode) by the fleet's shared daily `ledger`, which every attempt reserves from."""
    with engine.connect() as conn:
        usd, tokens, calls = spent_today(conn, agent)
    budget = Budget.for_run(
        max_usd=settings.max_usd,
        max_tokens=settings.max_tokens,
        max_calls=settings.max_calls,
        daily_max_usd=settings.daily_max_usd,
        daily_max_tokens=settings.daily_max_tokens,
        spent_today_usd=usd,
        spent_today_tokens=tokens,
        calls_today=calls,
    )
    budget.ledger = ledger
    return budget


def forget_calls(conn: Connection, ids: Sequence[int]) -> None:
    """A purge's part here: the call records `ids`, which carry purged text, go."""
    if ids:
        conn.execute(LLM_CALLS.delete().where(LLM_CALLS.c.id.in_(ids)))


def calls_carrying(
    conn: Connection, agent: str, carries: Callable[[str | None], bool]
) -> list[int]:
    """Ids of the agent's call records whose request or response `carries` (purged text)."""
    c = LLM_CALLS.c
    rows = conn.execute(select(c.id, c.request, c.response).where(c.agent == agent))
    return [i for i, request, response in rows if carries(request) or carries(response)]


def log_calls(
    engine: Engine,
    agent: str,
    run_id: int | None,
    calls: Sequence[CallRecord],
    *,
    held: list[CallRecord] | None = None,
) -> CallTotals:
    """Record `calls` in a transaction of their own and return what they cost, for the
    phase's summary. With `held` (a dry run, whose own transaction is rolled back) they are
    kept there instead, for the caller to record once the rollback is done: what was spent
    was spent."""
    totals = CallTotals.of(calls)
    if held is not None:
        held.extend(calls)
        return totals
    with engine.begin() as conn:
        record_calls(conn, agent, run_id, calls)
    return totals
