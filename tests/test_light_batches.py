"""Light commits its reads in batches: the same night, whether each file is committed on its
own or many together, leaves the same corpus, candidates and evidence, in a few statements."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlalchemy.engine import Engine

from dreaming.phases.light import _commit
from dreaming.store.tables import CORPUS_LINES
from tests.openclaw_builder import FakeOpenClaw
from tests.test_light import light

DAY = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
_SQLITE = sqlite_dialect()

# What one file says may matter to the next one's fold: a claim repeated with a durability
# cue (in the same file and in a later one), the agent echoing what the owner said a file
# earlier, near-duplicates across files, a recall of nothing yet.
SESSIONS: list[list[tuple[str, str]]] = [
    [
        ("user", "The staging database is called bluebird and runs in Frankfurt."),
        ("assistant", "Noted, bluebird in Frankfurt."),
        ("user", "Remember that the staging database is called bluebird and runs in Frankfurt."),
    ],
    [
        ("assistant", "The staging database is called bluebird and runs in Frankfurt."),
        ("user", "My manager for the billing migration is Priya Raman."),
    ],
    [
        ("user", "Always run the linter before committing anything to the repository."),
        ("user", "My manager for the billing migration is Priya Raman, from the Leeds office."),
        ("assistant", "I will always run the linter before committing to the repository."),
    ],
    [
        ("user", "We deploy the payments service from the release branch on Thursdays."),
        ("user", "Never push directly to the main branch of the payments repository."),
    ],
    [
        ("assistant", "We deploy the payments service from the release branch on Thursdays."),
        ("user", "The staging database is called bluebird, please note it runs in Frankfurt."),
    ],
]


def _state(root: Path) -> Path:
    fake = FakeOpenClaw(root)
    for n, turns in enumerate(SESSIONS):
        fake.session("main", f"s{n:02d}", turns, start=DAY + timedelta(days=n))
    return root


def _tables(root: Path) -> dict[str, list[Any]]:
    with sqlite3.connect(root / "dreaming" / "agents" / "main.sqlite") as conn:
        return {
            "corpus": conn.execute(
                "SELECT session_id, line, day, role, text FROM corpus_lines ORDER BY id"
            ).fetchall(),
            "candidates": conn.execute(
                "SELECT id, key, text, durable_cue, sessions, days, round(score, 9), status"
                " FROM candidates ORDER BY id"
            ).fetchall(),
            "evidence": conn.execute(
                "SELECT candidate_id, corpus_line_id, session_id FROM candidate_evidence"
                " ORDER BY 1, 2"
            ).fetchall(),
            "cursors": conn.execute(
                "SELECT session_id, offset, line FROM file_cursors ORDER BY session_id"
            ).fetchall(),
            "sessions": conn.execute(
                "SELECT session_id, status, format FROM sessions ORDER BY session_id"
            ).fetchall(),
        }


def test_one_batch_or_a_commit_per_file_leave_the_same_night(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    together = _state(tmp_path / "together")
    light(together)
    monkeypatch.setattr(_commit, "BATCH_ROWS", 1)  # every file its own commit
    alone = _state(tmp_path / "alone")
    light(alone)
    got, want = _tables(together), _tables(alone)
    assert got == want
    # The cue said in a later line reaches the candidate made earlier in the batch.
    cued = [c for c in got["candidates"] if "bluebird" in c[2]]
    assert cued and all(c[3] for c in cued)


def test_a_night_of_many_small_files_is_a_few_statements(tmp_path: Path) -> None:
    root = tmp_path / "state"
    fake = FakeOpenClaw(root)
    for n in range(40):
        fake.session(
            "main",
            f"s{n:02d}",
            [("user", f"Project number {n} is run by Person{n} from the office in Town{n}.")],
            start=DAY + timedelta(hours=n),
        )
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    try:
        report = light(root)
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    assert report["main"]["sessions"]["read"] == 40
    # Per file it was a dozen (lines, ids, fold, cursor, record, marks): now per batch.
    per_file = [s for s in statements if "INTO corpus_lines" in s or "INTO file_cursors" in s]
    assert len(per_file) == 2, per_file
    assert len(statements) < 80, len(statements)


def test_a_big_night_is_committed_in_batches_of_bounded_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_commit, "BATCH_ROWS", 5)
    root = tmp_path / "state"
    fake = FakeOpenClaw(root)
    for n in range(6):
        turns = [
            ("user", f"Fact {i} of file {n}: the server Host{n}x{i} is in Rack{i}.")
            for i in range(3)
        ]
        fake.session("main", f"s{n}", turns, start=DAY + timedelta(hours=n))
    commits: list[int] = []
    real_commit = _commit.commit_batch

    def counted(conn: Any, folder: Any, batch: _commit.Batch, *args: Any) -> set[int]:
        commits.append(batch.rows)
        return real_commit(conn, folder, batch, *args)

    monkeypatch.setattr("dreaming.phases.light._phase.commit_batch", counted)
    report = light(root)
    assert report["main"]["sessions"]["read"] == 6
    assert commits == [6, 6, 6]  # a batch is cut once it holds BATCH_ROWS rows
    assert report["main"]["corpus_lines"] == 18


def test_a_restatement_in_its_own_file_folds_into_the_candidate_past_the_probe_cap(
    tmp_path: Path,
) -> None:
    """With hundreds of candidates sharing a claim's common words, the similarity index
    probes only some of them; a candidate the same file made a line earlier is always among
    them, so its restatement folds into it rather than starting a second one."""

    def word(n: int) -> str:  # a made-up word per line: letters only, none a stopword
        return "q" + "".join("bcdfghjklmnprstvz"[int(d)] for d in f"{n:03d}")

    root = tmp_path / "state"
    fake = FakeOpenClaw(root)
    many = [
        ("user", f"The coffee in the morning at the {word(n)} kiosk is strong daily.")
        for n in range(450)
    ]
    fake.session("main", "s-many", many, start=DAY)
    assert light(root)["main"]["candidates"]["new"] == 450
    said = [
        ("user", "The coffee in the morning at the zeta kiosk is strong."),
        ("user", "The coffee in the morning at the zeta kiosk is strong daily."),
    ]
    fake.session("main", "s-zeta", said, start=DAY + timedelta(days=1))
    light(root)
    with sqlite3.connect(root / "dreaming" / "agents" / "main.sqlite") as conn:
        zeta = conn.execute("SELECT text FROM candidates WHERE text LIKE '%zeta%'").fetchall()
    assert len(zeta) == 1, zeta


def test_corpus_times_are_stored_as_sqlalchemy_stores_them(tmp_path: Path) -> None:
    # The corpus insert goes through the driver: its times must still be the text every other
    # time column holds ("... 09:00:00.000000"), or SQL ordering them as text puts a
    # whole-second line before the lines of its own second that other paths wrote.
    root = _state(tmp_path / "state")
    FakeOpenClaw(root).session(  # and a session whose times have milliseconds
        "main",
        "ms",
        [("user", "The billing cluster lives in the Dublin region since May.")],
        start=DAY + timedelta(days=9, milliseconds=457),
    )
    light(root)
    with sqlite3.connect(root / "dreaming" / "agents" / "main.sqlite") as conn:
        stored = [ts for (ts,) in conn.execute("SELECT ts FROM corpus_lines")]
    assert any(ts.endswith(".000000") for ts in stored)
    assert any(ts.endswith(".457000") for ts in stored)
    column = CORPUS_LINES.c.ts.type
    processor = column.dialect_impl(_SQLITE).bind_processor(_SQLITE)
    assert processor is not None
    for ts in stored:
        assert processor(datetime.fromisoformat(ts).replace(tzinfo=UTC)) == ts


def test_whole_second_times_an_earlier_release_wrote_are_mended_on_open(tmp_path: Path) -> None:
    root = _state(tmp_path / "state")
    light(root)
    db = root / "dreaming" / "agents" / "main.sqlite"
    with sqlite3.connect(db) as conn:  # as the release before the fix stored them
        conn.execute("UPDATE corpus_lines SET ts = substr(ts, 1, 19)")
        conn.execute("DELETE FROM schema_migrations WHERE name = '0013_corpus_times'")
    light(root)
    with sqlite3.connect(db) as conn:
        stored = [ts for (ts,) in conn.execute("SELECT ts FROM corpus_lines")]
    assert stored and all(len(ts) == 26 for ts in stored), stored
