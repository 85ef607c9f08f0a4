"""Forget reaches what REM derived without quoting it (issue #23 item 3): a model-written
diary entry, theme words in DREAMS.md and in run summaries, REM's LLM calls, and report files
written before the purge; verify fails on a diary entry whose window read a forgotten
session; older entries and runs that recorded no window are decided from days."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import delete, insert, update

from dreaming.cli import cli
from dreaming.memory import diary
from dreaming.store.tables import DIARY_WINDOWS, RUNS
from tests import backends
from tests.deep_helpers import open_app, tree_hash
from tests.fake_openai import DEFAULT_KEY, DEFAULT_MODEL, FakeOpenAI, Reply
from tests.openclaw_builder import FakeOpenClaw
from tests.test_forget import every_artifact

pytestmark = pytest.mark.usefixtures("backend")

START = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
SISTER = ("s-sister-1", "s-sister-2")
MODEL_DIARY = (
    "Tonight the user kept returning to Quentara, the sister who designs buildings in Lisbon…"
)
# What nothing outside the sister's sessions says: none of it may survive their purge.
TRACES = ("quentara", "lisbon", "architect", "returning to")


def seed(root: Path, base_url: str | None = None) -> Path:
    """Two sessions about the owner's sister on two days, two about other things after."""
    fake = FakeOpenClaw(root)
    talk = {
        SISTER[0]: [
            ("user", "My sister Quentara is an architect and she lives in Lisbon."),
            ("assistant", "Noted: your sister Quentara is an architect living in Lisbon."),
        ],
        SISTER[1]: [
            ("user", "Quentara finished her architect exams in Lisbon this spring."),
            ("assistant", "Good news about Quentara and her architect exams."),
        ],
        "s-garden-1": [("user", "I water the basil on the balcony every morning.")],
        "s-garden-2": [("user", "The basil on the balcony needs repotting soon.")],
    }
    for i, (sid, turns) in enumerate(talk.items()):
        fake.session(
            "main", sid, turns, key=f"agent:main:main:{sid}", start=START + dt.timedelta(days=i)
        )
    config = ""
    if base_url is not None:
        config = (
            "[deep]\nllm = 'test'\n"
            f"[llm.profiles.test]\nbase_url = '{base_url}'\nmodel = '{DEFAULT_MODEL}'\n"
        )
    (root / "dreaming.toml").write_text(config)
    backends.CURRENT.configure(root)
    return root


def invoke(root: Path, *args: str, code: int = 0) -> str:
    from dreaming.cli import _forget, _report, _run, _runs, _verify  # noqa: F401

    result = CliRunner(env={"OPENAI_API_KEY": DEFAULT_KEY}).invoke(
        cli,
        ["--state-dir", str(root), "--config", str(root / "dreaming.toml"), *args],
        catch_exceptions=False,
    )
    assert result.exit_code == code, result.output
    return result.stdout


def cli_json(root: Path, *args: str, code: int = 0) -> Any:
    return json.loads(invoke(root, *args, "--json", code=code))


def forget_sister(root: Path, *extra: str) -> Any:
    args = ["forget", "--agent", "main", "--session", SISTER[0], "--session", SISTER[1]]
    return cli_json(root, *args, *extra)


def dreams(root: Path) -> str:
    return (root / "workspace" / "DREAMS.md").read_text()


def no_trace(text: str) -> None:
    low = text.casefold()
    for word in TRACES:
        assert word not in low, word


