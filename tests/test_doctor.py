"""`dreaming doctor`: one ok/warn/fail line per finding with the fix; exit 1 only when
something fails; nothing sent over the network unless --llm."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dreaming.cli import _demo, _doctor, cli  # noqa: F401  (registers the commands)
from tests.fake_openai import DEFAULT_KEY, DEFAULT_MODEL, FakeOpenAI, Reply

LINE = re.compile(
    r"^(ok|warn|fail) {2,}(state|settings|openclaw|tags|sources|coexist|caps"
    r"|endpoint|verify): \S"
)
MEMORY_CORE_OFF = "plugins.entries.memory-core.config.dreaming.enabled = false"


def invoke(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--state-dir", str(root), *args])


def doctor(root: Path, *args: str, code: int = 0) -> list[str]:
    result = invoke(root, "doctor", *args)
    assert result.exit_code == code, result.output
    lines = result.stdout.splitlines()
    assert all(LINE.match(line) for line in lines[:-1]), lines
    assert lines[-1].startswith("doctor: ")
    return lines[:-1]


def report(root: Path, *args: str, code: int = 0) -> dict[str, Any]:
    result = invoke(root, "doctor", "--json", *args)
    assert result.exit_code == code, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    assert doc["ok"] is (code == 0)
    return doc


def found(doc: dict[str, Any], check: str, level: str | None = None) -> list[dict[str, Any]]:
    return [
        c for c in doc["checks"] if c["check"] == check and (level is None or c["level"] == level)
    ]


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A healthy install: `dreaming demo` builds it and runs its night."""
    root = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["demo", "--dir", str(root), "--json"])
    assert result.exit_code == 0, result.output
    return root


def add_settings(root: Path, text: str) -> None:
    config = root / "dreaming.toml"
    config.write_text(config.read_text() + "\n" + text)


def test_a_healthy_demo_passes(demo: Path) -> None:
    lines = doctor(demo)
    assert not [line for line in lines if line.startswith("fail")]
    checks = {line.split()[1].rstrip(":") for line in lines}
    assert checks == {"state", "settings", "openclaw", "tags", "sources", "coexist", "caps",
                      "verify"}  # fmt: skip
    assert "ok    verify: verify passes for 2 agents (bob, main)" in lines
    assert (
        "ok    coexist: dreaming is the one writer of MEMORY.md for 2 agents (bob, main)" in lines
    )
    assert any(line.startswith("ok    sources: the state folder") for line in lines)
    # No LLM: nothing about an endpoint to say unless asked.
    assert not [line for line in lines if " endpoint: " in line]
    doc = report(demo)
    assert doc["state_dir"] == str(demo) and doc["counts"]["fail"] == 0
    assert all(set(c) == {"check", "level", "agent", "message", "fix"} for c in doc["checks"])
    assert all(c["fix"] for c in doc["checks"] if c["level"] != "ok")


def test_a_missing_source_path_fails(demo: Path) -> None:
    add_settings(
        demo,
        '[[sources]]\nkind = "claude-code"\npath = "no-such-folder"\nagent = "claude"\n'
        '[[sources]]\nkind = "event-log"\npath = "empty"\nagent = "events"\n',
    )
    (demo / "empty").mkdir()
    lines = doctor(demo, code=1)
    [missing] = [line for line in lines if line.startswith("fail  sources:")]
    assert f"[[sources]] #1 (claude-code, {demo / 'no-such-folder'})" in missing
    assert "does not exist" in missing and "; fix: correct `path` in dreaming.toml" in missing
    [empty] = [line for line in lines if line.startswith("warn  sources:")]
    assert "#2 (event-log" in empty and "holds no transcripts" in empty
    doc = report(demo, code=1)
    assert len(found(doc, "sources", "fail")) == 1 and len(found(doc, "sources", "warn")) == 1
    assert found(doc, "verify", "ok")  # the other checks still ran


def test_an_invalid_openclaw_json_fails_and_the_rest_still_runs(demo: Path) -> None:
    (demo / "openclaw.json").write_text('{agents: {list: "main"}}')
    lines = doctor(demo, code=1)
    [bad] = [line for line in lines if line.startswith("fail  openclaw:")]
    assert "key 'agents.list': expected a list" in bad and "; fix: fix the file" in bad
    assert any(line.startswith("ok    sources:") for line in lines)
    (demo / "openclaw.json").write_text("{agents: {")  # not JSON5 at all
    [bad] = found(report(demo, code=1), "openclaw", "fail")
    assert "not valid JSON5" in bad["message"]


