"""Corpus rows inserted in pages through the driver (`corpus.add_files`): each inserted row
comes back with the id the table gave it, a row stored already comes back not at all, on a
fresh table, after a purge took the highest ids, and past one page."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from dreaming.ingest import corpus
from dreaming.store.bulk import iso_time
from dreaming.store.engine import open_engine


def _rows(session: str, lines: range) -> list[dict[str, Any]]:
    return [
        {
            "agent": "main",
            "session_id": session,
            "line": n,
            "ts": datetime(2026, 3, 1, 9, n % 60, tzinfo=UTC),
            "day": "2026-03-01",
            "role": "user",
            "origin_class": "owner",
            "text": f"line {n} of {session}",
            "text_hash": f"{session}-{n}",
            "speaker": None,
        }
        for n in lines
    ]


def _add(engine: Engine, *files: list[dict[str, Any]]) -> list[list[tuple[int, str, int]]]:
    """add_files in one transaction; each returned row as (id, session, line), checked
    against what the table holds under that id."""
    with engine.begin() as conn:
        added = corpus.add_files(conn, "main", list(files))
        stored = {
            i: (s, n)
            for i, s, n in conn.execute(text("SELECT id, session_id, line FROM corpus_lines"))
        }
    out = [[(i, r["session_id"], r["line"]) for i, r in rows] for rows in added]
    for i, s, n in (x for rows in out for x in rows):
        assert stored[i] == (s, n), f"id {i} is {stored[i]}, not {(s, n)}"
    return out


def test_new_rows_come_back_with_their_ids_and_stored_ones_not_at_all(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "main.sqlite")
    first = _add(engine, _rows("s1", range(1, 4)))
    assert [(s, n) for _, s, n in first[0]] == [("s1", 1), ("s1", 2), ("s1", 3)]
    # Lines 2 and 3 of s1 are stored already (a forced re-ingestion reads them again).
    again = _add(engine, _rows("s1", range(2, 6)), _rows("s2", range(1, 3)))
    assert [(s, n) for _, s, n in again[0]] == [("s1", 4), ("s1", 5)]
    assert [(s, n) for _, s, n in again[1]] == [("s2", 1), ("s2", 2)]
    assert _add(engine, _rows("s1", range(1, 6))) == [[]]


def test_ids_stay_right_after_a_purge_took_the_highest(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "main.sqlite")
    _add(engine, _rows("s1", range(1, 11)))
    with engine.begin() as conn:  # as a purge does: the table's highest ids go
        conn.execute(text("DELETE FROM corpus_lines WHERE line > 5"))
    added = _add(engine, _rows("s2", range(1, 4)))[0]
    assert min(i for i, _, _ in added) > 10  # never an id that was used before
    assert [(s, n) for _, s, n in added] == [("s2", 1), ("s2", 2), ("s2", 3)]


def test_more_than_a_page_of_rows_in_files_of_several_sessions(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "main.sqlite")
    _add(engine, _rows("s0", range(0, 700, 2)))  # every other line of s0
    files = [_rows("s0", range(0, 700)), _rows("s1", range(1500)), _rows("s2", range(3))]
    added = _add(engine, *files)
    assert [len(rows) for rows in added] == [350, 1500, 3]
    assert [n for _, _, n in added[0]] == list(range(1, 700, 2))


def test_times_made_by_the_reader_store_what_the_insert_would_make(tmp_path: Path) -> None:
    rows = _rows("s1", range(0, 90, 7))
    rows[3]["ts"] = None  # a line with no time of its own
    rows[4]["ts"] = datetime(2026, 3, 1, 10, 0, 0, 250, tzinfo=UTC)
    made = [iso_time(r["ts"]) for r in rows]
    stored = []
    for name, times in (("here", None), ("made", [made]), ("short", [made[:-1]])):
        engine = open_engine(tmp_path / f"{name}.sqlite")
        with engine.begin() as conn:
            corpus.add_files(conn, "main", [rows], times)
            stored.append(conn.execute(text("SELECT line, ts FROM corpus_lines ORDER BY id")).all())
    assert stored[0] == stored[1] == stored[2]
    assert stored[0][3][1] is None and stored[0][4][1] == "2026-03-01 10:00:00.000250"
