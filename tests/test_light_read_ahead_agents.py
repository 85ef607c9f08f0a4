"""Reading ahead across a run's agents (dreaming.phases.light._ahead.NightReads): the child
forked for one agent's light reads on into the agents after it, as planned before their
nights. Light takes such a read only where its own plan agrees (the same file, cursor and
admission), so the run is the run read in-process: a session forgotten, a cursor moved or
a plan that failed after the plan was made changes nothing but who reads."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dreaming import faults
from dreaming.ingest.tombstones import record_tombstones
from dreaming.messages import SessionFile
from dreaming.phases.light import _ahead
from tests.openclaw_builder import FakeOpenClaw, append
from tests.test_light import light

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


def _tables(root: Path, agent: str) -> dict[str, list[Any]]:
    with sqlite3.connect(root / "dreaming" / "agents" / f"{agent}.sqlite") as conn:
        return {
            table: [
                tuple(v.replace(str(root), "<root>") if isinstance(v, str) else v for v in row)
                for row in conn.execute(f"SELECT {cols} FROM {table} ORDER BY {order}")
            ]
            for table, cols, order in (
                ("corpus_lines", "id, session_id, line, day, role, text, speaker", "id"),
                ("candidates", "id, key, text, sessions, days, round(score, 9), status", "id"),
                ("candidate_evidence", "candidate_id, corpus_line_id, session_id", "1, 2"),
                ("file_cursors", "path, offset, line, head, size", "path"),
                ("sessions", "session_id, status, format, participants", "session_id"),
            )
        }


@pytest.fixture(autouse=True)
def any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """`read_ahead_mb` (and reading on from 1 MB) count bytes: the tests' files are enough."""
    monkeypatch.setattr(_ahead, "MB", 1)


def _paths(root: Path) -> Any:
    from dreaming.app import App

    return App.open(root, None, env={}).paths


def _everything(root: Path) -> dict[str, Any]:
    return {agent: _tables(root, agent) for agent in AGENTS}


def _without_timing(report: dict[str, Any]) -> dict[str, Any]:
    return {a: {k: v for k, v in r.items() if k != "duration_s"} for a, r in report.items()}


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


def test_a_read_planned_from_another_cursor_is_read_again_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    """A later agent's cursors moved after the child planned (another run, a purge): its
    reads from the old cursors are not light's, which reads those files itself."""
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
    assert _without_timing(light(ahead)) == want
    assert forks and forks[-1] == 2
    assert sorted(here_reads) == ["ops-s1", "zeta-s1"]  # main's plan is light's own
    assert _everything(ahead) == _everything(here)


def test_a_later_agent_the_child_cannot_plan_is_read_by_its_light(
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
    assert sorted(here_reads) == [f"ops-s{n}" for n in range(6)]
    assert forks == [2]
    assert _everything(ahead) == _everything(here)


def test_a_child_that_dies_in_a_later_agent_is_read_around(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    here = _install(tmp_path / "here")
    ahead = _install(tmp_path / "ahead")
    want = _here(here, monkeypatch)
    monkeypatch.setenv(faults.ENV, f"{_ahead.CHILD_CHECKPOINT}:9")  # in ops's files
    here_reads = _reads_here(monkeypatch)
    assert _without_timing(light(ahead)) == want
    assert _everything(ahead) == _everything(here)
    # What the child had not sent when it died (ops's last files, or more: the reads its
    # sending thread had not sent yet die with it) was read here, in order; zeta, the last
    # agent, got a child of its own.
    order = [f"{agent}-s{n}" for agent in ("main", "ops") for n in range(6)]
    assert here_reads
    assert here_reads == order[len(order) - len(here_reads) :]
    assert forks == [2, 0]


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
