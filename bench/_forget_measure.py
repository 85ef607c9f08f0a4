"""What the forget bench measures (imported from bench/): the state's counts, a timed purge
(dry run, then real), and a profiled one with SQL timing."""

from __future__ import annotations

import cProfile
import random
import re
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from _forget_data import (
    AGENT,
)
from _profile import top_functions
from sqlalchemy import Engine, event, func, select, text

from dreaming import runner
from dreaming.app import App
from dreaming.forget import Selector
from dreaming.memory import memory_file
from dreaming.store.tables import ORIGINS

# -- measuring --------------------------------------------------------------------------------


def _scalar(engine: Engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def state_facts(app: App) -> dict[str, Any]:
    engine = app.engine(AGENT)
    db = app.paths.database(AGENT)
    wal = db.with_name(db.name + "-wal")
    memory = app.paths.memory_file(AGENT)
    facts: dict[str, Any] = {
        table: _scalar(engine, f"SELECT count(*) FROM {table}")
        for table in (
            "sessions",
            "corpus_lines",
            "candidates",
            "candidate_evidence",
            "entries",
            "origins",
            "entry_evidence",
            "llm_calls",
            "memory_backups",
            "runs",
        )
    }
    # Managed entries in either form (compact lines or legacy blocks).
    facts["memory_md_blocks"] = len(memory_file.read(memory).blocks)
    facts["memory_md_bytes"] = memory.stat().st_size
    facts["llm_calls_bytes"] = _scalar(
        engine, "SELECT coalesce(sum(length(request) + length(response)), 0) FROM llm_calls"
    )
    facts["backups_bytes"] = _scalar(
        engine, "SELECT coalesce(sum(length(content)), 0) FROM memory_backups"
    )
    facts["db_bytes"] = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return facts


def pick_sessions(app: App, n: int, seed: int) -> list[tuple[str, int]]:
    """(session id, entries it supports) of `n` sessions supporting entries, seeded."""
    with app.engine(AGENT).connect() as conn:
        rows = conn.execute(
            select(ORIGINS.c.session_id, func.count())
            .where(ORIGINS.c.agent == AGENT)
            .group_by(ORIGINS.c.session_id)
            .order_by(ORIGINS.c.session_id)
        ).all()
    return [(s, int(c)) for s, c in random.Random(f"{seed}/pick").sample(rows, min(n, len(rows)))]


def _purge_row(
    sid: str, supports: int, dry_s: float, real: dict[str, Any], real_s: float
) -> dict[str, Any]:
    counts = real["counts"]
    return {
        "session": sid,
        "supports_entries": supports,
        "dry_s": round(dry_s, 3),
        "real_s": round(real_s, 3),
        "entries_removed": len(real["entries_removed"]),
        "mixed_lineage": len(real["mixed_lineage"]),
        "corpus_lines": counts.get("corpus_lines", 0),
        "candidates": counts.get("candidates", 0),
        "candidate_evidence": counts.get("candidate_evidence", 0),
        "origins": counts.get("origins", 0),
        "llm_calls": counts.get("llm_calls", 0),
        "memory_backups": counts.get("memory_backups", 0),
        "run_summaries": counts.get("run_summaries", 0),
        "file_lines_removed": sum(real["file_lines_removed"].values()),
        "counts": counts,
    }


def purge_once(app: App, sid: str, supports: int) -> dict[str, Any]:
    selector = Selector(sessions=(sid,))
    t0 = time.perf_counter()
    dry = runner.forget(app, AGENT, selector, dry_run=True).to_dict()
    dry_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    real = runner.forget(app, AGENT, selector, dry_run=False).to_dict()
    real_s = time.perf_counter() - t0
    row = _purge_row(sid, supports, dry_s, real, real_s)
    row["dry_matches_real"] = dry["counts"] == real["counts"] and (
        dry["entries_removed"] == real["entries_removed"]
    )
    return row


# -- profiling --------------------------------------------------------------------------------

_IN_LIST = re.compile(r"\((?:\?|__\[POSTCOMPILE_\w+\])(?:, \?)+\)")


class SQLTimer:
    """Wall time of every statement the engine runs, grouped by statement text."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.stats: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])

    def _before(self, conn: Any, cursor: Any, stmt: str, params: Any, ctx: Any, many: bool) -> None:
        conn.info.setdefault("bench_t0", []).append(time.perf_counter())

    def _after(self, conn: Any, cursor: Any, stmt: str, params: Any, ctx: Any, many: bool) -> None:
        elapsed = time.perf_counter() - conn.info["bench_t0"].pop()
        key = _IN_LIST.sub("(?, ...)", " ".join(stmt.split()))
        s = self.stats[("executemany " if many else "") + key]
        s[0] += 1
        s[1] += elapsed
        s[2] += len(params) if many and params else 1

    @contextmanager
    def active(self) -> Iterator[None]:
        event.listen(self.engine, "before_cursor_execute", self._before)
        event.listen(self.engine, "after_cursor_execute", self._after)
        try:
            yield
        finally:
            event.remove(self.engine, "before_cursor_execute", self._before)
            event.remove(self.engine, "after_cursor_execute", self._after)

    def top(self, limit: int) -> list[dict[str, Any]]:
        rows = sorted(self.stats.items(), key=lambda kv: -kv[1][1])[:limit]
        return [
            {"calls": int(n), "total_s": round(t, 3), "rows_bound": int(r), "sql": sql[:160]}
            for sql, (n, t, r) in rows
        ]


def profile_purge(app: App, sid: str, supports: int, limit: int) -> dict[str, Any]:
    timer = SQLTimer(app.engine(AGENT))
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    with timer.active():
        prof.enable()
        real = runner.forget(app, AGENT, Selector(sessions=(sid,)), dry_run=False).to_dict()
        prof.disable()
    wall = time.perf_counter() - t0
    row = _purge_row(sid, supports, 0.0, real, wall)
    sql_total = sum(t for _, t, _ in timer.stats.values())
    return {
        "session": sid,
        "wall_s_under_profiler": round(wall, 3),
        "sql_total_s": round(sql_total, 3),
        "sql_statements": int(sum(n for n, _, _ in timer.stats.values())),
        "entries_removed": row["entries_removed"],
        "functions": top_functions(prof, limit, ("cumulative, dreaming/ only", "own time")),
        "sql": timer.top(limit),
    }
