"""`dreaming runs`, `dreaming runs show` and the day's spend in `dreaming status`."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dreaming import demo
from dreaming.app import App
from dreaming.cli._main import cli
from dreaming.runs import record_skipped
from tests.deep_helpers import build_state, decide_all
from tests.fake_openai import DEFAULT_KEY, FakeOpenAI

LISTED = {
    "id",
    "agent",
    "job",
    "phases",
    "started_at",
    "ended_at",
    "duration_s",
    "outcome",
    "dry_run",
    "candidates",
    "promotions",
    "llm_calls",
    "tokens",
    "cost_usd",
    "skips",
    "reason",
}


def invoke(root: Path, *args: str) -> Result:
    from dreaming.cli import _candidates, _entries, _jobs, _run, _runs, _status  # noqa: F401

    base = ["--state-dir", str(root), "--config", str(root / "dreaming.toml")]
    return CliRunner().invoke(cli, [*base, *args])


def as_json(root: Path, *args: str) -> Any:
    result = invoke(root, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # one document, nothing else on stdout


@pytest.fixture
def night(tmp_path: Path) -> Path:
    root = demo.build(tmp_path / "demo")
    assert invoke(root, "run").exit_code == 0
    assert invoke(root, "run", "--phase", "deep", "--agent", "main").exit_code == 0
    return root


def test_runs_lists_every_agents_runs_newest_first(night: Path) -> None:
    listing = as_json(night, "runs")["runs"]
    assert (listing[0]["agent"], listing[0]["id"]) == ("main", 2)
    assert {(r["agent"], r["id"]) for r in listing} == {("main", 1), ("main", 2), ("bob", 1)}
    for run in listing:
        assert set(run) == LISTED
        assert run["outcome"] == "ok" and run["duration_s"] >= 0
        assert run["llm_calls"] == 0 and run["tokens"] == 0 and run["cost_usd"] == 0
    first = next(r for r in listing if (r["agent"], r["id"]) == ("main", 1))
    assert first["phases"] == ["light", "rem", "deep"] and first["job"] is None
    assert first["candidates"] > 0 and first["promotions"] == 7 and first["skips"] == 0
    deep_only = listing[0]
    assert deep_only["phases"] == ["deep"] and deep_only["candidates"] is None

    limited = as_json(night, "runs", "--agent", "main", "--limit", "1")["runs"]
    assert [(r["agent"], r["id"]) for r in limited] == [("main", 2)]

    text = invoke(night, "runs")
    assert text.exit_code == 0
    header, *rows = text.stdout.splitlines()
    assert header.split()[:3] == ["agent", "id", "job"] and len(rows) == 3


def test_runs_show_one_run_in_full(night: Path) -> None:
    ambiguous = invoke(night, "runs", "show", "1")
    assert ambiguous.exit_code == 1
    assert ambiguous.stderr.strip() == (
        "dreaming: error: run ids are per agent and 1 exists for bob, main: add --agent NAME"
    )
    shown = as_json(night, "runs", "show", "1", "--agent", "main")
    assert set(shown) == LISTED | {"summary"}
    assert set(shown["summary"]["phases"]) == {"light", "rem", "deep"}
    assert shown["summary"]["phases"]["deep"]["actions"] == {"add": 4, "merge": 3}

    only_main = as_json(night, "runs", "show", "2")  # run 2 exists for main only
    assert only_main["agent"] == "main" and only_main["phases"] == ["deep"]

    text = invoke(night, "runs", "show", "1", "--agent", "bob")
    assert text.exit_code == 0
    assert text.stdout.startswith("run 1 of agent bob: job -, phases light,rem,deep")
    assert "agent bob: light phase" in text.stdout and "agent bob: deep phase" in text.stdout

    missing = invoke(night, "runs", "show", "9", "--agent", "main")
    assert missing.exit_code == 1 and "no run 9 for agent 'main'" in missing.stderr


def test_runs_show_skipped_runs_with_their_reason(night: Path) -> None:
    app = App.open(night, night / "dreaming.toml")
    try:
        summary = {"agent": "bob", "job": "nightly", "phases": {}, "reason": "locked by pid 7 x"}
        run_id = record_skipped(app.engine("bob"), "bob", ["light"], "nightly", summary)
    finally:
        app.close()
    skipped = as_json(night, "runs", "show", str(run_id), "--agent", "bob")
    assert skipped["outcome"] == "skipped" and skipped["reason"] == "locked by pid 7 x"
    assert skipped["job"] == "nightly" and skipped["candidates"] is None
    # A skipped run did not run its phases: status still shows the real last light run.
    status = as_json(night, "status", "--agent", "bob")["agents"][0]
    assert status["last_runs"]["light"]["outcome"] == "ok"


def test_runs_report_llm_calls_tokens_and_cost(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = build_state(
        tmp_path / "s", base_url=fake_openai.base_url, extra="\n[budget]\ndaily_max_usd = 1.0\n"
    )
    fake_openai.default = decide_all("add")
    monkeypatch.setenv("OPENAI_API_KEY", DEFAULT_KEY)
    assert invoke(root, "run", "--agent", "main").exit_code == 0
    [run] = as_json(root, "runs")["runs"]
    assert run["llm_calls"] >= 1 and run["tokens"] > 0 and run["cost_usd"] > 0
    assert run["promotions"] >= 1

    status = as_json(root, "status", "--agent", "main")["agents"][0]["spend_today"]
    assert status["day"] == datetime.now(UTC).date().isoformat()
    assert status["calls"] == run["llm_calls"] and status["tokens"] == run["tokens"]
    assert status["usd"] == pytest.approx(run["cost_usd"])
    assert status["cap_usd"] == 1.0
    assert status["remaining_usd"] == pytest.approx(1.0 - status["usd"])
    text = invoke(root, "status", "--agent", "main")
    assert f"${status['usd']:.4f} of $1.00 daily cap ({status['calls']} calls" in text.stdout


def test_status_spend_is_zero_without_calls_and_counts_only_today(night: Path) -> None:
    db = night / "dreaming" / "agents" / "main.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO spend (agent, day, usd, tokens, calls) VALUES (?, ?, ?, ?, ?)",
            ("main", "2000-01-01", 5.0, 100, 2),
        )
    spend = as_json(night, "status", "--agent", "main")["agents"][0]["spend_today"]
    assert (spend["usd"], spend["calls"], spend["cap_usd"]) == (0.0, 0, None)
    text = invoke(night, "status", "--agent", "main")
    assert "$0.0000 no daily cap (0 calls, 0 tokens)" in text.stdout


def test_runs_with_no_state_yet(tmp_path: Path) -> None:
    root = demo.build(tmp_path / "empty")
    assert as_json(root, "runs")["runs"] == []
    result = invoke(root, "runs")
    assert result.exit_code == 0 and "no runs recorded" in result.stdout


SPACED_MOMENT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d")


@pytest.mark.parametrize(
    "command",
    [
        ("status",),
        ("runs",),
        ("runs", "show", "1", "--agent", "main"),
        ("entries",),
        ("candidates", "--all"),
        ("jobs", "list"),
    ],
)
def test_json_documents_write_moments_in_iso_8601(night: Path, command: tuple[str, ...]) -> None:
    result = invoke(night, *command, "--json")
    assert result.exit_code == 0, result.output
    moments = re.findall(r'"(\d{4}-\d\d-\d\d[T ]\d\d:\d\d[^" ]*)"', result.stdout)
    assert moments, "the document has no moment to check"
    assert not [m for m in moments if SPACED_MOMENT.match(m)]
    for moment in moments:
        datetime.fromisoformat(moment)
