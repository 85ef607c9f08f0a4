"""Light reads ahead in a forked child on a night with much to read (dreaming.phases.light.
_ahead): every read it hands over is the one this process would have made, in the files'
order; a child that dies or fails is read around; the child keeps nothing of the parent's
open; and the night it gives is the night without it."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dreaming import faults, forking
from dreaming.config import Settings
from dreaming.ingest.tags import TagRegistry, build_registry
from dreaming.messages import SessionFile
from dreaming.phases.light import _ahead
from dreaming.phases.light._read import Read, read_new_lines
from dreaming.phases.light._summary import LightSummary
from tests.cli_process import process
from tests.openclaw_builder import FakeOpenClaw, append
from tests.test_light import light

DAY = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="reading ahead forks"),
    pytest.mark.usefixtures("fork_allowed"),
]


@pytest.fixture
def settings() -> Settings:
    return Settings()


@pytest.fixture
def registry(settings: Settings) -> TagRegistry:
    return build_registry(env={})


@pytest.fixture
def any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """`read_ahead_mb` counts bytes: the tests' few files are enough to read ahead."""
    monkeypatch.setattr(_ahead, "MB", 1)


def _turns(n: int, words: int = 0) -> list[tuple[str, str]]:
    pad = " ".join(f"word{i}" for i in range(words))
    return [
        ("user" if i % 2 else "assistant", f"Line {i}: the host Box{i} is in Rack{i}. {pad}")
        for i in range(n)
    ]


def _files(root: Path) -> list[tuple[SessionFile, dict[str, Any] | None]]:
    """Session files of every kind a night meets, each with the cursor it is read from."""
    fake = FakeOpenClaw(root)
    folder = root / "agents" / "main" / "sessions"
    plain = [fake.session("main", f"s{n}", _turns(6 + n), start=DAY) for n in range(4)]
    hostile = folder / "hostile.jsonl"
    hostile.write_bytes(
        plain[0].read_bytes()
        + b"{not json\n"
        + b'{"type": "message", "message": {"role": "user", "content": "caf\xe9 \xff"}}\n'
        + b"x" * 70_000
        + b"\n"
    )
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "binary.jsonl").write_bytes(b"\x00\x01\x02" * 100)
    (folder / "unknown.jsonl").write_text('{"kind": "nothing we know"}\n')
    files: list[tuple[SessionFile, dict[str, Any] | None]] = [
        (SessionFile("main", p.stem, p), None)
        for p in [*plain, hostile, *(folder / f"{k}.jsonl" for k in ("empty", "binary", "unknown"))]
    ]
    # Read on from a cursor: read once, then more is appended.
    grown = fake.session("main", "grown", _turns(3), start=DAY)
    files.append((SessionFile("main", "grown", grown), _cursor_after(grown)))
    append(grown, "user", "The backup host Vault9 moved to Oslo.", DAY + timedelta(hours=1), "g9")
    # Rewritten before its cursor: read again from the start (restarted).
    rewritten = fake.session("main", "rewritten", _turns(5), start=DAY)
    cursor = _cursor_after(rewritten)
    rewritten.write_text(rewritten.read_text().replace("Rack", "Shelf") + "\n")
    files.append((SessionFile("main", "rewritten", rewritten), cursor))
    return files


def _cursor_after(path: Path) -> dict[str, Any]:
    settings = Settings()
    read = read_new_lines(
        SessionFile("main", path.stem, path),
        None,
        path.stat(),
        settings,
        build_registry(env={}),
        LightSummary(agent="main"),
    )
    assert read is not None
    end = read.reader.cursor
    return {"offset": end.offset, "line": end.line, "head": end.head, "size": end.size}


def _jobs(root: Path) -> list[_ahead.Job]:
    return [_ahead.Job(sf, prev, sf.path.stat()) for sf, prev in _files(root)]


def _seen(read: Read | None) -> Any:
    """All a read tells its caller."""
    if read is None:
        return None
    r = read.reader
    stat = (read.st.st_size, read.st.st_mtime_ns)
    return (
        r.session,  # the child does not send it: put back from the job
        read.rows,
        read.newest,
        r.cursor,
        r.started_at,
        r.restarted,
        r.completed,
        r.format,
        stat,
    )


