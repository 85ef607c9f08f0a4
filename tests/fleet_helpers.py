"""Fleet test set-up: a state folder with many agents on one PostgreSQL database, jobs,
real `dreaming worker` processes, and reading back what the queue and the runs did."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from dreaming import demo

DREAMING = str(Path(sys.executable).parent / "dreaming")

# Quick heartbeats so a dead worker is noticed within seconds, not a minute.
FAST_FLEET = """
[fleet]
heartbeat_s = 0.5
stalled_after_s = 2.0
stalled_check_cron = "* * * * * *"
"""

JOBS = {
    "ingest": ["light"],
    "dream": ["rem"],
    "nightly": ["light", "rem", "deep"],
}


def build_fleet(root: Path, agents: int, database_url: str | None, extra: str = "") -> Path:
    """The demo's two agents cloned into `agents` agents (a1, b1, a2, b2, ...), with a jobs
    folder holding JOBS. `database_url` None: a local install on SQLite files."""
    demo.build(root)
    templates = ["main", "bob"]
    for i in range(agents):
        source = templates[i % 2]
        name = f"{'ab'[i % 2]}{i // 2 + 1}"
        shutil.copytree(root / "agents" / source, root / "agents" / name)
        workspace = root / ("workspace" if source == "main" else f"workspace-{source}")
        shutil.copytree(workspace, root / f"workspace-{name}")
    for source in templates:
        shutil.rmtree(root / "agents" / source)
    shutil.rmtree(root / "workspace")
    shutil.rmtree(root / "workspace-bob")
    jobs = root / "jobs"
    jobs.mkdir()
    for name, phases in JOBS.items():
        listed = ", ".join(f'"{p}"' for p in phases)
        (jobs / f"{name}.toml").write_text(f'name = "{name}"\nphases = [{listed}]\nagents = "*"\n')
    config = root / "dreaming.toml"
    head = f'jobs_dir = "{jobs}"\n' + (f'database_url = "{database_url}"\n' if database_url else "")
    config.write_text(head + config.read_text() + extra)
    return root


def agent_names(agents: int) -> list[str]:
    return sorted(f"{'ab'[i % 2]}{i // 2 + 1}" for i in range(agents))


def dreaming(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [DREAMING, "--state-dir", str(root), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@dataclass
class Worker:
    process: subprocess.Popen[str]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def start_worker(root: Path, name: str, env_extra: dict[str, str] | None = None) -> Worker:
    log = root.parent / f"worker-{name}.log"
    env = dict(os.environ) | (env_extra or {})
    handle = log.open("w")
    process = subprocess.Popen(
        [DREAMING, "--state-dir", str(root), "worker", "--poll", "0.2"],
        stdout=handle,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    handle.close()
    return Worker(process, log)


def _rows(url: str, sql: str) -> list[dict[str, Any]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(text(sql)).mappings()]
    finally:
        engine.dispose()


def queue_states(url: str) -> dict[str, int]:
    rows = _rows(
        url,
        "SELECT status, count(*) AS n FROM procrastinate_jobs "
        "WHERE task_name = 'dreaming.run_agent_job' GROUP BY status",
    )
    return {str(r["status"]): int(r["n"]) for r in rows}


def crash_a_worker(root: Path, crash_at: str) -> None:
    """Start a worker that dies (as by SIGKILL: no cleanup) at `crash_at`, queue the
    nightly job, and wait for the death; its task is left `doing`."""
    doomed = start_worker(root, "doomed", {"DREAMING_CRASH_AT": crash_at})
    try:
        dreaming(root, "jobs", "run", "nightly", "--executor", "procrastinate")
        deadline = time.monotonic() + 60
        while doomed.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert doomed.process.returncode == 137, doomed.output()
    finally:
        doomed.stop()


def wait_for_queue(url: str, total: int, workers: list[Worker], timeout: float = 90) -> None:
    """Until `total` run tasks have finished (succeeded or failed)."""
    deadline = time.monotonic() + timeout
    states: dict[str, int] = {}
    while time.monotonic() < deadline:
        states = queue_states(url)
        if states.get("succeeded", 0) + states.get("failed", 0) >= total:
            return
        time.sleep(0.2)
    logs = "\n".join(w.output()[-2000:] for w in workers)
    raise AssertionError(f"queue did not finish: {states}\n{logs}")


def runs(url: str) -> list[dict[str, Any]]:
    return _rows(
        url,
        "SELECT id, agent, job, worker, started_at, ended_at, outcome FROM runs "
        "ORDER BY agent, started_at",
    )


def overlaps(records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Pairs of runs of one agent whose [started_at, ended_at] intervals overlap (a run
    with no end, from a dead process, extends to the next run's start at most)."""
    found = []
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_agent.setdefault(r["agent"], []).append(r)
    for rows in by_agent.values():
        rows.sort(key=lambda r: r["started_at"])
        for before, after in itertools.pairwise(rows):
            end: datetime | None = before["ended_at"]
            if end is not None and end > after["started_at"]:
                found.append((before["id"], after["id"]))
    return found


def workspace_files(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.glob("workspace-*/**/*")):
        if path.is_file():
            out[str(path.relative_to(root))] = path.read_text()
    return out