def test_a_model_written_diary_leaves_with_the_sessions_it_was_dreamt_from(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.default = lambda _r: Reply({"entry": MODEL_DIARY})
    root = seed(tmp_path / "s", fake_openai.base_url)
    night = cli_json(root, "run", "--phase", "light", "--phase", "rem")
    rem = night["agents"]["main"]["rem"]
    assert rem["diary_by"] == "llm"
    assert set(SISTER) <= set(rem["read_sessions"])
    assert "Quentara" in dreams(root)
    dry = forget_sister(root, "--dry-run")
    assert dry["diary_entries_removed"] == [rem["day"]]
    assert dry["run_summaries_redacted"] == [rem["run_id"]]
    assert dry["counts"]["diary_entries"] == 1
    assert "Quentara" in dreams(root), "a dry run changes nothing"
    report = forget_sister(root)
    assert report["counts"] == dry["counts"]
    assert diary.entries(dreams(root)) == []
    no_trace(every_artifact(root))
    verdict = cli_json(root, "verify", "--agent", "main")
    assert verdict["ok"], verdict


def test_theme_words_leave_the_diary_and_the_run_summaries(tmp_path: Path) -> None:
    root = seed(tmp_path / "s")
    rem = cli_json(root, "run", "--phase", "light", "--phase", "rem")["agents"]["main"]["rem"]
    assert rem["themes"] and rem["themes"][0]["concept"].casefold() == "quentara", rem["themes"]
    assert "quentara" in invoke(root, "runs", "show", "1").casefold()
    args = ["forget", "--agent", "main", "--session", SISTER[0], "--session", SISTER[1]]
    plan = invoke(root, *args, "--dry-run")
    assert f"DREAMS.md entry {rem['day']}: its night read a purged session" in plan
    assert "run summaries redacted (themes, diary text, purged quotes): 1" in plan
    no_trace(plan)
    report = forget_sister(root)
    assert report["diary_entries_removed"] == [rem["day"]]
    shown = invoke(root, "runs", "show", "1")
    assert "[forgotten]" in shown
    no_trace(shown)
    no_trace(json.dumps(cli_json(root, "runs", "show", "1")))
    no_trace(every_artifact(root))
    # The next night writes tonight's entry again from what remains.
    cli_json(root, "run", "--phase", "rem")
    assert [e.day for e in diary.entries(dreams(root))] == [rem["day"]]
    no_trace(dreams(root))
    assert cli_json(root, "verify", "--agent", "main")["ok"]


def test_a_report_written_before_the_purge_is_listed_and_removed(tmp_path: Path) -> None:
    root = seed(tmp_path / "s")
    invoke(root, "run")
    away = tmp_path / "elsewhere" / "night.html"
    away.parent.mkdir()
    invoke(root, "report", "--out", str(away))
    assert "Quentara" in away.read_text()
    # A page written by an older dreaming (no record of it) where reports are usually put.
    planted = root / "workspace" / "report.html"
    planted.write_text(away.read_text())
    before = tree_hash(root)
    dry = forget_sister(root, "--dry-run")
    assert tree_hash(root) == before and away.exists()
    listed = {f["path"]: f["action"] for f in dry["report_files"]}
    assert listed == {str(away.resolve()): "remove", str(planted.resolve()): "remove"}
    text = invoke(root, "forget", "--agent", "main", "--session", SISTER[0], "--session", SISTER[1])
    assert f"report file {away.resolve()}: mentions what is purged: removed" in text
    assert not away.exists() and not planted.exists()
    # A page written after the purge shows nothing of it: a later forget keeps it.
    invoke(root, "report", "--out", str(away))
    no_trace(away.read_text())
    again = forget_sister(root)
    assert again["report_files"] == [{"path": str(away.resolve()), "action": "keep"}]
    assert again["nothing_left"] and away.exists()


def test_verify_fails_on_a_diary_entry_dreamt_from_a_forgotten_session(tmp_path: Path) -> None:
    root = seed(tmp_path / "s")
    cli_json(root, "run", "--phase", "light", "--phase", "rem")
    forget_sister(root)
    day = cli_json(root, "run", "--phase", "rem")["agents"]["main"]["rem"]["day"]
    assert cli_json(root, "verify", "--agent", "main")["ok"]
    app = open_app(root)
    try:
        with app.engine("main").begin() as conn:  # a state no purge leaves: plant it
            conn.execute(insert(DIARY_WINDOWS).values(agent="main", day=day, session_id=SISTER[0]))
    finally:
        app.close()
    verdict = cli_json(root, "verify", "--agent", "main", code=1)["agents"][0]
    assert not verdict["ok"]
    assert verdict["checks"]["diary_from_forgotten_sessions"] == 1
    assert any(f"DREAMS.md entry {day}" in v for v in verdict["violations"])


def test_entries_and_runs_without_a_recorded_window_are_decided_from_days(
    tmp_path: Path,
) -> None:
    root = seed(tmp_path / "s")
    rem = cli_json(root, "run", "--phase", "light", "--phase", "rem")["agents"]["main"]["rem"]
    # What an older dreaming left: no windows, no sessions read; and an entry of a night
    # before any of the sister's lines, which cannot have read them.
    app = open_app(root)
    try:
        with app.engine("main").begin() as conn:
            conn.execute(delete(DIARY_WINDOWS))
            summary = {"phases": {"rem": {**rem, "read_sessions": None}}}
            del summary["phases"]["rem"]["read_sessions"]
            conn.execute(update(RUNS).values(summary=json.dumps(summary)))
    finally:
        app.close()
    path = root / "workspace" / "DREAMS.md"
    diary.write_entry(path, "2026-03-01", "## 2026-03-01\n\nA quiet night: nothing recurred.")
    dry = forget_sister(root, "--dry-run")
    assert dry["diary_entries_removed"] == [rem["day"]]
    assert dry["run_summaries_redacted"] == [1]
    forget_sister(root)
    assert [e.day for e in diary.entries(dreams(root))] == ["2026-03-01"]
    no_trace(every_artifact(root))


def test_a_purge_killed_after_its_commit_removes_the_entry_and_the_report_when_completed(
    tmp_path: Path,
) -> None:
    root = seed(tmp_path / "s")
    invoke(root, "run")
    page = root / "night.html"
    invoke(root, "report", "--out", str(page))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DREAMING_", "OPENAI_"))}
    env |= {"DREAMING_CRASH_AT": "forget.after_commit", "HOME": str(tmp_path / "home")}
    args = ["--state-dir", str(root), "--config", str(root / "dreaming.toml"), "forget"]
    args += ["--agent", "main", "--session", SISTER[0], "--session", SISTER[1]]
    killed = subprocess.run([sys.executable, "-m", "dreaming", *args], env=env, check=False)
    assert killed.returncode == 137
    assert "Quentara" in dreams(root) and page.exists()  # the files wait for completion
    cli_json(root, "run", "--phase", "light")  # the next run completes the purge
    assert diary.entries(dreams(root)) == [] and not page.exists()
    no_trace(every_artifact(root))
    assert cli_json(root, "verify", "--agent", "main")["ok"]