def test_a_settings_file_that_does_not_load_fails(demo: Path) -> None:
    add_settings(demo, "[deep]\nbatchsize = 4\n")
    lines = doctor(demo, code=1)
    [bad] = [line for line in lines if line.startswith("fail  settings:")]
    assert "unknown key 'deep.batchsize' (did you mean 'batch_size'?)" in bad
    assert any(line.startswith("ok    state:") for line in lines)  # what it could check


def test_a_coexisting_memory_core_agent_is_named_with_the_fix(demo: Path) -> None:
    # memory-core dreams for the agents of agents.list when nothing turns it off.
    (demo / "openclaw.json").write_text('{agents: {list: [{id: "main", default: true}]}}')
    lines = doctor(demo)  # a warning: dreaming keeps out of that MEMORY.md, as it should
    [line] = [line for line in lines if line.startswith("warn  coexist:")]
    assert "agent main: MEMORY.md and DREAMS.md not written: memory-core dreaming" in line
    assert f"; fix: set {MEMORY_CORE_OFF} in {demo / 'openclaw.json'}" in line
    assert "ok    coexist: dreaming is the one writer of MEMORY.md for 1 agent (bob)" in lines
    [finding] = found(report(demo), "coexist", "warn")
    assert finding["agent"] == "main"

    add_settings(demo, '[openclaw]\ncoexist = "write"\n')
    [finding] = found(report(demo), "coexist", "warn")
    assert "two writers on one MEMORY.md" in finding["message"]
    assert MEMORY_CORE_OFF in finding["fix"]


def test_memory_larger_than_what_openclaw_loads_is_a_warning(demo: Path) -> None:
    (demo / "openclaw.json").write_text(
        "{agents: {defaults: {bootstrapMaxChars: 300},"
        ' list: [{id: "main", default: true, plugins: {slots: {"memory.dreaming": "none"}}},'
        ' {id: "bob", bootstrapMaxChars: 50000, plugins: {slots: {"memory.dreaming": "none"}}}]}}'
    )
    add_settings(demo, "[memory]\nmax_chars = 20000\n")
    doc = report(demo)
    caps = found(doc, "caps", "warn")
    grows = [c for c in caps if "max_chars = 20000 lets MEMORY.md grow" in c["message"]]
    assert len(grows) == 1 and "300 characters" in grows[0]["message"]
    assert "1 agent (main)" in grows[0]["message"]
    assert "set it to 300" in grows[0]["fix"]
    [big] = [c for c in caps if c["agent"] == "main"]
    assert "OpenClaw loads 300 and cuts the middle" in big["message"]
    assert [c for c in found(doc, "caps", "ok") if "50000 characters" in c["message"]]


def test_memory_size_is_counted_as_openclaw_counts_it(demo: Path) -> None:
    """OpenClaw is JavaScript: an emoji is two characters of bootstrapMaxChars, and a CRLF
    file's carriage returns are characters too. Doctor counts as `status` does."""
    add_settings(demo, "[memory]\nmax_chars = 20000\n")  # the warning is OpenClaw's cut only
    memory = demo / "workspace" / "MEMORY.md"

    def warned(limit: int) -> list[str]:
        (demo / "openclaw.json").write_text(
            f"{{agents: {{defaults: {{bootstrapMaxChars: {limit}}}, list: ["
            '{id: "main", default: true, plugins: {slots: {"memory.dreaming": "none"}}},'
            ' {id: "bob", bootstrapMaxChars: 50000, plugins: {slots: {"memory.dreaming": "none"}}}'
            "]}}"
        )
        caps = found(report(demo), "caps", "warn")
        return [c["message"] for c in caps if c["agent"] == "main"]

    memory.write_text(memory.read_text() + "\nTrip photos \U0001f3d4\ufe0f\U0001f30a\n" * 12)
    points = len(memory.read_text())
    units = len(memory.read_text().encode("utf-16-le")) // 2
    assert units == points + 24  # each line's two emoji outside the BMP: two units each
    [big] = warned(points + 10)  # enough by code points, not by what OpenClaw counts
    assert f"has {units} characters; OpenClaw loads {points + 10}" in big
    assert warned(units) == []

    memory.write_bytes(memory.read_bytes().replace(b"\n", b"\r\n"))
    crlf = len(memory.read_bytes().decode())
    assert crlf > points == len(memory.read_text())  # reading turns each "\r\n" into "\n"
    [big] = warned(units)
    assert f"has {crlf + 24} characters" in big
    assert warned(crlf + 24) == []


