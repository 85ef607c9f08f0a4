"""Concurrent runs across real processes: the per-agent lock (DESIGN: "never runs two jobs
on one agent at once ... a per-agent lock that also holds across processes").

Overlap is made certain, not hoped for: the runs talk to a fake LLM server in this process
that holds the first request(s) until the other process has done what the test waits for
(exited on the lock, or arrived at the server too). No sleeping on the wall clock beyond
short polling of process state.

- Two `dreaming run` processes on the same agent: one runs, the other says the agent is
  busy in one line and exits 75 (busy) without a traceback; the state afterwards is that of
  a single run, and `verify` passes.
- Two processes on different agents: both run at the same time and both succeed; the state
  equals one run over both agents.
- A lock held by another holder (here: this process) blocks only its agent.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from dreaming import runner
from dreaming.store import agent_lock, migrations, open_engine
from dreaming.store import engine as engine_mod
from dreaming.verify import verify
from tests.deep_helpers import build_state, decide_all, open_app
from tests.fake_openai import DEFAULT_KEY, DEFAULT_MODEL, FakeOpenAI

DREAMING = Path(sys.executable).parent / "dreaming"
TIMEOUT_S = 60.0


def slow_client(root: Path) -> None:
    """Room for a request the fake holds while the other process starts (about 1.5 s)."""
    config = (root / "dreaming.toml").read_text()
    config = config.replace("deadline_s = 5\ntimeout_s = 5\n", "deadline_s = 60\ntimeout_s = 60\n")
    (root / "dreaming.toml").write_text(config)


def env_for(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DREAMING_", "OPENAI_"))}
    env.update(HOME=str(root.parent / "home"), OPENAI_API_KEY=DEFAULT_KEY)
    return env


def start(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [DREAMING, "--state-dir", root, "--config", root / "dreaming.toml", "run", "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(root),
    )


def first_exit(procs: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                return p
        time.sleep(0.02)
    for p in procs:
        p.kill()
    raise AssertionError("no process finished")


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=TIMEOUT_S)
    return proc.returncode, out, err


def reply(request: dict[str, Any]) -> Any:
    return decide_all("add")(request)


class Gate:
    """Holds the first `parties` requests until `opened` is set (or `parties` arrived)."""

    def __init__(self, parties: int = 1) -> None:
        self.parties = parties
        self.arrived = 0
        self.opened = threading.Event()
        self.cond = threading.Condition()

    def __call__(self, request: dict[str, Any]) -> Any:
        with self.cond:
            self.arrived += 1
            held = self.arrived <= self.parties
            if self.arrived >= self.parties:
                self.opened.set()
        if held:
            self.opened.wait(TIMEOUT_S)
        return reply(request)


# -- the state of one agent, without what differs between two equal runs (times, paths) ----------

QUERIES = {
    "entries": "SELECT key, text, status FROM entries ORDER BY key",
    "origins": "SELECT entry_key, session_id, session_key, origin_class, observed_at "
    "FROM origins ORDER BY 1, 2",
    "evidence": "SELECT entry_key, session_id, line FROM entry_evidence ORDER BY 1, 2, 3",
    "candidates": "SELECT key, text, sessions, days, owner_lines, agent_lines, status, "
    "evidence_count, decided_evidence, score, rem_boost FROM candidates ORDER BY key",
    "corpus": "SELECT session_id, line, day, role, origin_class, text FROM corpus_lines "
    "ORDER BY 1, 2",
    "decisions": "SELECT candidate_key, action, targets, entry_key, path FROM decisions "
    "ORDER BY id",
    "sessions": "SELECT session_id, status, reason, kind FROM sessions ORDER BY 1",
    "recalls": "SELECT entry_key, session_id FROM recalls ORDER BY 1, 2",
    "state": "SELECT key, value FROM agent_state ORDER BY 1",
    "runs": "SELECT phases, outcome FROM runs ORDER BY id",
    "calls": "SELECT outcome, input_tokens, output_tokens FROM llm_calls ORDER BY id",
    "spend": "SELECT usd, tokens, calls FROM spend",
    "backups": "SELECT content FROM memory_backups ORDER BY id",
}


def logical_state(root: Path, agent: str) -> dict[str, Any]:
    app = open_app(root)
    try:
        verdict = verify(app.engine(agent), app.paths, agent)
        assert verdict.ok, verdict.violations
        with app.engine(agent).connect() as conn:
            out: dict[str, Any] = {
                name: [tuple(r) for r in conn.execute(text(sql))] for name, sql in QUERIES.items()
            }
        ws = app.paths.workspace(agent)
        out["files"] = {
            str(p.relative_to(ws)): p.read_text(encoding="utf-8")
            for p in sorted(ws.rglob("*"))
            if p.is_file() and not p.name.startswith(".")
        }
    finally:
        app.close()
    assert out["entries"] and out["runs"] == [("light,rem,deep", "ok")]
    return out


@pytest.fixture(scope="module")
def single_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The state after the same night run once over both agents, in this process, without
    any contention: what every contended run must end in."""
    root = build_state(tmp_path_factory.mktemp("reference") / "s")
    with FakeOpenAI() as fake:
        fake.default = reply
        config = (root / "dreaming.toml").read_text()
        (root / "dreaming.toml").write_text(
            config + '\n[deep]\nllm = "test"\n[llm.profiles.test]\n'
            f'base_url = "{fake.base_url}"\nmodel = "{DEFAULT_MODEL}"\n'
            "price_input_per_mtok = 1.0\nprice_output_per_mtok = 2.0\n"
            "max_attempts = 2\ndeadline_s = 5\ntimeout_s = 5\n"
        )
        app = open_app(root)
        try:
            runner.run(app, ["light", "rem", "deep"])
        finally:
            app.close()
    return {a: logical_state(root, a) for a in ("bob", "main")}