def _all(reads: _ahead.Reads, jobs: list[_ahead.Job]) -> tuple[list[Any], dict[str, Any]]:
    summary = LightSummary(agent="main")
    try:
        seen = [_seen(reads.read(job, summary)) for job in jobs]
    finally:
        reads.close()
    return seen, summary.to_dict()


def _here(jobs: list[_ahead.Job], settings: Settings, registry: TagRegistry) -> Any:
    return _all(_ahead.InProcess(settings, registry), jobs)


@pytest.mark.usefixtures("any_size")
def test_the_reads_made_ahead_are_the_reads_made_here(
    tmp_path: Path, settings: Settings, registry: TagRegistry
) -> None:
    jobs = _jobs(tmp_path)
    reads = _ahead.start(jobs, settings, registry)
    assert isinstance(reads, _ahead.ReadAhead), "a night of many files reads ahead"
    got, got_summary = _all(reads, jobs)
    want, want_summary = _here(jobs, settings, registry)
    assert got == want
    assert got_summary == want_summary
    # The cases are there: skips counted, a read from a cursor, a restart.
    assert {"malformed-json", "empty-file", "binary-file", "unknown-format"} <= set(
        want_summary["skips"]
    )
    assert any(s[3] for s in want if s)  # started at a cursor
    assert any(s[4] for s in want if s)  # restarted


@pytest.mark.usefixtures("any_size")
def test_a_file_that_grows_after_the_plan_is_read_and_recorded_as_it_is_then(
    tmp_path: Path, settings: Settings, registry: TagRegistry
) -> None:
    """A file still being written grows between the night's plan and its turn: the read
    takes what is there then, and its cursor records that size (not the plan's), so the
    next night neither re-reads it for nothing nor skips what came after."""
    jobs = _jobs(tmp_path)
    grown = jobs[3].sf.path
    planned = jobs[3].st.st_size
    append(grown, "user", "The archive host Tern4 moved to Bergen.", DAY, "late-1")
    for reads in (_ahead.InProcess(settings, registry), _ahead.start(jobs, settings, registry)):
        try:
            summary = LightSummary(agent="main")
            read = [reads.read(job, summary) for job in jobs][3]
        finally:
            reads.close()
        assert read is not None
        assert read.st.st_size == grown.stat().st_size > planned
        assert read.reader.cursor.offset == read.st.st_size
        assert "Tern4" in read.rows[-1]["text"]


