"""Reading ahead across a run's agents (dreaming.phases.light._ahead.NightReads): the child
forked for one agent's light reads on into the agents after it, as planned before their
nights. Light takes such a read only where its own plan agrees (the same file, cursor and
admission), so the run is the run read in-process: a session forgotten, a cursor moved or
a plan that failed after the plan was made changes nothing but who reads."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dreaming import faults, forking
from dreaming.ingest.tombstones import record_tombstones
from dreaming.messages import SessionFile
from dreaming.phases.light import _ahead
from tests.cli_process import process
from tests.openclaw_builder import FakeOpenClaw, append
from tests.test_light import light
from tests.test_light_read_ahead import _tables, _without_timing

DAY = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
AGENTS = ("main", "ops", "zeta")
pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="reading ahead forks"),
    pytest.mark.usefixtures("fork_allowed"),
]


def _install(root: Path) -> Path:
    """Three agents, each with six owner sessions that say something worth keeping."""
    fake = FakeOpenClaw(root)
    for agent in AGENTS:
        for n in range(6):
            turns = [
                ("user", f"The {agent} build server Node{n} runs in the Frankfurt region."),
                ("assistant", f"Noted: Node{n} of {agent} in Frankfurt."),
                ("user", f"Remember that Node{n} is the {agent} build server for team {n}."),
                *[
                    ("user" if i % 2 else "assistant", f"Line {i}: host Box{i} is in Rack{i}.")
                    for i in range(20)
                ],
            ]
            key = f"agent:{agent}:main:{n}"
            fake.session(agent, f"{agent}-s{n}", turns, key=key, start=DAY + timedelta(days=n))
    return root


@pytest.fixture(autouse=True)
def any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """`read_ahead_mb` (and reading on from 1 MB) count bytes: the tests' files are enough."""
    monkeypatch.setattr(_ahead, "MB", 1)


def _paths(root: Path) -> Any:
    from dreaming.app import App

    return App.open(root, None, env={}).paths


def _everything(root: Path) -> dict[str, Any]:
    return {agent: _tables(root, agent) for agent in AGENTS}


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every reading child forked, by the number of later agents it reads on into."""
    made: list[int] = []
    real = _ahead.ReadAhead.__init__

    def counting(self: _ahead.ReadAhead, jobs: Any, here: Any, later: Any = (), *a: Any) -> None:
        real(self, jobs, here, later, *a)
        made.append(len(later))

    monkeypatch.setattr(_ahead.ReadAhead, "__init__", counting)
    yield made


def _here(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The run with every file read in-process."""
    monkeypatch.setattr(_ahead, "MB", 10**9)
    try:
        return _without_timing(light(root))
    finally:
        monkeypatch.setattr(_ahead, "MB", 1)


