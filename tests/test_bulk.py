"""`store.bulk.execute_many`: the rows it stores through the driver are the rows
`conn.execute(stmt, rows)` stores, on a real migrated SQLite file, and it takes the driver's
path for the statements the phases run in bulk (else it would cost without saving)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, bindparam, insert, select, text, update
from sqlalchemy.dialects import postgresql

import dreaming.store.bulk as bulk
from dreaming.ingest import sessions
from dreaming.ingest.candidates import _decided, _fold, _signals
from dreaming.memory import entry_index, journal
from dreaming.memory.lineage import _apply, _batch
from dreaming.store import open_engine
from dreaming.store.dialect import insert_ignore, upsert_replace
from dreaming.store.statuses import CandidateStatus
from dreaming.store.tables import CANDIDATE_EVIDENCE, CANDIDATES, FILE_CURSORS, RECALLS, SESSIONS

_PLUS5 = timezone(timedelta(hours=5))
_TIMES = (
    datetime(2026, 3, 1, 9, 0, tzinfo=_PLUS5),
    datetime(2026, 3, 1, 9, 0, 0, 123456, tzinfo=UTC),
    datetime(2026, 3, 1, 9, 0, 0, 7),  # naive: UTC by the package's convention
    None,
)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    eng = open_engine(tmp_path / "a.sqlite")
    yield eng
    eng.dispose()


def _candidate(n: int, ts: datetime | None) -> dict[str, Any]:
    return {
        "agent": "a",
        "key": f"k{n}",
        "text": f"text {n} — ünïcode",
        "tokens": "[]",
        "first_seen": ts,
        "last_seen": ts,
        "sessions": n,
        "days": 1,
        "owner_lines": 1,
        "agent_lines": 0,
        "untrusted_lines": 0,
        "system_lines": 0,
        "durable_cue": n % 2 == 0,
        "score": n / 3,
        "status": CandidateStatus.PENDING if n % 2 else CandidateStatus.SKIPPED,
        "evidence_count": 1,
        "decided_evidence": 0,
        "rem_boost": 0.0,
        "updated_at": ts or datetime(2026, 1, 1, tzinfo=UTC),
        "stale": n % 3 == 0,
        "salience": None,
        "features": None,
        "speaker": "Ann" if n % 2 else None,
    }


def _raw(conn: Connection, table: str, skip_id: bool = False) -> list[tuple[Any, ...]]:
    """The rows as SQLite holds them: the text and numbers themselves, no type processing
    (without the autoincrement id when `skip_id`, which differs between two inserts)."""
    rows = [tuple(r) for r in conn.exec_driver_sql(f"SELECT * FROM {table} ORDER BY 1, 2")]
    return [r[1:] for r in rows] if skip_id else rows


def _both_ways(
    engine: Engine,
    stmt: Any,
    rows: Sequence[Mapping[str, Any]],
    table: str,
    before: Sequence[Mapping[str, Any]] = (),
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The table after `stmt` with `rows` by SQLAlchemy, then by the driver, each time on a
    table holding just `before`."""
    out = []
    with engine.begin() as conn:
        for run in (conn.execute, lambda s, r: bulk.execute_many(conn, s, r)):
            conn.exec_driver_sql(f"DELETE FROM {table}")
            conn.exec_driver_sql(f"DELETE FROM sqlite_sequence WHERE name = '{table}'")
            if before:
                conn.execute(insert(CANDIDATES), list(before))
            run(stmt, list(rows))
            out.append(_raw(conn, table, skip_id=not before and table == "candidates"))
    return out[0], out[1]


def test_inserted_rows_are_the_same_as_sqlalchemys(engine: Engine) -> None:
    rows = [_candidate(n, _TIMES[n % len(_TIMES)]) for n in range(12)]
    expected, got = _both_ways(engine, CANDIDATES.insert(), rows, "candidates")
    assert got == expected
    assert len(got) == 12
    # the +05:00 moment is stored as naive UTC text, four hours earlier on the clock
    assert any("2026-03-01 04:00:00.000000" in map(str, row) for row in got)


