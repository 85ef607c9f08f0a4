"""Many rows through one statement, at the driver's cost on SQLite.

`conn.execute(stmt, rows)` hands each row of an executemany to SQLAlchemy's per-row,
per-parameter processing (`construct_params`, then every column's bind processor, then a
tuple for the driver): at a fleet agent's thousands of evidence, candidate and lineage rows
that was a twentieth of its night, ten times what SQLite spent storing them. `execute_many`
compiles the statement once per set of row keys, as SQLAlchemy would, and hands sqlite3 the
rows as tuples, each value through the same bind processor SQLAlchemy would have used (or
an equivalent shown to write the same text, see `_fast`), so the stored rows are the same.

It falls back to `conn.execute` wherever that would do more than bind the given values:
another backend (PostgreSQL keeps the path its tests cover), a statement whose compiled
form needs a parameter the rows do not hold (a Python-side default, an expanding IN), or a
named paramstyle.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, DateTime, Dialect
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.types import TypeDecorator

Converter = Callable[[Any], Any]
_NOTHING = object()  # no value converted yet

# (statement, row keys) -> (the dialect it was compiled for, its plan or None: fall back).
# Statements are module-level constants (`dialect.insert_ignore` and the like), so this
# stays as small as the code's set of bulk statements.
_PLANS: dict[tuple[ClauseElement, tuple[str, ...]], tuple[Dialect, _Plan | None]] = {}
_lock = threading.Lock()
_MAX_PLANS = 256


class _Plan:
    """A statement compiled for one set of row keys: its SQL, the keys in the order its `?`
    marks take them, and the converters of the values that need one (by position)."""

    __slots__ = ("converted", "get", "sql")

    def __init__(self, sql: str, order: Sequence[str], converted: list[tuple[int, Converter]]):
        self.sql = sql
        getter = itemgetter(*order)
        self.get: Callable[[Mapping[str, Any]], tuple[Any, ...]] = (
            getter if len(order) > 1 else lambda row: (getter(row),)
        )
        self.converted = converted

    def params(self, rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
        get = self.get
        if not self.converted:
            return [get(r) for r in rows]
        # A value seen in the row before is converted once: a batch's rows share one `now`
        # (updated_at, first_seen, last_read). By identity, within this call: the rows are
        # built, so an object holds the same value in every row it is in.
        last: list[tuple[Any, Any]] = [(_NOTHING, None)] * len(self.converted)
        out = []
        for r in rows:
            values = list(get(r))
            for n, (i, convert) in enumerate(self.converted):
                value = values[i]
                seen = last[n]
                if seen[0] is value:
                    values[i] = seen[1]
                else:
                    values[i] = converted = convert(value)
                    last[n] = (value, converted)
            out.append(tuple(values))
        return out


def execute_many(conn: Connection, stmt: Executable, rows: Sequence[Mapping[str, Any]]) -> None:
    """`conn.execute(stmt, rows)`, the same rows stored, without SQLAlchemy's per-row work
    where it can be skipped. Every row holds the same keys (as executemany requires)."""
    if not rows:
        return
    plan = _plan(conn.dialect, stmt, tuple(rows[0])) if isinstance(stmt, ClauseElement) else None
    if plan is None:
        conn.execute(stmt, list(rows))
        return
    conn.exec_driver_sql(plan.sql, plan.params(rows))


def _plan(dialect: Dialect, stmt: ClauseElement, keys: tuple[str, ...]) -> _Plan | None:
    if dialect.name != "sqlite":
        return None
    cache_key = (stmt, keys)
    cached = _PLANS.get(cache_key)
    if cached is not None and cached[0] is dialect:
        return cached[1]
    plan = _compile(dialect, stmt, keys)
    with _lock:
        if len(_PLANS) >= _MAX_PLANS:  # statements built per call: keep memory bounded
            _PLANS.clear()
        _PLANS[cache_key] = (dialect, plan)
    return plan


def _compile(dialect: Dialect, stmt: ClauseElement, keys: tuple[str, ...]) -> _Plan | None:
    compiled = stmt.compile(dialect=dialect, column_keys=list(keys))
    if not isinstance(compiled, SQLCompiler):
        return None
    order = compiled.positiontup
    if not compiled.positional or order is None or not set(order) <= set(keys):
        return None  # a default, an expanding or a literal parameter: SQLAlchemy's work
    if getattr(compiled, "insert_prefetch", None) or getattr(compiled, "update_prefetch", None):
        return None
    converted: list[tuple[int, Converter]] = []
    for i, name in enumerate(order):
        bind = compiled.binds[name]
        if bind.expanding or bind.callable is not None:
            return None
        processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if processor is not None:
            converted.append((i, _fast(processor, bind.type)))
    return _Plan(compiled.string, order, converted)


def _fast(processor: Converter, type_: Any) -> Converter:
    """The bind processor of a time column, or a cheaper function seen to write exactly what
    it writes: SQLite's default storage format is datetime's own `isoformat(" ",
    "microseconds")` of the naive UTC moment, three times cheaper than the processor's way
    there (`UTCDateTime` first makes the moment naive UTC, then SQLite's DATETIME formats
    it field by field)."""
    base = type_.impl_instance if isinstance(type_, TypeDecorator) else type_
    if not isinstance(base, DateTime):  # (a TypeDecorator's python_type is `object`)
        return processor
    probes = (
        datetime(987, 6, 5, 4, 3, 2, 1, tzinfo=timezone(timedelta(hours=5))),
        datetime(2026, 3, 1, 9, 0, tzinfo=UTC),  # whole seconds: a fraction all the same
        datetime(2026, 3, 1, 9, 0, 0, 500),  # naive: UTC already
        None,
    )
    try:
        same = all(processor(p) == iso_time(p) for p in probes)
    except (TypeError, ValueError, AttributeError):
        return processor
    return iso_time if same else processor


def iso_time(ts: datetime | None) -> str | None:
    """A moment as SQLite's DATETIME stores it: naive UTC, microseconds always written."""
    if ts is None:
        return None
    if ts.tzinfo is not None and ts.tzinfo is not UTC:
        ts = ts.astimezone(UTC)
    return ts.replace(tzinfo=None).isoformat(" ", "microseconds")


def time_text(dialect: Dialect, type_: Any) -> Converter:
    """What a time column's bind processor makes of a moment, for the driver (see `_fast`)."""
    processor = type_.dialect_impl(dialect).bind_processor(dialect)
    if processor is None:
        return lambda ts: ts
    return _fast(processor, type_)