def banner(root: Path) -> set[str]:
    app = open_app(root)
    try:
        return set(app.registry.banner().splitlines())
    finally:
        app.close()


def assert_busy(rc: int, out: str, err: str, root: Path, agent: str) -> None:
    """Exit 75 (busy), no run on stdout (--json: the error as a document), and one line of
    error after the usual tag banner."""
    assert rc == 75, err
    assert out == "" or json.loads(out) == {"error": err.splitlines()[-1][17:], "exit_code": 75}
    assert "Traceback" not in err
    extra = [line for line in err.splitlines() if line not in banner(root)]
    assert len(extra) == 1, err
    assert extra[0].startswith(f"dreaming: error: agent '{agent}' is busy"), extra
    assert "lock" in extra[0]


# -- tests --------------------------------------------------------------------------------------


def test_two_processes_on_one_agent_one_runs_one_reports_the_lock(
    tmp_path: Path, fake_openai: FakeOpenAI, single_run: dict[str, Any]
) -> None:
    root = build_state(tmp_path / "s", base_url=fake_openai.base_url)
    slow_client(root)
    # The database exists before the race, so the race is about the lock alone (creating
    # it from two processes at once is tested on its own: see the last tests).
    app = open_app(root)
    app.engine("main")
    app.close()
    gate = Gate(parties=99)  # opened by hand once the loser is out
    fake_openai.default = gate
    procs = [start(root, "--agent", "main") for _ in range(2)]
    loser = first_exit(procs)
    winner = next(p for p in procs if p is not loser)
    assert_busy(*finish(loser), root, "main")
    assert winner.poll() is None  # mid-run, holding the lock (the gate holds its LLM call)
    gate.opened.set()
    rc, out, err = finish(winner)
    assert rc == 0, err
    assert '"outcome": "ok"' in out
    assert logical_state(root, "main") == single_run["main"]
    assert not (root / "dreaming" / "agents" / "bob.sqlite").exists()


def test_two_processes_on_different_agents_both_run(
    tmp_path: Path, fake_openai: FakeOpenAI, single_run: dict[str, Any]
) -> None:
    root = build_state(tmp_path / "s", base_url=fake_openai.base_url)
    slow_client(root)
    gate = Gate(parties=2)  # each process's first request waits for the other's
    fake_openai.default = gate
    procs = [start(root, "--agent", agent) for agent in ("main", "bob")]
    results = [finish(p) for p in procs]
    for rc, _out, err in results:
        assert rc == 0, err
        assert "Traceback" not in err
    assert gate.opened.is_set() and gate.arrived >= 2  # both were in flight at once
    for agent in ("bob", "main"):
        assert logical_state(root, agent) == single_run[agent]