@pytest.mark.usefixtures("any_size")
def test_a_child_killed_mid_night_is_read_around(
    tmp_path: Path, settings: Settings, registry: TagRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = _jobs(tmp_path)
    monkeypatch.setenv(faults.ENV, f"{_ahead.CHILD_CHECKPOINT}:4")  # dies before the 4th
    reads = _ahead.start(jobs, settings, registry)
    assert isinstance(reads, _ahead.ReadAhead)
    pid = reads._pid
    got = _all(reads, jobs)
    monkeypatch.delenv(faults.ENV)
    assert got == _here(jobs, settings, registry)
    assert reads._pid is None and pid is not None
    _assert_reaped(pid)


@pytest.mark.usefixtures("any_size")
def test_an_error_reading_ahead_is_raised_at_its_files_turn(
    tmp_path: Path, settings: Settings, registry: TagRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = _jobs(tmp_path)
    bad = jobs[2].sf.path

    def failing(sf: SessionFile, *args: Any) -> Read | None:
        if sf.path == bad:
            raise ValueError(f"cannot read {sf.path.name}")
        return read_new_lines(sf, *args)

    monkeypatch.setattr(_ahead, "read_new_lines", failing)
    reads = _ahead.start(jobs, settings, registry)
    assert isinstance(reads, _ahead.ReadAhead)
    summary = LightSummary(agent="main")
    try:
        assert reads.read(jobs[0], summary) is not None
        assert reads.read(jobs[1], summary) is not None
        with pytest.raises(ValueError, match=r"cannot read s2\.jsonl"):
            reads.read(jobs[2], summary)
    finally:
        reads.close()


class _UnpicklableError(ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.hook = lambda: None  # a lambda does not pickle


@pytest.mark.usefixtures("any_size")
def test_what_cannot_cross_the_pipe_is_read_here(
    tmp_path: Path, settings: Settings, registry: TagRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A result the child cannot send (it does not pickle) ends the child: this process reads
    that file and the rest itself, and meets any error first hand."""
    jobs = _jobs(tmp_path)
    parent = os.getpid()
    odd, bad = jobs[1].sf.path, jobs[3].sf.path

    def in_child_odd(sf: SessionFile, *args: Any) -> Read | None:
        read = read_new_lines(sf, *args)
        if sf.path == odd and os.getpid() != parent and read is not None:
            read.rows.append({"text": lambda: None})  # cannot be pickled
        if sf.path == bad:
            raise _UnpicklableError(f"cannot read {sf.path.name}")
        return read

    monkeypatch.setattr(_ahead, "read_new_lines", in_child_odd)
    reads = _ahead.start(jobs, settings, registry)
    assert isinstance(reads, _ahead.ReadAhead)
    summary = LightSummary(agent="main")
    here = _ahead.InProcess(settings, registry)
    try:
        first = reads.read(jobs[0], summary)
        assert reads._pipe is not None
        got = [_seen(first), _seen(reads.read(jobs[1], summary))]
        assert reads._pipe is None  # the child is gone: the rest is read here
        got.append(_seen(reads.read(jobs[2], summary)))
        with pytest.raises(_UnpicklableError, match=r"cannot read s3\.jsonl"):
            reads.read(jobs[3], summary)
    finally:
        reads.close()
    want_summary = LightSummary(agent="main")
    assert got == [_seen(here.read(j, want_summary)) for j in jobs[:3]]


@pytest.mark.usefixtures("any_size")
def test_out_of_memory_in_the_child_alone_is_read_around(
    tmp_path: Path, settings: Settings, registry: TagRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What stops the child's reading (memory here) ends it: what it read is still taken,
    and this process reads the rest, where the error may not happen at all."""
    jobs = _jobs(tmp_path)
    parent = os.getpid()

    def starved(sf: SessionFile, *args: Any) -> Read | None:
        if sf.path == jobs[2].sf.path and os.getpid() != parent:
            raise MemoryError("the child ran out")
        return read_new_lines(sf, *args)

    monkeypatch.setattr(_ahead, "read_new_lines", starved)
    reads = _ahead.start(jobs, settings, registry)
    assert isinstance(reads, _ahead.ReadAhead)
    summary = LightSummary(agent="main")
    try:
        got = [_seen(reads.read(jobs[0], summary)), _seen(reads.read(jobs[1], summary))]
        assert reads._pipe is not None  # those two came from the child
        got += [_seen(reads.read(job, summary)) for job in jobs[2:]]
        assert reads._pipe is None
    finally:
        reads.close()
    want, want_summary = _here(jobs, settings, registry)
    assert got == want
    assert summary.to_dict() == want_summary


@pytest.mark.usefixtures("any_size")
def test_the_next_read_is_ready_once_the_child_has_sent_it(
    tmp_path: Path, settings: Settings, registry: TagRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = _jobs(tmp_path)
    pid_file = tmp_path / "paused.pid"
    monkeypatch.setenv(faults.PAUSE_ENV, f"{_ahead.CHILD_CHECKPOINT}:2")  # after the first
    monkeypatch.setenv(faults.PAUSE_FILE_ENV, str(pid_file))
    reads = _ahead.start(jobs, settings, registry)
    try:
        assert isinstance(reads, _ahead.ReadAhead)
        child = _wait_for_pid(pid_file)
        assert reads.ready()  # the first read was sent before the child stopped
        summary = LightSummary(agent="main")
        reads.read(jobs[0], summary)
        assert not reads.ready()  # the second is not coming yet
        os.kill(child, signal.SIGTERM)  # the child ends (its default for SIGTERM)
        deadline = time.monotonic() + 30
        while not reads.ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reads.ready()  # its end of the pipe closed: nothing to wait for
        assert _seen(reads.read(jobs[1], summary)) == _seen(
            _ahead.InProcess(settings, registry).read(jobs[1], LightSummary(agent="main"))
        )
    finally:
        reads.close()


@pytest.mark.usefixtures("any_size")
def test_a_read_not_asked_for_is_dropped_and_closing_early_stops_the_child(
    tmp_path: Path, settings: Settings, registry: TagRegistry
) -> None:
    jobs = _jobs(tmp_path)
    here = _here(jobs, settings, registry)[0]
    reads = _ahead.start(jobs, settings, registry)
    assert isinstance(reads, _ahead.ReadAhead)
    pid = reads._pid
    assert pid is not None
    summary = LightSummary(agent="main")
    # Light skipped the first file (read itself, say): the child's read of it is dropped...
    assert _seen(reads.read(jobs[1], summary)) == here[1]
    # ...and asked for after all, it is read here, as it is: never another file's read.
    assert _seen(reads.read(jobs[0], summary)) == here[0]
    assert reads._pid == pid, "the child reads on for the files after them"
    assert _seen(reads.read(jobs[2], summary)) == here[2]
    reads.close()
    reads.close()  # twice is fine
    _assert_reaped(pid)


@pytest.mark.usefixtures("any_size")
def test_the_child_keeps_nothing_of_the_parent_open(
    tmp_path: Path, settings: Settings, registry: TagRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = _jobs(tmp_path)
    held = (tmp_path / "held.lock").open("w")  # as the agent's lock file would be
    pid_file = tmp_path / "paused.pid"
    monkeypatch.setenv(faults.PAUSE_ENV, f"{_ahead.CHILD_CHECKPOINT}:2")
    monkeypatch.setenv(faults.PAUSE_FILE_ENV, str(pid_file))
    reads = _ahead.start(jobs, settings, registry)
    try:
        assert isinstance(reads, _ahead.ReadAhead)
        child = _wait_for_pid(pid_file)
        assert child == reads._pid != os.getpid()
        open_in_child = {
            os.readlink(f"/proc/{child}/fd/{fd}") for fd in os.listdir(f"/proc/{child}/fd")
        }
        assert str(tmp_path / "held.lock") not in open_in_child
        assert not [p for p in open_in_child if p.startswith("/") and p != os.devnull], (
            open_in_child
        )
        os.kill(child, signal.SIGINT)  # the paused child leaves; the rest is read here
        got = _all(reads, jobs)
    finally:
        reads.close()
        held.close()
    monkeypatch.delenv(faults.PAUSE_ENV)
    assert got == _here(jobs, settings, registry)


def _assert_reaped(pid: int) -> None:
    """`pid`, a child of this process, is gone and reaped: no zombie left."""
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _wait_for_pid(path: Path) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.01)
    raise AssertionError("the child never paused")


def test_it_reads_ahead_only_where_that_is_safe_and_pays(
    tmp_path: Path, settings: Settings, registry: TagRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = _jobs(tmp_path)
    total = sum(j.new_bytes for j in jobs)

    def kind(jobs: list[_ahead.Job], mb: int) -> type:
        s = settings.model_copy(
            update={"corpus": settings.corpus.model_copy(update={"read_ahead_mb": mb})}
        )
        reads = _ahead.start(jobs, s, registry)
        reads.close()
        return type(reads)

    monkeypatch.setattr(_ahead, "MB", 1)
    assert kind(jobs, total) is _ahead.ReadAhead
    assert kind(jobs, total + 1) is _ahead.InProcess  # not enough to read
    assert kind(jobs, 0) is _ahead.InProcess  # turned off
    assert kind(jobs[:1], 1) is _ahead.InProcess  # one file: nothing to overlap
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert kind(jobs, 1) is _ahead.InProcess  # another thread: no fork
    finally:
        stop.set()
        other.join()
    monkeypatch.setattr(forking, "_in_pool_worker", lambda: True)
    assert kind(jobs, 1) is _ahead.InProcess  # `run --workers N` shares the cores already
    monkeypatch.undo()
    monkeypatch.setattr(_ahead, "MB", 1)
    monkeypatch.setattr(forking.sys, "platform", "darwin")
    assert kind(jobs, 1) is _ahead.InProcess
    # The default: 8 MB of new text between two files or more.
    assert Settings().corpus.read_ahead_mb == 8


# ----------------------------------------------------------------------- the night itself


def _night(root: Path) -> Path:
    fake = FakeOpenClaw(root)
    for n in range(12):
        turns = [
            ("user", f"The build server Node{n} runs in the Frankfurt region since May."),
            ("assistant", f"Noted: Node{n} in Frankfurt."),
            ("user", f"Remember that Node{n} in Frankfurt is the build server for team {n}."),
            ("user", "My manager for the billing migration is Priya Raman."),
            *_turns(30, words=40),
        ]
        # The owner's own chats (keyed as the main session is): their lines start candidates.
        key = f"agent:main:main:{n}"
        fake.session("main", f"s{n:02d}", turns, key=key, start=DAY + timedelta(days=n))
    return root


def _tables(root: Path, agent: str = "main") -> dict[str, list[Any]]:
    """Every row light writes for `agent`, as the same text whatever the root."""
    with sqlite3.connect(root / "dreaming" / "agents" / f"{agent}.sqlite") as conn:
        return {  # paths under `root` as the same text whatever the root
            table: [
                tuple(v.replace(str(root), "<root>") if isinstance(v, str) else v for v in row)
                for row in conn.execute(f"SELECT {cols} FROM {table} ORDER BY {order}")
            ]
            for table, cols, order in (
                ("corpus_lines", "id, session_id, line, day, role, text, speaker", "id"),
                (
                    "candidates",
                    "id, key, text, sessions, days, round(score, 9), status, salience, features",
                    "id",
                ),
                ("candidate_evidence", "candidate_id, corpus_line_id, session_id", "1, 2"),
                ("file_cursors", "path, offset, line, head, size", "path"),
                ("sessions", "session_id, status, format, participants", "session_id"),
            )
        }


def _corpus_files(root: Path) -> dict[str, str]:
    folder = root / "workspace" / "memory" / ".dreams" / "session-corpus"
    return {p.name: p.read_text() for p in sorted(folder.glob("*.txt"))}


@pytest.fixture
def counted_forks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    forks: list[int] = []
    real = _ahead.ReadAhead.__init__

    def counting(self: _ahead.ReadAhead, *args: Any) -> None:
        real(self, *args)
        forks.append(1)

    monkeypatch.setattr(_ahead.ReadAhead, "__init__", counting)
    yield forks


def _without_timing(report: dict[str, Any]) -> dict[str, Any]:
    return {a: {k: v for k, v in r.items() if k != "duration_s"} for a, r in report.items()}


def test_a_night_read_ahead_is_the_night_read_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted_forks: list[int]
) -> None:
    monkeypatch.setattr(_ahead, "MB", 10**9)  # what 8 MB is to the tests' files
    here = _night(tmp_path / "here")
    want = _without_timing(light(here))
    assert not counted_forks
    monkeypatch.setattr(_ahead, "MB", 1)
    # Early commits too: whenever the next read is not ready, from the first row on.
    monkeypatch.setattr("dreaming.phases.light._phase.EARLY_COMMIT_ROWS", 1)
    # And the new candidates' salience assessed half in a child (`forking.split_map`).
    monkeypatch.setattr("dreaming.ingest.candidates._signals.SPLIT_FROM", 2)
    split: list[int] = []
    real_split = forking.split_map

    def counted_split(fn: Any, items: Any, *, min_items: int) -> Any:
        split.append(len(items))
        return real_split(fn, items, min_items=min_items)

    monkeypatch.setattr("dreaming.ingest.candidates._signals.split_map", counted_split)
    ahead = _night(tmp_path / "ahead")
    got = _without_timing(light(ahead))
    assert counted_forks == [1]
    assert split and split[0] >= 2
    assert got == want
    assert _tables(ahead) == _tables(here)
    assert sum(c[-1] is not None for c in _tables(here)["candidates"]) >= 2  # assessed
    assert _corpus_files(ahead) == _corpus_files(here)
    # And the next night, with a file grown and a new one, reads on from the cursors.
    for root in (here, ahead):
        s = root / "agents" / "main" / "sessions"
        append(s / "s03.jsonl", "user", "The Node3 build server moved to Oslo.", DAY, "x1")
        FakeOpenClaw(root).session("main", "s99", _turns(40, words=30), start=DAY)
    monkeypatch.setattr(_ahead, "MB", 10**9)
    want = _without_timing(light(here))
    monkeypatch.setattr(_ahead, "MB", 1)
    got = _without_timing(light(ahead))
    assert counted_forks == [1, 1]
    assert got == want
    assert _tables(ahead) == _tables(here)


@pytest.mark.parametrize("child_behind", [True, False])
def test_light_builds_the_assessment_cues_while_the_first_reads_are_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, child_behind: bool
) -> None:
    """With the next read not ready (a reading child still making it), light builds the
    lexicon's cue lists the rescore assesses with before it waits; with the read at hand it
    goes straight to it, and the lists are built when the rescore first reads them."""
    from dreaming.ingest import salience

    fresh = salience.Lexicon.build()  # no list built yet
    monkeypatch.setattr(salience, "lexicon_for", lambda extra: fresh)

    class Reads(_ahead.InProcess):
        built_at_first_read: bool | None = None

        def ready(self) -> bool:
            return not child_behind

        def read(self, job: _ahead.Job, summary: LightSummary) -> Read | None:
            if Reads.built_at_first_read is None:
                Reads.built_at_first_read = fresh.instruction.built and fresh.banner.built
            return super().read(job, summary)

    monkeypatch.setattr(_ahead, "start", lambda jobs, settings, registry: Reads(settings, registry))
    light(_night(tmp_path))
    assert Reads.built_at_first_read is child_behind
    assert fresh.instruction.built  # the rescore assessed the new candidates with it
    assert not any(c.built for _, c in fresh.groups)  # placing entries: not light's


def test_a_crash_while_reading_ahead_converges(tmp_path: Path) -> None:
    """The parent is killed while its child reads ahead (held there, alive): the child holds
    nothing of the night (the command returns at once; the next night takes the agent's
    lock and runs while the child is still there), and that night ends as an uninterrupted
    one."""
    config = tmp_path / "dreaming.toml"
    config.write_text("[corpus]\nread_ahead_mb = 1\n")
    roots = {k: tmp_path / k for k in ("clean", "crashed")}
    for root in roots.values():
        fake = FakeOpenClaw(root)
        for n in range(8):  # 8 files of about 180 KB: over the 1 MB
            fake.session("main", f"s{n}", _turns(60, words=400), start=DAY + timedelta(n))

    def night(root: Path, env: dict[str, str] | None = None) -> int:
        args = ["--state-dir", str(root), "--config", str(config), "run", "--phase", "light"]
        return process([*args, "--json"], env=env, timeout=120).returncode

    assert night(roots["clean"]) == 0
    # Killed after its second read was queued; the child, having sent two, waits before
    # the third (for a minute, unless signalled).
    pid_file = tmp_path / "child.pid"
    crash = {
        faults.ENV: "light.read:2",
        faults.PAUSE_ENV: f"{_ahead.CHILD_CHECKPOINT}:3",
        faults.PAUSE_FILE_ENV: str(pid_file),
    }
    started = time.monotonic()
    assert night(roots["crashed"], crash) == 137
    assert time.monotonic() - started < 30  # the child did not keep the command's output open
    child = _wait_for_pid(pid_file)
    try:
        os.kill(child, 0)  # still there
        assert night(roots["crashed"]) == 0  # the lock is free: the child does not hold it
        assert _tables(roots["crashed"]) == _tables(roots["clean"])
        assert len(_tables(roots["clean"])["file_cursors"]) == 8
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGTERM)


def test_a_night_at_a_terminal_reads_ahead_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted_forks: list[int]
) -> None:
    """The progress bars a terminal shows are redrawn by the night's ticks, not by a thread
    of rich's: a thread would keep light from forking its reading child."""
    from click.testing import CliRunner

    from dreaming.cli import _progress, register_commands

    monkeypatch.setattr(_ahead, "MB", 1)
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich takes stderr for a terminal
    bars: list[int] = []
    real_bars = _progress._Bars.__init__

    def counted_bars(self: Any, console: Any) -> None:
        real_bars(self, console)
        bars.append(1)

    monkeypatch.setattr(_progress._Bars, "__init__", counted_bars)
    root = _night(tmp_path / "tty")
    result = CliRunner().invoke(
        register_commands(),
        ["--state-dir", str(root), "run", "--phase", "light"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert bars == [1]  # the bars were shown
    assert counted_forks == [1]  # and light read ahead meanwhile
