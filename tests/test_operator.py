"""The operator's experience (#13): a dead endpoint fails cheap and says `degraded`,
`promote` previews before it writes, and a run speaks only when it is useful.

Every LLM test drives the real client against the loopback fake server (or a port nothing
listens on), through the CLI as an operator runs it."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dreaming import demo
from dreaming.cli import cli
from tests import backends
from tests.deep_helpers import decide_all
from tests.fake_openai import (
    DEFAULT_KEY,
    DEFAULT_MODEL,
    Delay,
    ErrorReply,
    FakeOpenAI,
    closed_port_url,
)

ENV = {"OPENAI_API_KEY": DEFAULT_KEY}


def state(root: Path, base_url: str | None, deep: str = "", batch: int = 1, **profile: Any) -> Path:
    """The demo's state folder with deep on `base_url`, one candidate per batch (so a dead
    endpoint would cost one retry loop per candidate without a breaker)."""
    demo.build(root)
    config = (root / "dreaming.toml").read_text()
    if base_url is not None:
        settings = {
            "base_url": base_url,
            "model": DEFAULT_MODEL,
            "price_input_per_mtok": 1.0,
            "price_output_per_mtok": 2.0,
            "max_attempts": 2,
            "deadline_s": 20,
            "timeout_s": 5,
            **profile,
        }
        config += f'\n[deep]\nllm = "test"\nbatch_size = {batch}\n{deep}\n[llm.profiles.test]\n'
        config += "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())
    (root / "dreaming.toml").write_text(config)
    backends.CURRENT.configure(root)
    return root


def invoke(root: Path, *args: str) -> Any:
    from dreaming.cli import _jobs, _run, _runs, _status  # noqa: F401  (registers commands)

    return CliRunner(env=ENV).invoke(
        cli, ["--state-dir", str(root), "--config", str(root / "dreaming.toml"), *args]
    )


def db(root: Path, agent: str = "main") -> sqlite3.Connection:
    return sqlite3.connect(root / "dreaming" / "agents" / f"{agent}.sqlite")


def calls(root: Path) -> list[tuple[str, int, int, float]]:
    with db(root) as conn:
        return conn.execute(
            "SELECT outcome, input_tokens, output_tokens, coalesce(cost_usd, 0)"
            " FROM llm_calls ORDER BY id"
        ).fetchall()


def spend(root: Path) -> tuple[float, int, int]:
    with db(root) as conn:
        row = conn.execute("SELECT sum(usd), sum(tokens), sum(calls) FROM spend").fetchone()
    return (row[0] or 0.0, row[1] or 0, row[2] or 0)


def last_run(root: Path) -> tuple[str, dict[str, Any]]:
    with db(root) as conn:
        outcome, summary = conn.execute(
            "SELECT outcome, summary FROM runs ORDER BY id DESC LIMIT 1"
        ).fetchone()
    return outcome, json.loads(summary)


# -- a dead endpoint -----------------------------------------------------------------------


@pytest.mark.skipif(backends.CURRENT.name != "sqlite", reason="reads the agent's SQLite file")
def test_a_refused_endpoint_costs_nothing_opens_the_breaker_and_the_night_is_degraded(
    tmp_path: Path,
) -> None:
    root = state(tmp_path / "s", closed_port_url())
    result = invoke(root, "run", "--agent", "main", "--json")

    assert result.exit_code == 3, result.output
    data = json.loads(result.stdout)
    deep = data["agents"]["main"]["deep"]
    assert deep["selected"] >= 3 and deep["batches"] == deep["selected"]
    # REM's diary asked first and failed twice (max_attempts = 2); nothing was asked after.
    outcomes = [c[0] for c in calls(root)]
    assert outcomes == ["unreachable", "unreachable"], outcomes
    assert spend(root) == (0.0, 0, 0), "nothing reached a server: nothing is charged"
    # The remaining batches took the deterministic path (on_llm_failure's default).
    assert deep["paths"] == {"deterministic": deep["selected"]}
    assert deep["actions"].get("add", 0) >= 1
    [run] = data["runs"]
    assert run["outcome"] == "degraded"
    assert "cannot reach" in run["reason"] and "decided without the model" in run["reason"]
    outcome, _ = last_run(root)
    assert outcome == "degraded"
    assert "agent main degraded:" in result.stderr
    runs = invoke(root, "runs", "--agent", "main", "--json")
    assert json.loads(runs.stdout)["runs"][0]["outcome"] == "degraded"
    status = json.loads(invoke(root, "status", "--agent", "main", "--json").stdout)
    deep_run = status["agents"][0]["last_runs"]["deep"]
    assert deep_run["outcome"] == "degraded" and "cannot reach" in deep_run["reason"]


@pytest.mark.skipif(backends.CURRENT.name != "sqlite", reason="reads the agent's SQLite file")
def test_with_on_llm_failure_wait_the_candidates_wait_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    root = state(tmp_path / "s", closed_port_url(), deep='on_llm_failure = "wait"')
    memory = root / "workspace" / "MEMORY.md"
    before = memory.read_text() if memory.exists() else None
    result = invoke(root, "run", "--agent", "main", "--json")

    assert result.exit_code == 3, result.output
    deep = json.loads(result.stdout)["agents"]["main"]["deep"]
    assert deep["actions"] == {} and deep["deferred"]["llm_unavailable"] == deep["selected"]
    assert (memory.read_text() if memory.exists() else None) == before
    assert any("wait for the model" in d for d in deep["degraded"])
    with db(root) as conn:
        pending = conn.execute("SELECT count(*) FROM candidates WHERE status='pending'").fetchone()
    assert pending[0] >= deep["selected"]


@pytest.mark.skipif(backends.CURRENT.name != "sqlite", reason="reads the agent's SQLite file")
def test_a_hanging_endpoint_is_charged_its_bound_once_per_sent_attempt_then_left_alone(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    root = state(tmp_path / "s", fake_openai.base_url, timeout_s=0.5, max_output_tokens=300)
    assert invoke(root, "run", "--phase", "light").exit_code == 0
    fake_openai.enqueue(*[Delay(3.0, then={"decisions": []}) for _ in range(20)])
    result = invoke(root, "run", "--agent", "main", "--phase", "deep", "--json")

    assert result.exit_code == 3, result.output
    sent = calls(root)
    assert [c[0] for c in sent] == ["retried", "failed"], "one retry loop, then the breaker"
    assert all(c[2] == 300 for c in sent), "each charged the output limit it was sent with"
    usd, tokens, n = spend(root)
    assert n == 2 and tokens == sum(c[1] + c[2] for c in sent)
    assert usd == pytest.approx(sum(c[3] for c in sent))


@pytest.mark.skipif(backends.CURRENT.name != "sqlite", reason="reads the agent's SQLite file")
def test_a_failing_endpoint_is_asked_once_per_run_and_the_next_run_tries_again(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    root = state(tmp_path / "s", fake_openai.base_url, deep='on_llm_failure = "wait"')
    fake_openai.enqueue(*[ErrorReply(503, "overloaded") for _ in range(2)])
    first = invoke(root, "run", "--agent", "main", "--phase", "light", "--phase", "deep")
    assert first.exit_code == 3, first.output
    assert len(fake_openai.chat_requests) == 2
    assert "degraded: " in first.stdout and "HTTP 503" in first.stdout

    # A fresh run asks again: the breaker lived for one run only.
    fake_openai.enqueue(decide_all("add"))
    second = invoke(root, "promote", "--apply", "--agent", "main", "--limit", "1")
    assert len(fake_openai.chat_requests) == 3
    assert second.exit_code == 0, second.output


@pytest.mark.skipif(backends.CURRENT.name != "sqlite", reason="reads the agent's SQLite file")
def test_repeated_fallbacks_are_one_line_with_a_count(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    root = state(tmp_path / "s", fake_openai.base_url)
    fake_openai.enqueue(*["not json" for _ in range(40)])
    result = invoke(root, "run", "--agent", "main")

    assert result.exit_code == 3, result.output
    fallbacks = [line for line in result.stdout.splitlines() if "fallback" in line]
    assert len(fallbacks) == len(set(fallbacks))
    assert any(re.search(r"fallback \(\d+ times\): invalid", f) for f in fallbacks), fallbacks
    _, summary = last_run(root)
    assert "not valid JSON" in summary["reason"]
    # Each failed attempt is in the call log (`dreaming logs`), not a line of stderr each:
    # a summary line per phase and one saying the agent was degraded.
    assert len(result.stderr.splitlines()) <= 4, result.stderr
    assert result.stderr.count("not valid JSON") <= 2


# -- promote previews ----------------------------------------------------------------------


def memory_text(root: Path) -> str:
    path = root / "workspace" / "MEMORY.md"
    return path.read_text() if path.exists() else ""


def test_a_bare_promote_previews_and_apply_writes(tmp_path: Path) -> None:
    root = state(tmp_path / "s", None)
    assert invoke(root, "run", "--phase", "light").exit_code == 0
    before = memory_text(root)

    preview = invoke(root, "promote", "--agent", "main")
    assert preview.exit_code == 0, preview.output
    assert memory_text(root) == before, "a bare promote writes nothing"
    out = preview.stdout
    assert "preview: nothing written" in out and "--apply" in out
    # Each decision shows the candidate as it was said and why; the diff follows.
    assert re.search(r'^  add +".+"$', out, re.MULTILINE), out
    assert re.search(r"^ +why \(deterministic\): .+", out, re.MULTILINE)
    assert re.search(r"^\+- .+ <!--m:[0-9a-f]{6}-->$", out, re.MULTILINE)
    assert invoke(root, "promote", "--dry-run", "--agent", "main").stdout == out

    applied = invoke(root, "promote", "--apply", "--agent", "main")
    assert applied.exit_code == 0 and "preview" not in applied.stdout.replace(str(root), "")
    assert "<!--m:" in memory_text(root)
    assert invoke(root, "promote", "--apply", "--dry-run").exit_code == 2


def test_promote_limit_and_min_score_narrow_the_candidates(tmp_path: Path) -> None:
    root = state(tmp_path / "s", None)
    assert invoke(root, "run", "--phase", "light").exit_code == 0
    every = json.loads(invoke(root, "promote", "--agent", "main", "--json").stdout)
    assert every["agents"]["main"]["deep"]["selected"] >= 3
    one = json.loads(invoke(root, "promote", "--agent", "main", "--limit", "1", "--json").stdout)
    assert one["agents"]["main"]["deep"]["selected"] == 1
    none = invoke(root, "promote", "--agent", "main", "--min-score", "1000", "--json")
    assert json.loads(none.stdout)["agents"]["main"]["deep"]["selected"] == 0


@pytest.mark.skipif(backends.CURRENT.name != "sqlite", reason="reads the agent's SQLite file")
def test_a_preview_that_asked_the_model_is_a_run_and_runs_add_up_to_status(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    root = state(tmp_path / "s", fake_openai.base_url, batch=8)
    assert invoke(root, "run", "--phase", "light").exit_code == 0
    fake_openai.enqueue(*[decide_all("add") for _ in range(10)])

    preview = invoke(root, "promote", "--agent", "main", "--json")
    assert preview.exit_code == 0, preview.output
    [run] = json.loads(preview.stdout)["runs"]
    assert run["outcome"] == "preview" and run["run_id"] is not None
    assert "<!--m:" not in memory_text(root)
    listed = json.loads(invoke(root, "runs", "--agent", "main", "--json").stdout)["runs"]
    mine = next(r for r in listed if r["id"] == run["run_id"])
    assert mine["outcome"] == "preview" and mine["llm_calls"] >= 1 and mine["cost_usd"] > 0
    usd, _, n = spend(root)
    assert sum(r["cost_usd"] for r in listed) == pytest.approx(usd)
    assert sum(r["llm_calls"] for r in listed) == n
    # A preview that asks no model leaves no run behind.
    quiet = invoke(root, "promote", "--agent", "main", "--min-score", "1000", "--json")
    assert json.loads(quiet.stdout)["runs"][0]["run_id"] is None


# -- speaking only when useful -------------------------------------------------------------


def test_a_state_folder_with_no_agents_is_an_error_that_says_where_it_looked(
    tmp_path: Path,
) -> None:
    from dreaming.cli import _jobs, _run, _status  # noqa: F401  (registers commands)

    wrong = tmp_path / "wrong"
    wrong.mkdir()
    for args in (["run"], ["jobs", "run", "nightly"], ["status"]):
        result = CliRunner().invoke(cli, ["--state-dir", str(wrong), *args])
        assert result.exit_code == 2, (args, result.output)
        assert "no agents found under" in result.stderr and str(wrong / "agents") in result.stderr


def test_the_tag_banner_is_shown_only_when_asked(tmp_path: Path) -> None:
    root = state(tmp_path / "s", None)
    quiet = invoke(root, "run")
    assert quiet.exit_code == 0
    assert "<relevant_memories>" not in quiet.stderr and "tag" not in quiet.stderr.lower()
    # Off a terminal: one summary line per phase that reports progress, nothing else.
    assert len(quiet.stderr.splitlines()) <= 3, quiet.stderr
    assert re.search(r"^light: \d+ files \(.+\) for 2 agents in ", quiet.stderr, re.MULTILINE)
    loud = invoke(root, "-v", "run", "--phase", "light")
    assert "relevant_memories" in loud.stderr
    as_json = invoke(root, "run", "--json")
    assert as_json.stderr == ""
