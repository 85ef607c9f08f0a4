"""The operator's paper cuts: each of them as the operator meets it, through the CLI.

- `forget --wait SECONDS` waits for a run that holds the agent, ahead of runs that would
  start meanwhile; without it a busy agent is an error at once.
- A `[[sources]] path` that does not exist is warned about (stderr, and `warnings` in --json).
- `forget --participant` / `--hook-source` that match no session are errors naming what
  matched nothing, as an unknown `--session` is.
- `runs` marks undone runs; `runs undo --dry-run` names the entries it would restore/remove.
- `run` says, per agent, where MEMORY.md and DREAMS.md are.
- The report's "Tonight" is the last run that changed memory, and its spend shows the
  per-job caps `status` shows.
- `-v` is accepted after the command name too.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dreaming import demo
from dreaming.cli import cli
from dreaming.errors import ExitCode
from dreaming.store.engine import agent_lock


def invoke(root: Path, *args: str) -> Result:
    from dreaming.cli import (  # noqa: F401  (registers commands)
        _entries,
        _forget,
        _jobs,
        _report,
        _run,
        _runs,
        _status,
    )

    base = ["--state-dir", str(root), "--config", str(root / "dreaming.toml")]
    return CliRunner().invoke(cli, [*base, *args])


def as_json(root: Path, *args: str) -> Any:
    result = invoke(root, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def night(tmp_path: Path) -> Path:
    root = demo.build(tmp_path / "s")
    assert invoke(root, "run").exit_code == 0
    return root


# -- forget --wait -------------------------------------------------------------------------


def _dreaming(root: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMING_")}
    return subprocess.Popen(
        [sys.executable, "-m", "dreaming", "--state-dir", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _someone_waits(lock: Path) -> bool:
    waiting = lock.with_name(lock.name + ".waiting")
    if not waiting.exists():
        return False
    fd = os.open(waiting, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_forget_waits_for_the_run_that_holds_the_agent_and_runs_step_aside(
    night: Path,
) -> None:
    lock = night / "dreaming" / "locks" / "main.lock"
    forget = ["forget", "--agent", "main", "--session", "s-main-01"]
    with agent_lock(lock, "main", "nightly"):
        # Without --wait: busy at once; with a short one: busy once it is spent.
        at_once = invoke(night, *forget)
        assert at_once.exit_code == ExitCode.BUSY
        assert "agent 'main' is busy: another run holds its lock (pid" in at_once.stderr
        started = time.monotonic()
        short = invoke(night, *forget, "--wait", "0.3")
        assert short.exit_code == ExitCode.BUSY and "waited 0.3s" in short.stderr
        assert time.monotonic() - started >= 0.3
        waiter = _dreaming(night, *forget, "--wait", "120", "--json")
        deadline = time.monotonic() + 60
        while not _someone_waits(lock):
            assert waiter.poll() is None, waiter.communicate()
            assert time.monotonic() < deadline, "the forget never started waiting"
            time.sleep(0.02)
        # A run that comes while the purge waits steps aside: erasure is not starved.
        late = invoke(night, "run", "--agent", "main")
        assert late.exit_code == ExitCode.BUSY
        assert "is waiting for it" in late.stderr and "forget" in late.stderr
    out, err = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, err
    report = json.loads(out)
    assert [s["session_id"] for s in report["sessions"]] == ["s-main-01"]
    assert report["counts"]["tombstones"] == 1
    # The waiting file says nothing once the purge has the agent.
    assert not _someone_waits(lock)
    assert invoke(night, "run", "--agent", "main").exit_code == 0


# -- sources that are not there ------------------------------------------------------------


def test_a_mistyped_source_path_is_warned_about(night: Path, tmp_path: Path) -> None:
    typo = tmp_path / "no-such-projects"
    config = night / "dreaming.toml"
    config.write_text(
        config.read_text()
        + f'\n[[sources]]\nkind = "claude-code"\npath = "{typo}"\nagent = "main"\n'
    )
    text = invoke(night, "run", "--phase", "light")
    assert text.exit_code == 0
    warning = f"dreaming: warning: [[sources]] path {typo} (claude-code) does not exist"
    assert warning in text.stderr and str(config) in text.stderr
    doc = json.loads(invoke(night, "run", "--phase", "light", "--json").stdout)
    assert len(doc["warnings"]) == 1 and str(typo) in doc["warnings"][0]
    jobs = invoke(night, "jobs", "run", "nightly", "--json")
    assert str(typo) in json.loads(jobs.stdout)["warnings"][0]


# -- forget that matches nothing -----------------------------------------------------------


def test_forget_selectors_that_match_nothing_are_errors_that_say_what_there_is(
    night: Path,
) -> None:
    before = (night / "workspace" / "MEMORY.md").read_bytes()
    nobody = invoke(night, "forget", "--agent", "main", "--participant", "nobody:1")
    assert nobody.exit_code == ExitCode.USAGE
    assert nobody.stderr.strip() == (
        "dreaming: error: agent main has no session with participant 'nobody:1' (nothing"
        " forgotten; its sessions' participants: telegram:user123)"
    )
    outlook = invoke(night, "forget", "--agent", "main", "--hook-source", "outlook")
    assert outlook.exit_code == ExitCode.USAGE
    assert "no session from hook source 'outlook'" in outlook.stderr
    assert "its sessions' hook sources: gmail" in outlook.stderr
    session = invoke(night, "forget", "--agent", "main", "--session", "s-nope", "--dry-run")
    assert session.exit_code == ExitCode.USAGE
    assert "has no session 's-nope'" in session.stderr and "s-main-01" in session.stderr
    assert (night / "workspace" / "MEMORY.md").read_bytes() == before
    assert not (night / "dreaming" / "tombstones").exists()
    # What does match still works, and again: a repeat matches the forgotten session.
    for _ in range(2):
        done = invoke(night, "forget", "--agent", "main", "--participant", "telegram:user123")
        assert done.exit_code == 0, done.output


# -- undo in runs --------------------------------------------------------------------------


def test_runs_marks_undone_runs_and_undo_dry_run_names_the_entries(night: Path) -> None:
    texts = {e["key"]: e["text"] for e in as_json(night, "entries", "--agent", "main")["entries"]}
    preview = invoke(night, "runs", "undo", "1", "--agent", "main", "--dry-run")
    assert preview.exit_code == 0, preview.output
    named = re.findall(r"^    remove (m:[0-9a-f]{16})  (.+)$", preview.stdout, re.MULTILINE)
    assert dict(named) == texts
    report = as_json(night, "runs", "undo", "1", "--agent", "main", "--dry-run")
    assert report["texts"] == texts and sorted(report["removed"]) == sorted(texts)

    assert invoke(night, "runs", "undo", "1", "--agent", "main").exit_code == 0
    listing = invoke(night, "runs").stdout.splitlines()
    [main_1] = [line for line in listing if re.match(r"^main +1 ", line)]
    assert main_1.endswith("  undone by run 2")
    [bob_1] = [line for line in listing if re.match(r"^bob +1 ", line)]
    assert "undone" not in bob_1
    runs = {(r["agent"], r["id"]): r["undone_by"] for r in as_json(night, "runs")["runs"]}
    assert runs == {("main", 2): None, ("main", 1): 2, ("bob", 1): None}
    shown = invoke(night, "runs", "show", "1", "--agent", "main").stdout
    assert "  outcome: ok (undone by run 2)" in shown
    assert as_json(night, "runs", "show", "1", "--agent", "main")["undone_by"] == 2


# -- where the files are -------------------------------------------------------------------


def test_run_says_where_each_agents_memory_and_diary_are(night: Path) -> None:
    result = invoke(night, "run")
    assert result.exit_code == 0
    for agent, ws in (("bob", "workspace-bob"), ("main", "workspace")):
        files = f"MEMORY.md {night / ws / 'MEMORY.md'}, DREAMS.md {night / ws / 'DREAMS.md'}"
        line = f"agent {agent}: {files}"
        assert result.stdout.count(line) == 1, result.stdout
    runs = as_json(night, "run", "--phase", "light")["runs"]
    assert {r["agent"]: r["memory"] for r in runs} == {
        "bob": str(night / "workspace-bob" / "MEMORY.md"),
        "main": str(night / "workspace" / "MEMORY.md"),
    }


# -- the report ----------------------------------------------------------------------------


def test_the_reports_tonight_is_the_last_run_that_changed_memory(night: Path) -> None:
    assert invoke(night, "run").exit_code == 0  # a quiet night: changes nothing
    page = invoke(night, "report", "--out", "-", "--agent", "main").stdout
    tonight = page[page.index('id="agent-main-tonight"') : page.index('id="agent-main-memory"')]
    assert "run #1 (light, rem, deep)" in tonight
    assert "Memory did not change." not in tonight and "Added (4)" in tonight
    assert "The last run with a deep phase, #2" in tonight and "changed nothing" in tonight
    # Undone, it changed nothing that stayed: the later quiet night is all there is.
    assert invoke(night, "runs", "undo", "1", "--agent", "main").exit_code == 0
    page = invoke(night, "report", "--out", "-", "--agent", "main").stdout
    tonight = page[page.index('id="agent-main-tonight"') : page.index('id="agent-main-memory"')]
    assert "run #2 (light, rem, deep)" in tonight and "Memory did not change." in tonight


def test_the_reports_spend_shows_each_jobs_daily_cap_as_status_does(night: Path) -> None:
    caps = as_json(night, "status", "--agent", "main")["agents"][0]["spend_today"]["caps"]
    page = invoke(night, "report", "--out", "-", "--agent", "main").stdout
    spend = page[page.index('id="agent-main-spend"') :]
    table = spend[spend.index('<table class="caps">') : spend.index("</table>")]
    rows = re.findall(r"<tr><td>(.*?)</td>", table)
    assert rows == ["run / promote (settings)"] + [f"job {c['job']}" for c in caps[1:]]
    assert "job nightly" in rows and "$1.00" in table  # the bundled nightly's daily cap


# -- -v after the command ------------------------------------------------------------------


def test_verbose_goes_before_or_after_the_command(night: Path) -> None:
    before = invoke(night, "-v", "run", "--phase", "light")
    after = invoke(night, "run", "--phase", "light", "-v")
    assert before.exit_code == after.exit_code == 0
    assert "injected-context tags:" in before.stderr and "injected-context tags:" in after.stderr
    quiet = invoke(night, "run", "--phase", "light")
    assert "injected-context tags:" not in quiet.stderr
    nested = invoke(night, "jobs", "run", "nightly", "--agent", "main", "-v")
    assert nested.exit_code == 0 and "injected-context tags:" in nested.stderr
