"""One exit-status table: the README's is `dreaming.errors.ExitCode`, and every row holds
for the commands it names (the same cause exits the same way from `run`, `jobs run`,
`forget` and `llm check`)."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dreaming import demo
from dreaming.cli import cli
from dreaming.errors import ExitCode
from dreaming.store.engine import agent_lock
from tests.fake_openai import DEFAULT_KEY, closed_port_url
from tests.test_interrupt import interrupted_run
from tests.test_operator import state

README = Path(__file__).resolve().parents[1] / "README.md"
KEY = {"OPENAI_API_KEY": DEFAULT_KEY}


def invoke(root: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    from dreaming.cli import (  # noqa: F401  (registers commands)
        _entries,
        _forget,
        _jobs,
        _llm,
        _run,
        _runs,
        _verify,
    )

    base = ["--state-dir", str(root), "--config", str(root / "dreaming.toml")]
    return CliRunner(env=env or {}).invoke(cli, [*base, *args])


def readme_table() -> dict[int, str]:
    """The README's exit-status table: status -> name."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Exit status") :]
    section = section[: section.index("\n## ")]
    rows = re.findall(r"^\| `(\d+)` \| `([A-Z_]+)` \| (.+) \|$", section, re.MULTILINE)
    assert rows, "no table under ### Exit status"
    return {int(code): name for code, name, _ in rows}


def test_the_readme_table_is_the_code_table() -> None:
    assert readme_table() == {c.value: c.name for c in ExitCode}


@pytest.fixture
def night(tmp_path: Path) -> Path:
    root = demo.build(tmp_path / "s")
    assert invoke(root, "run").exit_code == ExitCode.OK
    return root


@pytest.fixture
def main_held(night: Path) -> Iterator[Path]:
    """The night, with main's lock held by another holder (this process, as a run would)."""
    with agent_lock(night / "dreaming" / "locks" / "main.lock", "main", "nightly"):
        yield night


def one_error(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("dreaming: error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


def test_ok(night: Path) -> None:
    for args in (["run"], ["jobs", "run", "nightly"], ["verify"], ["promote"]):
        assert invoke(night, *args).exit_code == ExitCode.OK, args


def test_failed(night: Path) -> None:
    (night / "workspace" / "MEMORY.md").write_bytes(b"# notes\n\xff\n")
    run = invoke(night, "run")
    assert run.exit_code == ExitCode.FAILED
    assert "MEMORY.md: not valid UTF-8" in one_error(run)
    assert "agent bob: deep phase" in run.stdout  # the others still ran
    assert invoke(night, "jobs", "run", "nightly").exit_code == ExitCode.FAILED
    assert invoke(night, "verify").exit_code == ExitCode.FAILED


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--agent", "nosuch"], "unknown agent(s): nosuch (known: bob, main)"),
        (["jobs", "run", "nightly", "--agent", "nosuch"], "unknown agent(s): nosuch"),
        (["jobs", "run", "nosuch"], "unknown job 'nosuch'"),
        (["forget", "--agent", "main", "--session", "nosuch"], "has no session 'nosuch'"),
        (["forget", "--agent", "main", "--participant", "nobody:1"], "participant 'nobody:1'"),
        (["forget", "--agent", "main", "--hook-source", "outlook"], "hook source 'outlook'"),
        (["runs", "show", "99", "--agent", "main"], "no run 99"),
        (["entries", "show", "m:0000"], "no live entry"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_usage_a_name_that_matches_nothing(night: Path, args: list[str], said: str) -> None:
    result = invoke(night, *args)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert said in one_error(result)


def test_usage_a_bad_option_or_no_agents_at_all(night: Path, tmp_path: Path) -> None:
    assert invoke(night, "run", "--phase", "nope").exit_code == ExitCode.USAGE
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "dreaming.toml").write_text("")
    assert invoke(empty, "run").exit_code == ExitCode.USAGE


def test_usage_a_missing_api_key_from_every_command_that_needs_it(tmp_path: Path) -> None:
    root = state(tmp_path / "s", closed_port_url())
    for args in (["run"], ["promote"], ["jobs", "run", "nightly"], ["llm", "check"]):
        result = invoke(root, *args)  # no OPENAI_API_KEY
        assert result.exit_code == ExitCode.USAGE, (args, result.output)
        assert "no API key" in one_error(result) and "OPENAI_API_KEY" in result.stderr
    # Stopped before any agent: nothing read, nothing recorded.
    assert not (root / "dreaming" / "agents").exists()
    as_json = invoke(root, "run", "--json")
    assert json.loads(as_json.stdout) == {
        "error": one_error(as_json).removeprefix("dreaming: error: "),
        "exit_code": 2,
    }


def test_degraded(tmp_path: Path) -> None:
    root = state(tmp_path / "s", closed_port_url())
    assert invoke(root, "run", "--agent", "main", env=KEY).exit_code == ExitCode.DEGRADED


def test_busy_is_one_status_from_run_jobs_run_and_forget(main_held: Path) -> None:
    run = invoke(main_held, "run")
    assert run.exit_code == ExitCode.BUSY
    assert "agent 'main' is busy" in one_error(run) and "agent bob:" in run.stdout
    job = invoke(main_held, "jobs", "run", "nightly")
    assert job.exit_code == ExitCode.BUSY
    assert "agent main: skipped, locked by" in job.stdout
    forget = invoke(main_held, "forget", "--agent", "main", "--session", "s-main-01")
    assert forget.exit_code == ExitCode.BUSY
    assert "agent 'main' is busy" in one_error(forget)
    runs: Any = json.loads(invoke(main_held, "run", "--agent", "main", "--json").stdout)
    assert runs["exit_code"] == ExitCode.BUSY  # every agent busy: the error as a document


def test_a_failure_outranks_degraded_and_busy(main_held: Path) -> None:
    (main_held / "workspace-bob" / "MEMORY.md").write_bytes(b"\xff")
    assert invoke(main_held, "run").exit_code == ExitCode.FAILED


def test_interrupted(tmp_path: Path) -> None:
    root = demo.build(tmp_path / "s")
    done = interrupted_run(root, "light.after_commit:2", signal.SIGINT)
    assert done.returncode == ExitCode.INTERRUPTED, done.stderr
    assert done.stderr.splitlines()[-1] == "dreaming: interrupted"