def test_a_held_lock_blocks_only_its_agent(
    tmp_path: Path, fake_openai: FakeOpenAI, single_run: dict[str, Any]
) -> None:
    """Another holder (a purge, a scheduler job: here this process) has main; a run over
    every agent does bob, reports main busy in one line and exits 75 (busy)."""
    root = build_state(tmp_path / "s", base_url=fake_openai.base_url)
    fake_openai.default = reply
    app = open_app(root)
    lock = app.paths.lock("main")
    app.close()
    with agent_lock(lock, "main", "forget"):
        rc, out, err = finish(start(root))
    # bob's night is reported on stdout; main is one error line on stderr; exit status 75.
    assert_busy(rc, "", err, root, "main")
    report = json.loads(out)
    assert [(r["agent"], r["outcome"]) for r in report["runs"]] == [
        ("bob", "ok"),
        ("main", "skipped"),
    ]
    assert f"pid {os.getpid()} forget" in err
    assert logical_state(root, "bob") == single_run["bob"]
    app = open_app(root)
    try:
        # main was never started: no run, no entries, nothing in its workspace changed.
        with app.engine("main").connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM runs")).scalar() == 0
            assert conn.execute(text("SELECT count(*) FROM entries")).scalar() == 0
        assert verify(app.engine("main"), app.paths, "main").ok
    finally:
        app.close()
    assert not (root / "workspace" / "DREAMS.md").exists()


def _open_fresh(path: str, barrier: Any, results: Any) -> None:
    try:
        barrier.wait(TIMEOUT_S)
        open_engine(Path(path)).dispose()
        results.put("ok")
    except BaseException as err:  # reported to the parent, which asserts on it
        results.put(f"{type(err).__name__}: {str(err).splitlines()[0]}")


def test_two_processes_creating_one_database_at_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    outcomes: list[str] = []
    for n in range(4):
        path = tmp_path / f"{n}" / "main.sqlite"
        path.parent.mkdir()
        barrier, results = ctx.Barrier(2), ctx.Queue()
        procs = [
            ctx.Process(target=_open_fresh, args=(str(path), barrier, results)) for _ in range(2)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(TIMEOUT_S)
        outcomes += [results.get(timeout=TIMEOUT_S) for _ in procs]
        # Whatever happened, the database must be usable afterwards.
        try:
            open_engine(path).dispose()
        except Exception as err:
            outcomes.append(f"reopen {type(err).__name__}: {str(err).splitlines()[0]}")
    assert set(outcomes) == {"ok"}, outcomes


def _killed_mid_migration(path: str, template: bool) -> None:
    """A process killed (like SIGKILL) after the first few statements of its first open:
    while it builds the process's template database (`template`), or while it migrates the
    new file itself, as it does where no template can be made."""
    engine_mod._template_image.cache_clear()
    if not template:
        engine_mod._template_image = lambda: None  # type: ignore[assignment]
    statements = 0
    run = migrations._run

    def dying(conn: Any, script: str) -> None:
        nonlocal statements
        for statement in script.split(";"):
            if statement.strip():
                statements += 1
                if statements == 4:
                    os._exit(137)
                run(conn, statement)

    migrations._run = dying
    open_engine(Path(path))
    os._exit(0)


@pytest.mark.parametrize("template", [True, False], ids=["template", "in-place"])
def test_a_process_killed_while_creating_the_database_leaves_it_usable(
    tmp_path: Path, template: bool
) -> None:
    path = tmp_path / "main.sqlite"
    child = multiprocessing.get_context("fork").Process(
        target=_killed_mid_migration, args=(str(path), template)
    )
    child.start()
    child.join(TIMEOUT_S)
    assert child.exitcode == 137
    if template:  # nothing of the half-built template reached the folder
        assert list(tmp_path.iterdir()) == []
    open_engine(path).dispose()  # the next run must be able to start (invariant 8)
    with sqlite3.connect(path) as conn:
        names = {n for (n,) in conn.execute("SELECT name FROM schema_migrations")}
    assert names == {name for name, _ in migrations.MIGRATIONS}
