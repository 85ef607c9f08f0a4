"""`dreaming logs` (the LLM call log read back) and `dreaming llm check` (one request to a
profile's endpoint), with the real client against the loopback fake OpenAI server."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dreaming import demo
from dreaming.cli import cli
from tests import backends
from tests.deep_helpers import build_state, decide_all
from tests.fake_openai import (
    DEFAULT_KEY,
    DEFAULT_MODEL,
    Delay,
    ErrorReply,
    FakeOpenAI,
    Reply,
    closed_port_url,
    running_fake_openai,
)


def invoke(root: Path, *args: str) -> Result:
    from dreaming.cli import _llm, _logs, _run  # noqa: F401  (registers commands)

    base = ["--state-dir", str(root), "--config", str(root / "dreaming.toml")]
    return CliRunner().invoke(cli, [*base, *args])


def as_json(root: Path, *args: str) -> Any:
    result = invoke(root, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # one document, nothing else on stdout


def error_line(result: Result) -> str:
    """The CLI's one-line error (client log lines may come before it when logging is set up
    by someone else, as under pytest)."""
    return result.stderr.strip().splitlines()[-1]


def with_profile(root: Path, base_url: str, *, deep: str | None = 'llm = "test"') -> Path:
    """A demo state folder with profile `test` at `base_url` and the default retry bounds
    (4 attempts within 120 s), which `llm check` must not use; `deep` is the [deep] table."""
    demo.build(root)
    config = (root / "dreaming.toml").read_text()
    if deep is not None:
        config += f"\n[deep]\n{deep}\n"
    config += (
        f'\n[llm.profiles.test]\nbase_url = "{base_url}"\nmodel = "{DEFAULT_MODEL}"\n'
        "price_input_per_mtok = 1.0\nprice_output_per_mtok = 2.0\n"
    )
    (root / "dreaming.toml").write_text(config)
    backends.CURRENT.configure(root)
    return root


# -- dreaming logs --------------------------------------------------------------------------


def refuse_the_diary(request: dict[str, Any]) -> Any:
    """REM's diary request gets an HTTP 400; deep's decisions are answered (`add` each)."""
    if request["response_format"]["json_schema"]["name"] == "dream_diary":
        return ErrorReply(400, "diary refused here")
    return decide_all("add")(request)


@pytest.fixture
def logged(tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Path:
    """main: run 1 reads only (no calls), run 2 is a night with calls (REM's diary, then
    deep in batches of 3); bob: run 1 with calls."""
    root = with_profile(tmp_path / "s", fake_openai.base_url, deep='llm = "test"\nbatch_size = 3')
    fake_openai.default = refuse_the_diary
    monkeypatch.setenv("OPENAI_API_KEY", DEFAULT_KEY)
    assert invoke(root, "run", "--agent", "main", "--phase", "light").exit_code == 0
    # The refused diary makes each night `degraded` (exit 3) where REM asked for one.
    assert invoke(root, "run", "--agent", "main").exit_code == 3
    assert invoke(root, "run", "--agent", "bob").exit_code in (0, 3)
    return root


@pytest.mark.usefixtures("backend")  # per-agent SQLite files, and a fleet's PostgreSQL
def test_logs_show_every_call_of_a_night_newest_first(
    logged: Path, fake_openai: FakeOpenAI
) -> None:
    calls = as_json(logged, "logs", "-n", "0")["calls"]
    agents = [c["agent"] for c in calls]
    assert agents == ["bob"] * agents.count("bob") + ["main"] * 4  # bob's night was the last
    times = [datetime.fromisoformat(c["created_at"]) for c in calls]
    assert times == sorted(times, reverse=True) and all(t.tzinfo for t in times)

    main = calls[-4:]
    assert [(c["run_id"], c["outcome"]) for c in main] == [(2, "ok")] * 3 + [(2, "failed")]
    deep, diary = main[0], main[-1]
    # Deep's call, as the server received and answered it.
    assert deep["outcome"] == "ok" and deep["attempt"] == 1 and deep["http_status"] == 200
    assert deep["model"] == DEFAULT_MODEL and deep["error"] is None
    assert [m["role"] for m in deep["request"]] == ["system", "user"]
    served = [r for r in fake_openai.chat_requests if r.messages == deep["request"]]
    assert len(served) == 1, "the logged prompt is the one that was sent"
    assert json.loads(deep["response"])["decisions"][0]["action"] == "add"
    assert deep["input_tokens"] > 0 and deep["output_tokens"] > 0
    assert deep["cost_usd"] == pytest.approx(
        (deep["input_tokens"] * 1.0 + deep["output_tokens"] * 2.0) / 1e6
    )
    assert deep["duration_s"] > 0
    ok_calls = [c for c in calls if c["outcome"] == "ok"]
    assert sum(c["input_tokens"] for c in ok_calls) == fake_openai.prompt_tokens
    assert sum(c["output_tokens"] for c in ok_calls) == fake_openai.completion_tokens
    # REM's refused diary: the status, the server's error and the failure are all kept.
    assert diary["outcome"] == "failed" and diary["http_status"] == 400
    assert "diary refused here" in diary["error"] and "diary refused here" in diary["response"]

    text = invoke(logged, "logs", "-n", "1", "--agent", "main")
    assert text.exit_code == 0, text.output
    out = text.stdout
    assert out.startswith(f"# {deep['created_at'][:19]}+00:00    agent: main    run: 2    call: ")
    assert f"Model: **{DEFAULT_MODEL}**\nOutcome: ok, attempt 1, HTTP 200, " in out
    assert (
        f"Tokens: {deep['input_tokens']} input, {deep['output_tokens']} output;"
        f" cost ${deep['cost_usd']:.6f}"
    ) in out
    system, user = (m["content"] for m in deep["request"])
    assert f"\n## System\n\n{system.rstrip()}\n\n## Prompt\n\n{user.rstrip()}\n" in out
    assert '\n## Response\n\n{\n  "decisions": [\n' in out  # the reply indented
    assert out.count("\n## Response\n") == 1 and "## Error" not in out

    every = invoke(logged, "logs", "-n", "0", "--agent", "main").stdout
    assert every.count("\n## Response\n") == 4
    refused = every.rsplit("\n# ", 1)[1]  # the oldest: REM's diary
    assert "\nOutcome: failed, attempt 1, HTTP 400, " in refused
    assert "\n## Error\n\n" in refused and "(HTTP 400: diary refused here)" in refused


def test_logs_count_agent_and_run(logged: Path) -> None:
    every = as_json(logged, "logs", "-n", "0")["calls"]
    assert len(every) >= 5  # main: REM's diary and three deep batches; bob: deep
    assert as_json(logged, "logs")["calls"] == every[:3]  # like `llm logs`: 3 by default
    assert as_json(logged, "logs", "-n", "1")["calls"] == every[:1]

    bob = as_json(logged, "logs", "--agent", "bob", "-n", "0")["calls"]
    assert bob and bob == [c for c in every if c["agent"] == "bob"]
    # Run ids are per agent: without --agent, every agent's run R.
    run_2 = as_json(logged, "logs", "--run", "2", "-n", "0")["calls"]
    assert run_2 == [c for c in every if c["agent"] == "main"]
    run_1 = as_json(logged, "logs", "--run", "1", "-n", "0")["calls"]
    assert run_1 == bob  # main's run 1 only read transcripts
    none = invoke(logged, "logs", "--run", "1", "--agent", "main")
    assert none.exit_code == 0
    assert none.stdout.startswith("no LLM calls recorded for main in run 1 under ")

    unknown = invoke(logged, "logs", "--agent", "zed")
    assert unknown.exit_code == 2
    assert error_line(unknown) == "dreaming: error: unknown agent(s): zed (known: bob, main)"


def test_logs_with_no_calls_recorded(tmp_path: Path) -> None:
    root = build_state(tmp_path / "s")  # the deterministic consolidator: no LLM
    assert as_json(root, "logs")["calls"] == []  # no state at all yet
    assert invoke(root, "run").exit_code == 0
    assert as_json(root, "logs", "-n", "0")["calls"] == []
    result = invoke(root, "logs")
    assert result.exit_code == 0
    assert result.stdout == f"no LLM calls recorded under {root / 'dreaming'}\n"


# -- dreaming llm check ---------------------------------------------------------------------


def say_ok(request: dict[str, Any]) -> Reply:
    return Reply({"ok": True}, model="fake-model-2025-01-01")


def test_llm_check_reports_a_working_endpoint(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_profile(tmp_path / "s", fake_openai.base_url)
    fake_openai.default = say_ok
    monkeypatch.setenv("OPENAI_API_KEY", DEFAULT_KEY)
    report = as_json(root, "llm", "check")  # the profile deep uses
    assert report["ok"] is True and report["error"] is None
    assert (report["profile"], report["base_url"]) == ("test", fake_openai.base_url)
    assert report["served_model"] == "fake-model-2025-01-01"
    assert report["json_schema"] is True and report["mode"] == "json_schema"
    assert report["input_tokens"] == fake_openai.prompt_tokens > 0
    assert report["output_tokens"] == fake_openai.completion_tokens > 0
    assert report["cost_usd"] == pytest.approx(
        (report["input_tokens"] + 2 * report["output_tokens"]) / 1e6
    )
    assert report["latency_s"] > 0 and len(report["requests"]) == 1
    [sent] = fake_openai.chat_requests
    assert sent.json["response_format"]["type"] == "json_schema"
    assert sent.json["max_tokens"] <= 256  # a small request, whatever the profile allows

    text = invoke(root, "llm", "check", "test")
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert lines[0] == "profile:    test"
    assert lines[1] == f"base_url:   {fake_openai.base_url}"
    assert lines[2] == f"model:      {DEFAULT_MODEL} (the server reports fake-model-2025-01-01)"
    assert lines[3].startswith("key from:   ")  # which variable holds the key it sends
    assert lines[4].startswith("latency:    ") and lines[4].endswith("s (1 request)")
    assert lines[5].startswith("tokens:     ") and " output; cost $0.0000" in lines[5]
    assert lines[6] == "structured: json_schema accepted"
    assert lines[7] == "ok: profile 'test' can serve a night"


def test_llm_check_reports_the_json_object_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for server in running_fake_openai(json_schema_supported=False):
        server.default = say_ok
        root = with_profile(tmp_path / "s", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", DEFAULT_KEY)
        report = as_json(root, "llm", "check")
        assert report["ok"] is True
        assert report["json_schema"] is False and report["mode"] == "json_object"
        assert [(r["mode"], r["http_status"]) for r in report["requests"]] == [
            ("json_schema", 500),
            ("json_object", 200),
        ]
        text = invoke(root, "llm", "check")
        assert text.exit_code == 0, text.output
        assert (
            "structured: json_schema rejected (HTTP 500): the json_object fallback will be used"
            in text.stdout
        )


def test_llm_check_fails_fast_on_a_refused_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = closed_port_url()
    root = with_profile(tmp_path / "s", url)
    monkeypatch.setenv("OPENAI_API_KEY", DEFAULT_KEY)
    started = time.monotonic()
    result = invoke(root, "llm", "check")
    took = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert error_line(result).startswith(f"dreaming: error: cannot reach {url}: ")
    assert took < 5, f"the check took {took:.1f}s against a refused port"
    assert "profile:    test" in result.stdout and "ok:" not in result.stdout

    report = json.loads(invoke(root, "llm", "check", "--json").stdout)
    assert report["ok"] is False and report["error"].startswith(f"cannot reach {url}")
    assert len(report["requests"]) <= 2 and report["json_schema"] is None


def test_llm_check_fails_on_a_rejected_key(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_profile(tmp_path / "s", fake_openai.base_url)
    fake_openai.default = say_ok
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-the-right-key")
    result = invoke(root, "llm", "check")
    assert result.exit_code == 1, result.output
    assert error_line(result).startswith(
        "dreaming: error: the server rejected the API key: set OPENAI_API_KEY (profile 'test')"
        " [HTTP 401: Incorrect API key provided"
    )
    assert len(fake_openai.chat_requests) == 1  # a refused key is not retried


def test_llm_check_gives_up_at_its_timeout(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_profile(tmp_path / "s", fake_openai.base_url)
    fake_openai.enqueue(Delay(30, {"ok": True}))
    monkeypatch.setenv("OPENAI_API_KEY", DEFAULT_KEY)
    started = time.monotonic()
    result = invoke(root, "llm", "check", "--timeout", "0.5")
    assert result.exit_code == 1, result.output
    assert re.search(r"no answer within 0\.[0-9]+s \(gave up after 1 attempt", error_line(result))
    assert time.monotonic() - started < 5


def test_llm_check_settings_errors_exit_2(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_profile(tmp_path / "s", fake_openai.base_url, deep=None)
    unnamed = invoke(root, "llm", "check")
    assert unnamed.exit_code == 2
    assert error_line(unnamed) == (
        "dreaming: error: no profile given and [deep] llm is not set: name one (known: test)"
    )
    unknown = invoke(root, "llm", "check", "nope")
    assert unknown.exit_code == 2
    assert error_line(unknown) == (
        "dreaming: error: no LLM profile 'nope' under [llm.profiles] (known: test)"
    )
    no_key = invoke(root, "llm", "check", "test")  # OPENAI_API_KEY is not set
    assert no_key.exit_code == 2
    assert error_line(no_key).startswith(
        "dreaming: error: no API key for model 'fake-model' (profile 'test'): set the "
        "OPENAI_API_KEY environment variable"
    )
    assert fake_openai.chat_requests == []
