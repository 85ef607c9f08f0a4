"""Recording a phase's LLM calls: the one way deep and REM put their attempts in the call
log and the day's spend.

It belongs with :func:`dreaming.llm.calls.record_calls` and can move there; it lives here
while that module is being reshaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine

from dreaming.llm import CallRecord
from dreaming.llm.calls import CallTotals, record_calls


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
