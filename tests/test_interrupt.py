"""An interrupted night (issue #23 item 8): Ctrl-C (SIGINT) or SIGTERM at any point of a run
prints `interrupted`, exits 130, records the run `interrupted`, and leaves files in step with
what was committed, so `verify` passes and the next night converges to an uninterrupted
one. A run killed outright (no cleanup) leaves what `verify` explains with "run again".

Every interrupted or killed run is a real `dreaming` process; `DREAMING_PAUSE_AT`
(dreaming.faults) stops it at a named point so that the signal arrives exactly there. The
nights and checks around them run in this process (tests/cli_process.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dreaming import demo
from dreaming.faults import PAUSE_ENV, PAUSE_FILE_ENV
from tests.cli_process import in_process, process

EXIT_INTERRUPTED = 130
AGENTS = {"main": "workspace", "bob": "workspace-bob"}


def dreaming(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A process when `env` sets something only a process survives (a crash point)."""
    argv = ["--state-dir", str(root), *args]
    return in_process(argv) if env is None else process(argv, env)


def interrupted_run(root: Path, point: str, signum: int) -> subprocess.CompletedProcess[str]:
    """`dreaming run` stopped at `point` (`<name>:<n>`), then sent `signum`."""
    paused = root.parent / "paused"
    paused.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMING_")}
    env |= {PAUSE_ENV: point, PAUSE_FILE_ENV: str(paused)}
    child = subprocess.Popen(
        [sys.executable, "-m", "dreaming", "--state-dir", str(root), "run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 120
    while not (paused.exists() and paused.read_text()):
        assert child.poll() is None, f"the run ended before reaching {point}"
        assert time.monotonic() < deadline, f"the run never reached {point}"
        time.sleep(0.02)
    child.send_signal(signum)
    out, err = child.communicate(timeout=120)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def memories(root: Path) -> dict[str, str]:
    out = {}
    for agent, ws in AGENTS.items():
        path = root / ws / "MEMORY.md"
        out[agent] = path.read_text() if path.exists() else ""
    return out


def last_outcome(root: Path, agent: str) -> str | None:
    db = root / "dreaming" / "agents" / f"{agent}.sqlite"
    if not db.exists():
        return None
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT outcome FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    return None if row is None else str(row[0])


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """MEMORY.md of every agent after one uninterrupted night over the demo."""
    root = demo.build(tmp_path_factory.mktemp("reference") / "state")
    done = dreaming(root, "run")
    assert done.returncode == 0, done.stderr
    return memories(root)


@pytest.mark.parametrize(
    ("point", "signum"),
    [
        ("light.after_commit:1", signal.SIGINT),  # between two agents' commits
        ("light.after_commit:2", signal.SIGTERM),
        ("light.read:3", signal.SIGINT),  # files read, their batch not committed yet
        ("light.before_commit:2", signal.SIGINT),  # inside a batch's transaction
        ("deep.after_commit:1", signal.SIGTERM),  # decisions committed, MEMORY.md not written
        ("deep.after_commit:2", signal.SIGINT),
    ],
    ids=lambda v: v if isinstance(v, str) else signal.Signals(v).name,
)
def test_an_interrupted_night_exits_130_and_leaves_a_state_verify_passes(
    tmp_path: Path, reference: dict[str, str], point: str, signum: int
) -> None:
    root = demo.build(tmp_path / "state")
    done = interrupted_run(root, point, signum)
    assert done.returncode == EXIT_INTERRUPTED, done.stdout + done.stderr
    assert "interrupted" in done.stderr.splitlines()[-1], done.stderr
    assert "Aborted!" not in done.stderr
    # The progress summary does not claim the phase it stopped in finished.
    summary = [line for line in done.stderr.splitlines() if line.startswith(("light:", "deep:"))]
    assert summary and summary[-1].endswith("then interrupted"), done.stderr
    outcomes = {a: last_outcome(root, a) for a in AGENTS}
    assert "interrupted" in outcomes.values(), outcomes

    checked = dreaming(root, "verify")
    assert checked.returncode == 0, checked.stdout

    again = dreaming(root, "run")
    assert again.returncode == 0, again.stderr
    assert memories(root) == reference
    assert dreaming(root, "verify").returncode == 0


def test_a_run_killed_outright_is_explained_by_verify_with_run_again(tmp_path: Path) -> None:
    """SIGKILL (or a power cut) leaves no chance to clean up: verify fails, and says why."""
    root = demo.build(tmp_path / "state")
    done = dreaming(root, "run", env={"DREAMING_CRASH_AT": "light.after_commit:2"})
    assert done.returncode == 137
    checked = dreaming(root, "verify")
    assert checked.returncode == 1
    violations = [line for line in checked.stdout.splitlines() if "violation:" in line]
    assert violations and all("run again" in line for line in violations), checked.stdout
    assert dreaming(root, "run").returncode == 0
    assert dreaming(root, "verify").returncode == 0


def test_the_pause_point_waits_for_the_signal(tmp_path: Path) -> None:
    """The test mechanism itself: with no signal the run is still there, paused."""
    root = demo.build(tmp_path / "state")
    paused = tmp_path / "paused"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMING_")}
    env |= {PAUSE_ENV: "light.after_commit:1", PAUSE_FILE_ENV: str(paused)}
    child = subprocess.Popen(
        [sys.executable, "-m", "dreaming", "--state-dir", str(root), "run"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not (paused.exists() and paused.read_text()):
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.02)
        assert int(paused.read_text()) == child.pid
        time.sleep(0.5)
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
    shutil.rmtree(root)