def _reads_here(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sessions read in this process from now on."""
    here: list[str] = []
    real = _ahead.InProcess.read

    def counted(self: _ahead.InProcess, job: _ahead.Job, summary: Any) -> Any:
        here.append(job.sf.session_id)
        return real(self, job, summary)

    monkeypatch.setattr(_ahead.InProcess, "read", counted)
    return here


def _planned_by(
    monkeypatch: pytest.MonkeyPatch,
    after: Callable[[str, list[tuple[int, _ahead.Job]]], list[tuple[int, _ahead.Job]]],
) -> None:
    """Have the plan of each later agent pass through `after`."""
    import dreaming.runner as runner

    real = runner.light_planner

    def planner(*args: Any, **kwargs: Any) -> _ahead.Plan:
        plan = real(*args, **kwargs)

        def planned(agent: str, files: Sequence[SessionFile]) -> list[tuple[int, _ahead.Job]]:
            return after(agent, plan(agent, files))

        return planned

    monkeypatch.setattr(runner, "light_planner", planner)


def test_one_child_reads_on_into_the_later_agents_and_the_run_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    here = _install(tmp_path / "here")
    want = _here(here, monkeypatch)
    assert not forks
    ahead = _install(tmp_path / "ahead")
    here_reads = _reads_here(monkeypatch)
    assert _without_timing(light(ahead)) == want
    assert forks == [2], "one child, forked for the first agent, reads on into the other two"
    assert here_reads == [], "every file's read came from the child"
    assert _everything(ahead) == _everything(here)
    assert all(len(t["corpus_lines"]) for t in _everything(here).values())
    # The next night reads on from the cursors: a file grown, a new one, in every agent.
    for root in (here, ahead):
        fake = FakeOpenClaw(root)
        for agent in AGENTS:
            grown = root / "agents" / agent / "sessions" / f"{agent}-s2.jsonl"
            append(grown, "user", f"The {agent} Node2 server moved to Oslo.", DAY, "g1")
            fake.session(agent, f"{agent}-new", [("user", f"{agent} uses Postgres 16 now.")] * 4)
    want = _here(here, monkeypatch)
    here_reads.clear()
    assert _without_timing(light(ahead)) == want
    assert _everything(ahead) == _everything(here)
    # Planned from their databases (read-only, in the child): none was read here.
    assert forks == [2, 2]
    assert here_reads == []


def test_a_session_forgotten_after_the_child_planned_it_is_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    """`forget` runs between the child's plan of an agent and that agent's night: the
    child has read the session, but light's own admission says forgotten, and the read is
    dropped."""
    here = _install(tmp_path / "here")
    ahead = _install(tmp_path / "ahead")
    for root in (here,):
        record_tombstones(_paths(root), "ops", [("ops-s3", None)], DAY)
    want = _here(here, monkeypatch)

    def forget_after_planning(agent: str, planned: list[tuple[int, _ahead.Job]]) -> Any:
        if agent == "ops":
            assert any(j.sf.session_id == "ops-s3" for _, j in planned)  # planned: read ahead
            record_tombstones(_paths(ahead), "ops", [("ops-s3", None)], DAY)
        return planned

    _planned_by(monkeypatch, forget_after_planning)
    assert _without_timing(light(ahead)) == want
    assert forks == [2]
    got = _everything(ahead)
    assert got == _everything(here)
    assert not [r for r in got["ops"]["corpus_lines"] if r[1] == "ops-s3"]
    assert [r for r in got["ops"]["corpus_lines"] if r[1] == "ops-s2"]


def test_a_read_planned_from_another_cursor_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    """A later agent's cursors moved after it was planned (another run, a purge): reads
    from the old cursors are not light's. Light never waits for them: an agent most of
    whose new text was planned otherwise gets a child of its own."""
    here = _install(tmp_path / "here")
    ahead = _install(tmp_path / "ahead")
    _here(here, monkeypatch)
    light(ahead)
    for root in (here, ahead):
        for agent in AGENTS:
            grown = root / "agents" / agent / "sessions" / f"{agent}-s1.jsonl"
            append(grown, "user", f"The {agent} Node1 server moved to Oslo.", DAY, "g1")
            append(grown, "user", f"Remember: {agent} deploys on Tuesdays only.", DAY, "g2")
    want = _here(here, monkeypatch)

    def from_the_start(agent: str, planned: list[tuple[int, _ahead.Job]]) -> Any:
        # As if planned before the first night: every file from its start.
        return [(i, _ahead.Job(j.sf, None, j.st)) for i, j in planned]

    _planned_by(monkeypatch, from_the_start)
    here_reads = _reads_here(monkeypatch)
    forks.clear()
    assert _without_timing(light(ahead)) == want
    # Main's child; then ops's own, reading on into zeta (planned before); and zeta's one
    # new file read here (a single file is not read ahead).
    assert forks == [2, 1]
    assert here_reads == ["zeta-s1"]
    assert _everything(ahead) == _everything(here)


def test_a_read_planned_under_another_admission_is_read_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    """The same cursor, but admitted otherwise between plan and night (its session's
    record, the operator's lists): light reads that file itself."""
    here = _install(tmp_path / "here")
    ahead = _install(tmp_path / "ahead")
    want = _here(here, monkeypatch)

    def readmitted(agent: str, planned: list[tuple[int, _ahead.Job]]) -> Any:
        changed = {
            "ops-s3": lambda sf: dataclasses.replace(sf, extra={**sf.extra, "seen": "x"}),
            "ops-s4": lambda sf: dataclasses.replace(sf, channel="telegram"),
        }
        return [
            (i, _ahead.Job(changed[j.sf.session_id](j.sf), j.prev, j.st))
            if j.sf.session_id in changed
            else (i, j)
            for i, j in planned
        ]

    _planned_by(monkeypatch, readmitted)
    here_reads = _reads_here(monkeypatch)
    assert _without_timing(light(ahead)) == want
    assert forks == [2]  # ops's other four files still came from the child
    assert here_reads == ["ops-s3", "ops-s4"]
    assert _everything(ahead) == _everything(here)


def test_a_later_agent_that_cannot_be_planned_gets_a_child_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    here = _install(tmp_path / "here")
    ahead = _install(tmp_path / "ahead")
    want = _here(here, monkeypatch)

    def broken(agent: str, planned: list[tuple[int, _ahead.Job]]) -> Any:
        if agent == "ops":
            raise sqlite3.OperationalError("database is locked")
        return planned

    _planned_by(monkeypatch, broken)
    here_reads = _reads_here(monkeypatch)
    assert _without_timing(light(ahead)) == want
    assert forks == [2, 1]  # ops's own child reads on into zeta, planned before
    assert here_reads == []
    assert _everything(ahead) == _everything(here)


def test_a_later_agent_another_run_holds_is_not_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    """Ops is locked by another run: its planned reads are never taken, and zeta's light
    does not wait behind them (a child of its own)."""
    from dreaming import runner
    from dreaming.app import App

    roots = {k: _install(tmp_path / k) for k in ("here", "ahead")}
    got: dict[str, Any] = {}
    for kind, root in roots.items():
        monkeypatch.setattr(_ahead, "MB", 10**9 if kind == "here" else 1)
        app = App.open(root, None, env={})
        try:
            with app.lock("ops", "another run"):
                results = runner.run(app, ["light"])
        finally:
            app.close()
        got[kind] = {r.agent: r.outcome for r in results}
    assert got["ahead"] == got["here"]
    assert got["ahead"]["ops"] != got["ahead"]["main"]
    assert forks == [2, 0]
    for agent in ("main", "zeta"):
        assert _tables(roots["ahead"], agent) == _tables(roots["here"], agent)


def test_a_run_that_cannot_fork_plans_nothing_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    import dreaming.runner as runner

    plans: list[str] = []
    real = runner.light_planner

    def counted(*args: Any, **kwargs: Any) -> _ahead.Plan:
        plan = real(*args, **kwargs)

        def planned(agent: str, files: Sequence[SessionFile]) -> Any:
            plans.append(agent)
            return plan(agent, files)

        return planned

    monkeypatch.setattr(runner, "light_planner", counted)
    root = _install(tmp_path / "root")
    monkeypatch.setattr(forking.sys, "platform", "darwin")
    light(root)
    assert plans == [] and forks == []
    monkeypatch.setattr(forking.sys, "platform", "linux")
    light(_install(tmp_path / "linux"))
    assert plans == ["ops", "zeta"] and forks == [2]


def test_planning_the_next_agents_makes_no_database(tmp_path: Path) -> None:
    """A first night stopped in its first agent, after the next ones were planned (killed
    at its third file): no database but that agent's."""
    config = tmp_path / "dreaming.toml"
    config.write_text("[corpus]\nread_ahead_mb = 1\n")
    root = tmp_path / "root"
    fake = FakeOpenClaw(root)
    for n in range(8):  # 8 files of about 180 KB: over the 1 MB from which it plans
        turns = [
            ("user", f"Line {i}: " + " ".join(f"w{i}x{j}" for j in range(400))) for i in range(60)
        ]
        fake.session("main", f"main-s{n}", turns, start=DAY + timedelta(n))
    for agent in ("ops", "zeta"):
        fake.session(agent, f"{agent}-s0", [("user", f"{agent} runs Postgres 16.")] * 3)
    args = ["--state-dir", str(root), "--config", str(config), "run", "--phase", "light"]
    done = process([*args, "--json"], env={faults.ENV: "light.read:3"}, timeout=120)
    assert done.returncode == 137
    made = sorted(p.name for p in (root / "dreaming" / "agents").glob("*.sqlite"))
    assert made == ["main.sqlite"]


def test_a_child_that_dies_in_a_later_agent_is_read_around(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    here = _install(tmp_path / "here")
    ahead = _install(tmp_path / "ahead")
    want = _here(here, monkeypatch)
    real_read_now = _ahead.read_now
    parent, died = os.getpid(), tmp_path / "died"

    def dies_once(job: _ahead.Job, *args: Any) -> Any:
        if os.getpid() != parent and job.sf.session_id == "ops-s2" and not died.exists():
            died.touch()
            os._exit(1)
        return real_read_now(job, *args)

    monkeypatch.setattr(_ahead, "read_now", dies_once)
    here_reads = _reads_here(monkeypatch)
    assert _without_timing(light(ahead)) == want
    assert died.exists()
    assert _everything(ahead) == _everything(here)
    # What the child had not sent when it died (from ops-s2 on, or from earlier: reads its
    # sending thread had not sent die with it) was read here, in order, up to the next
    # agent, which read ahead with a child of its own.
    order = [f"{agent}-s{n}" for agent in AGENTS for n in range(6)]
    assert here_reads
    start = order.index(here_reads[0])
    assert here_reads == order[start : start + len(here_reads)]
    assert len(forks) == 2 and forks[0] == 2


def test_a_file_grown_after_its_read_ahead_is_read_on_the_next_night(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    """What is appended to a later agent's file after the child read it is not in this
    night's read, whose cursor records the size it read: the next night reads it."""
    here = _install(tmp_path / "here")
    ahead = _install(tmp_path / "ahead")
    real_read_now = _ahead.read_now
    parent = os.getpid()

    def then_grown(job: _ahead.Job, *args: Any) -> Any:
        read = real_read_now(job, *args)
        if os.getpid() != parent and job.sf.session_id == "zeta-s4":
            append(job.sf.path, "user", "Remember: zeta's backups run at 3am.", DAY, "late")
        return read

    monkeypatch.setattr(_ahead, "read_now", then_grown)
    light(ahead)
    assert forks == [2]
    cursor = {r[0]: r for r in _tables(ahead, "zeta")["file_cursors"]}
    grown = str(ahead / "agents" / "zeta" / "sessions" / "zeta-s4.jsonl")
    assert cursor[grown.replace(str(ahead), "<root>")][4] < Path(grown).stat().st_size
    # Here the line is appended after the first night; the next night, both hold it.
    _here(here, monkeypatch)
    late = here / "agents" / "zeta" / "sessions" / "zeta-s4.jsonl"
    append(late, "user", "Remember: zeta's backups run at 3am.", DAY, "late")
    _here(here, monkeypatch)
    monkeypatch.setattr(_ahead, "read_now", real_read_now)
    light(ahead)
    assert _everything(ahead) == _everything(here)
    assert any("3am" in r[5] for r in _tables(here, "zeta")["corpus_lines"])
