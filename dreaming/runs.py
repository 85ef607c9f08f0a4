"""Run records: every phase run is written down when it starts and when it ends."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, insert, update

from dreaming.store.models import RunRow

RUNS = RunRow.__table__  # type: ignore[attr-defined]


def utcnow() -> datetime:
    return datetime.now(UTC)


def start_run(engine: Engine, agent: str, phases: list[str], job: str | None = None) -> int:
    with engine.begin() as conn:
        result = conn.execute(
            insert(RUNS)
            .values(agent=agent, job=job, phases=",".join(phases), started_at=utcnow())
            .returning(RUNS.c.id)
        )
        return int(result.scalar_one())


def finish_run(engine: Engine, run_id: int, outcome: str, summary: dict[str, Any]) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(RUNS)
            .where(RUNS.c.id == run_id)
            .values(ended_at=utcnow(), outcome=outcome, summary=json.dumps(summary, default=str))
        )
