"""`dreaming runs`, `dreaming runs show`, and `dreaming status`: the day's spend against
every cap that applies, the last runs, ISO 8601 times in every JSON document."""

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
from dreaming.cli import cli
from dreaming.cli._output import usd
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
    "undone_by",  # the undo run that took it back, or None
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
    assert ambiguous.exit_code == 2
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
    assert missing.exit_code == 2 and "no run 9 for agent 'main'" in missing.stderr


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
    settings_cap = status["caps"][0]
    assert settings_cap["scope"] == "settings" and settings_cap["daily_max_usd"] == 1.0
    assert settings_cap["remaining_usd"] == pytest.approx(1.0 - status["usd"])
    text = invoke(root, "status", "--agent", "main")
    spent = usd(status["usd"])
    assert f"llm spend {status['day']} (UTC): {spent} ({status['calls']} calls" in text.stdout
    left = usd(settings_cap["remaining_usd"])
    assert f"daily cap for run/promote (settings): $1.00, {left} left" in text.stdout


def test_status_spend_is_zero_without_calls_and_counts_only_today(night: Path) -> None:
    db = night / "dreaming" / "agents" / "main.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO spend (agent, day, usd, tokens, calls) VALUES (?, ?, ?, ?, ?)",
            ("main", "2000-01-01", 5.0, 100, 2),
        )
    spend = as_json(night, "status", "--agent", "main")["agents"][0]["spend_today"]
    assert (spend["usd"], spend["calls"], spend["caps"][0]["daily_max_usd"]) == (0.0, 0, None)
    text = invoke(night, "status", "--agent", "main")
    assert "(UTC): $0.00 (0 calls, 0 tokens)" in text.stdout
    assert "daily cap for run/promote (settings): none" in text.stdout


def test_runs_with_no_state_yet(tmp_path: Path) -> None:
    root = demo.build(tmp_path / "empty")
    assert as_json(root, "runs")["runs"] == []
    result = invoke(root, "runs")
    assert result.exit_code == 0 and "no runs recorded" in result.stdout


def write_job(root: Path, name: str, body: str) -> None:
    folder = root / "dreaming" / "jobs"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(f'name = "{name}"\n{body}')


def test_status_shows_each_jobs_daily_cap_and_what_is_left_under_it(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = build_state(
        tmp_path / "s", base_url=fake_openai.base_url, extra="\n[budget]\ndaily_max_usd = 1.0\n"
    )
    fake_openai.default = decide_all("add")
    monkeypatch.setenv("OPENAI_API_KEY", DEFAULT_KEY)
    assert invoke(root, "run", "--agent", "main").exit_code == 0  # spends under every cap
    write_job(root, "tiny", 'phases = ["deep"]\n[budget]\ndaily_max_usd = 0.002\n')
    write_job(root, "lavish", "[budget]\ndaily_max_usd = 5.0\nmax_usd = 0.3\n")
    write_job(root, "bobonly", 'agents = ["bob"]\n[budget]\ndaily_max_usd = 0.5\n')
    write_job(root, "capped", "enabled = false\n")

    spend = as_json(root, "status", "--agent", "main")["agents"][0]["spend_today"]
    assert spend["usd"] > 0
    caps = {c["job"]: c for c in spend["caps"]}
    # The settings' cap (run, promote), then each enabled job on the agent with the cap it
    # runs under: the stricter of its own and the settings'.
    assert list(caps) == [None, "lavish", "nightly", "promote", "tiny"]
    assert caps["tiny"]["daily_max_usd"] == 0.002
    assert caps["tiny"]["remaining_usd"] == pytest.approx(max(0.0, 0.002 - spend["usd"]))
    assert caps["tiny"]["reached"] is (spend["usd"] >= 0.002)
    assert caps["lavish"]["daily_max_usd"] == 1.0 and caps["lavish"]["max_usd"] == 0.3
    assert caps["promote"]["daily_max_usd"] == 1.0  # no cap of its own

    text = invoke(root, "status", "--agent", "main").stdout
    tiny = "reached" if caps["tiny"]["reached"] else f"{usd(caps['tiny']['remaining_usd'])} left"
    assert f"daily cap for job tiny: $0.002, {tiny}" in text  # never rounded to $0.00
    assert "daily cap for job lavish: $1.00, " in text
    assert "bobonly" not in text and "capped" not in text


def test_status_json_has_the_light_corpus_lines_one_pending_count_and_iso_times(
    night: Path,
) -> None:
    agent = as_json(night, "status", "--agent", "main")["agents"][0]
    first = as_json(night, "runs", "show", "1", "--agent", "main")
    wrote = first["summary"]["phases"]["light"]["corpus_lines"]
    assert wrote > 0
    assert agent["last_runs"]["light"]["corpus_lines"] == wrote
    assert agent["last_runs"]["rem"]["corpus_lines"] == wrote  # the same run
    assert agent["last_runs"]["deep"]["corpus_lines"] is None  # run 2: deep only
    assert "pending_candidates" not in agent and agent["candidates"]["pending"] > 0
    assert agent["last_runs"]["light"]["started_at"] == first["started_at"]


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