def test_updates_and_upserts_are_the_same_as_sqlalchemys(engine: Engine) -> None:
    before = [_candidate(n, _TIMES[0]) for n in range(6)]
    changes = [
        {"cid": n, "new_status": CandidateStatus.PROMOTED, "decided": n, "at": _TIMES[n % 3]}
        for n in range(1, 7)
    ]
    expected, got = _both_ways(engine, _decided._SET_OUTCOME, changes, "candidates", before)
    assert got == expected
    status = [c.name for c in CANDIDATES.columns].index("status")
    assert [r[status] for r in got] == ["promoted"] * 6

    cursors = [
        {
            "agent": "a",
            "path": f"/p/{n}",
            "session_id": f"s{n}",
            "offset": n * 10**10,  # past 32 bits
            "line": n,
            "head": "abc",
            "size": n,
            "mtime_ns": 1_700_000_000_000_000_000 + n,
            "updated_at": _TIMES[n % 3],
        }
        for n in range(5)
    ]
    stmt = upsert_replace_for(engine)
    with engine.begin() as conn:
        bulk.execute_many(conn, stmt, cursors)
        replaced = [dict(c, line=c["line"] + 100) for c in cursors]
        bulk.execute_many(conn, stmt, replaced)
        lines = sorted(r.line for r in conn.execute(select(FILE_CURSORS.c.line)))
    assert lines == [100, 101, 102, 103, 104]


def upsert_replace_for(engine: Engine) -> Any:
    with engine.connect() as conn:
        columns = [c.name for c in FILE_CURSORS.columns if c.name not in ("agent", "path")]
        return upsert_replace(conn, FILE_CURSORS, ["agent", "path"], columns)


