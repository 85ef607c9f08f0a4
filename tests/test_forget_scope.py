"""A purge costs what it removes: forgetting a session opens only that session's transcript,
plans once, and rescores only the candidates it touched, leaving the rest of the scores to
the next night (which rescores them before anything is chosen)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from dreaming.cli import cli
from dreaming.ingest import candidates, sources
from dreaming.ingest.transcripts import _discovery
from dreaming.store import state
from dreaming.store.state import StateKey
from tests import backends
from tests.deep_helpers import open_app
from tests.openclaw_builder import FakeOpenClaw

pytestmark = pytest.mark.usefixtures("backend")

START = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
FACTS = (
    "My staging server is called rimazu and hosts every release build.",
    "My sister Lena lives in Porto and teaches chemistry there.",
    "I am allergic to peanuts and carry an epipen everywhere.",
)


def seed(root: Path) -> Path:
    """Six sessions over six days, each fact said in two or three of them."""
    fake = FakeOpenClaw(root)
    said = {
        "s-1": [FACTS[0], FACTS[1]],
        "s-2": [FACTS[0], FACTS[2]],
        "s-3": [FACTS[1]],
        "s-4": [FACTS[2], FACTS[0]],
        "s-5": [FACTS[1]],
        "s-6": ["Thanks, that helps."],
    }
    for i, (sid, lines) in enumerate(said.items()):
        fake.session(
            "main",
            sid,
            [("user", line) for line in lines] + [("assistant", "Noted.")],
            key=f"agent:main:telegram:default:dm:peer{i}",
            start=START + dt.timedelta(days=i),
        )
    (root / "dreaming.toml").write_text("")
    backends.CURRENT.configure(root)
    return root


def invoke(root: Path, *args: str) -> dict[str, Any]:
    from dreaming.cli import _forget, _run  # noqa: F401

    result = CliRunner().invoke(
        cli,
        ["--state-dir", str(root), "--config", str(root / "dreaming.toml"), *args, "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def scores(root: Path) -> dict[str, float]:
    app = open_app(root)
    try:
        with app.engine("main").connect() as conn:
            rows = conn.execute(text("SELECT text, score FROM candidates")).all()
            return {str(t): float(s) for t, s in rows}
    finally:
        app.close()


def rescored(root: Path) -> dict[str, float]:
    """Every candidate's score as a full rescore would make it now (rolled back)."""
    app = open_app(root)
    try:
        with app.engine("main").connect() as conn:
            tx = conn.begin()
            candidates.rescore(conn, "main", app.paths.settings)
            rows = conn.execute(text("SELECT text, score FROM candidates")).all()
            tx.rollback()
            return {str(t): float(s) for t, s in rows}
    finally:
        app.close()


def mark(root: Path) -> str | None:
    app = open_app(root)
    try:
        with app.engine("main").connect() as conn:
            return state.get(conn, "main", StateKey.RESCORE_PENDING)
    finally:
        app.close()


def test_a_session_purge_discovers_only_that_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = seed(tmp_path / "s")
    app = open_app(root)
    try:
        every = sources.discover(app.paths, ["main"])["main"]
        assert [f.session_id for f in every] == [f"s-{i}" for i in range(1, 7)]
        opened: list[str] = []
        real = _discovery._header_timestamp

        def header(path: Path) -> dt.datetime | None:
            opened.append(path.stem)
            return real(path)

        monkeypatch.setattr(_discovery, "_header_timestamp", header)
        by_id = sources.discover(app.paths, ["main"], sessions=["s-3"])["main"]
        by_key = sources.discover(
            app.paths, ["main"], sessions=["agent:main:telegram:default:dm:peer4"]
        )["main"]
        nothing = sources.discover(app.paths, ["main"], sessions=["no-such"])
    finally:
        app.close()
    assert [f.session_id for f in by_id] == ["s-3"]
    # The same facts as a whole discovery finds for it.
    assert by_id[0] == next(f for f in every if f.session_id == "s-3")
    assert [(f.session_id, f.session_key) for f in by_key] == [
        ("s-5", "agent:main:telegram:default:dm:peer4")
    ]
    assert nothing.get("main", []) == []
    # No transcript's header was read: a purge has no need of when a session started.
    assert opened == []


def test_forget_rescores_what_it_touched_and_the_next_night_the_rest(tmp_path: Path) -> None:
    root = seed(tmp_path / "s")
    invoke(root, "run", "--phase", "light")
    assert mark(root) is None
    before = scores(root)

    report = invoke(root, "forget", "--agent", "main", "--session", "s-1")
    assert report["counts"]["candidates"] >= 2

    after = scores(root)
    full = rescored(root)
    # The candidates s-1 backed lost a session: their scores are what a full rescore gives.
    for fact in (FACTS[0], FACTS[1]):
        touched = next(t for t in after if fact.split(" and ")[0] in t)
        assert after[touched] == full[touched]
        assert after[touched] < before[touched]
    # The rest wait for the next night, which rescores before anything is chosen.
    assert mark(root) == "1"
    night = invoke(root, "run", "--phase", "deep")
    assert night["agents"]["main"]["deep"]["selected"] >= 1
    assert mark(root) is None
    assert scores(root) == {t: s for t, s in rescored(root).items()}


def test_a_mistyped_session_plans_nothing_and_writes_nothing(tmp_path: Path) -> None:
    root = seed(tmp_path / "s")
    invoke(root, "run", "--phase", "light")
    db_files = sorted(p.name for p in (root / "state").rglob("*") if p.is_file())
    result = CliRunner().invoke(
        cli,
        [
            *("--state-dir", str(root), "--config", str(root / "dreaming.toml")),
            *("forget", "--agent", "main", "--session", "s-9"),
        ],
    )
    assert result.exit_code != 0
    assert "no session 's-9'" in result.output
    assert "s-1" in result.output  # the error lists the sessions there are
    assert sorted(p.name for p in (root / "state").rglob("*") if p.is_file()) == db_files
    assert mark(root) is None