def test_budget_caps_with_an_llm_profile(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_settings(
        demo,
        '[deep]\nllm = "test"\nmax_memory_chars = 12000\n'
        f'[llm.profiles.test]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "{DEFAULT_MODEL}"\n',
    )
    doc = report(demo, code=1)  # OPENAI_API_KEY is not set
    [unbounded] = found(doc, "caps", "warn")
    assert "no [budget]" in unbounded["message"] and "max_usd" in unbounded["fix"]
    [key] = found(doc, "endpoint", "fail")
    assert "OPENAI_API_KEY is not set" in key["message"]

    monkeypatch.setenv("OPENAI_API_KEY", DEFAULT_KEY)
    add_settings(demo, "[budget]\nmax_usd = 0.5\n")
    doc = report(demo, code=1)
    [unpriced] = found(doc, "caps", "fail")
    assert "has no price: every call is refused" in unpriced["message"]
    [endpoint] = found(doc, "endpoint")
    assert endpoint["level"] == "ok" and "not tried" in endpoint["message"]
    assert not found(doc, "caps", "warn")  # 12000 fits what OpenClaw loads


def say_ok(request: dict[str, Any]) -> Reply:
    return Reply({"ok": True})


def test_llm_tries_the_endpoint_and_only_then(
    demo: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_settings(
        demo,
        '[deep]\nllm = "test"\n[budget]\nmax_calls = 10\n'
        f'[llm.profiles.test]\nbase_url = "{fake_openai.base_url}"\nmodel = "{DEFAULT_MODEL}"\n',
    )
    fake_openai.default = say_ok
    monkeypatch.setenv("OPENAI_API_KEY", DEFAULT_KEY)
    doctor(demo)
    assert fake_openai.chat_requests == []  # no network without --llm

    lines = doctor(demo, "--llm")
    [line] = [line for line in lines if " endpoint: " in line]
    assert line.startswith(
        f"ok    endpoint: profile 'test' ({DEFAULT_MODEL} at {fake_openai.base_url})"
    )
    assert "answered in " in line and len(fake_openai.chat_requests) == 1

    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-the-right-key")
    [failed] = found(report(demo, "--llm", code=1), "endpoint", "fail")
    assert "llm check test" in failed["fix"]


def test_a_verify_violation_fails(demo: Path) -> None:
    corpus = demo / "workspace" / "memory" / ".dreams" / "session-corpus"
    for path in corpus.iterdir():
        path.write_text(path.read_text() + "[main/sessions/main/x#L1] forged line\n")
    [bad] = found(report(demo, code=1), "verify", "fail")
    assert bad["agent"] == "main" and "corpus_files" in bad["message"]
    assert "dreaming verify --agent main" in bad["fix"]


def test_a_state_folder_that_is_not_there(tmp_path: Path) -> None:
    lines = doctor(tmp_path / "nowhere", code=1)
    assert lines[0].startswith(f"fail  state: {tmp_path / 'nowhere'} does not exist; fix: ")
    assert any(line.startswith("fail  sources: no transcripts anywhere") for line in lines)


def test_a_state_folder_that_is_not_writable(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = demo / "dreaming"
    real = os.access
    # chmod does not stop root (tests may run as root): the check asks os.access.
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != home and real(p, mode))
    [bad] = found(report(demo, code=1), "state", "fail")
    assert bad["message"] == f"{home} is not writable by this user: runs cannot record their state"
    assert "make it writable" in bad["fix"]


def test_an_agent_database_that_cannot_be_opened_fails_that_agent_alone(demo: Path) -> None:
    (demo / "dreaming" / "agents" / "bob.sqlite").write_bytes(b"not a database" * 100)
    doc = report(demo, code=1)
    [bad] = found(doc, "verify", "fail")
    assert bad["agent"] == "bob" and "not a database" in bad["message"]
    [passed] = found(doc, "verify", "ok")
    assert passed["message"] == "verify passes for 1 agent (main)"