def test_text_statements_and_insert_or_ignore(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(CANDIDATES.insert(), [_candidate(1, _TIMES[1])])
        ignore = insert_ignore(conn, CANDIDATE_EVIDENCE)
        row = {
            "candidate_id": 1,
            "corpus_line_id": 9,
            "agent": "a",
            "session_id": "s",
            "day": "2026-03-01",
            "origin_class": "owner",
        }
        bulk.execute_many(conn, ignore, [row, dict(row, origin_class="agent")])  # a conflict
        assert _raw(conn, "candidate_evidence") == [(1, 9, "a", "s", "2026-03-01", "owner")]
        bulk.execute_many(
            conn, text("UPDATE candidates SET text = :t WHERE id = :i"), [{"t": "new", "i": 1}]
        )
        assert conn.execute(select(CANDIDATES.c.text)).scalar_one() == "new"


def test_values_read_back_through_sqlalchemy_are_the_values_written(engine: Engine) -> None:
    rows = [_candidate(n, _TIMES[n % len(_TIMES)]) for n in range(8)]
    with engine.begin() as conn:
        bulk.execute_many(conn, CANDIDATES.insert(), rows)
        back = conn.execute(select(CANDIDATES).order_by(CANDIDATES.c.id)).mappings().all()
    for row, stored in zip(rows, back, strict=True):
        for ts_col in ("first_seen", "last_seen", "updated_at"):
            assert stored[ts_col] == row[ts_col] or (
                row[ts_col] is not None
                and row[ts_col].tzinfo is None
                and stored[ts_col] == row[ts_col].replace(tzinfo=UTC)
            )
        assert stored["durable_cue"] is row["durable_cue"]
        assert stored["status"] == str(row["status"])


def test_the_phases_bulk_statements_take_the_drivers_path(engine: Engine) -> None:
    """Each statement with the keys its caller passes: a fallback here would be silent."""
    with engine.connect() as conn:
        d = conn.dialect
        cases: list[tuple[Any, Sequence[str]]] = [
            (_fold._INSERT_NEW, list(_fold_new_keys())),
            (insert_ignore(conn, RECALLS), [c.name for c in RECALLS.columns]),
            (insert_ignore(conn, CANDIDATE_EVIDENCE), [c.name for c in CANDIDATE_EVIDENCE.columns]),
            (_decided._SET_OUTCOME, ["cid", "new_status", "decided", "at"]),
            (_decided._SET_BOOST, ["cid", "boost"]),
            (_signals._SET_SALIENCE, ["cid", "salience", "features"]),
            (_signals._SET_SCORE, ["cid", "score"]),
            (sessions._INSERT_SESSION, [c.name for c in SESSIONS.columns]),
            (sessions._UPDATE_SESSION, ["b_agent", "b_sid", "last_read"]),
            (_batch._INSERT_ENTRY, _entry_keys()),
            (_apply._INSERT_DECISION, _decision_keys()),
            (journal._INSERT_JOURNAL, _journal_keys()),
            (entry_index._INSERT_FTS_AT, ["r", "a", "k", "t"]),
            (entry_index._INSERT_ROW_OF, ["r", "a", "k", "t"]),
        ]
        for stmt, keys in cases:
            assert bulk._plan(d, stmt, tuple(keys)) is not None, str(stmt)


def _fold_new_keys() -> list[str]:
    return [c.name for c in CANDIDATES.columns if c.name != "id"]


def _entry_keys() -> list[str]:
    from dreaming.store.tables import ENTRIES

    return [c.name for c in ENTRIES.columns if c.name != "id"]


def _decision_keys() -> list[str]:
    from dreaming.store.tables import DECISIONS

    return [c.name for c in DECISIONS.columns if c.name != "id"]


def _journal_keys() -> list[str]:
    from dreaming.store.tables import JOURNAL

    return [c.name for c in JOURNAL.columns if c.name != "id"]


def test_a_python_side_default_falls_back_and_is_filled(engine: Engine) -> None:
    """Rows without `sessions` (a column default SQLAlchemy fills per row): no plan, and the
    stored rows carry the default all the same."""
    row = _candidate(1, _TIMES[1])
    del row["sessions"]
    stmt = insert(CANDIDATES)
    with engine.begin() as conn:
        assert bulk._plan(conn.dialect, stmt, tuple(row)) is None
        bulk.execute_many(conn, stmt, [row, dict(row, key="k2")])
        assert [r.sessions for r in conn.execute(select(CANDIDATES.c.sessions))] == [0, 0]


def test_an_expanding_parameter_falls_back(engine: Engine) -> None:
    stmt = update(CANDIDATES).where(CANDIDATES.c.id.in_(bindparam("ids", expanding=True)))
    with engine.connect() as conn:
        assert bulk._plan(conn.dialect, stmt, ("ids", "score")) is None


def test_other_backends_keep_sqlalchemys_path() -> None:
    assert bulk._plan(postgresql.dialect(), CANDIDATES.insert(), ("agent",)) is None


def test_plans_stay_bounded_for_statements_built_per_call(engine: Engine) -> None:
    with engine.begin() as conn:
        for n in range(bulk._MAX_PLANS * 2):
            stmt = text(f"UPDATE candidates SET score = :s WHERE id = {n} AND id = :i")
            bulk.execute_many(conn, stmt, [{"s": 1.0, "i": n}])
            assert len(bulk._PLANS) <= bulk._MAX_PLANS


def test_no_rows_is_no_statement(engine: Engine) -> None:
    with engine.begin() as conn:
        bulk.execute_many(conn, text("this is not sql"), [])


def test_a_demo_night_never_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bulk statement of a real night (light, REM, deep on the embedded default) with
    the keys its caller really passes takes the driver's path."""
    import json

    from click.testing import CliRunner

    from dreaming.cli import (
        _demo,  # noqa: F401  (registers)
        cli,
    )

    compiled: list[tuple[str, bool]] = []
    real = bulk._compile

    def recording(dialect: Any, stmt: Any, keys: tuple[str, ...]) -> Any:
        plan = real(dialect, stmt, keys)
        compiled.append((str(stmt).split("(")[0].strip(), plan is not None))
        return plan

    monkeypatch.setattr(bulk, "_compile", recording)
    monkeypatch.setattr(bulk, "_PLANS", {})
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["demo", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["agents"]
    assert len(compiled) >= 8, compiled  # evidence, candidates, sessions, entries, ...
    assert [name for name, fast in compiled if not fast] == []


def test_time_columns_take_the_cheaper_equivalent(engine: Engine) -> None:
    """`UTCDateTime` (a TypeDecorator over DateTime) converts through `iso_time`, the text
    SQLite's processor would write (the tests above compare the stored rows)."""
    from dreaming.store.tables import CORPUS_LINES

    with engine.connect() as conn:
        assert bulk.time_text(conn.dialect, CORPUS_LINES.c.ts.type) is bulk.iso_time
        plan = bulk._plan(
            conn.dialect, _decided._SET_OUTCOME, ("cid", "new_status", "decided", "at")
        )
        assert plan is not None
        assert [convert for _, convert in plan.converted] == [bulk.iso_time]
