"""`forking.split_map`: half the work in a forked child where a fork is safe, the same
answers in the same order whatever happens to the child, and no child left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from dreaming import forking

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="a fork is what is tested"),
    pytest.mark.usefixtures("fork_allowed"),
]
PARENT = os.getpid()


def _where(x: int) -> tuple[int, int]:
    """x squared, and which process worked it out."""
    return x * x, os.getpid()


def _children_left() -> list[int]:
    """This process's forked children still there (running or unreaped): children whose
    command line is this one's (others, a database server a fixture started, are not)."""
    me = Path("/proc/self/cmdline").read_bytes()
    left = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == os.getpid() and (proc / "cmdline").read_bytes() in (me, b""):
                left.append(int(proc.name))
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
    return left


def test_the_second_half_is_worked_out_in_a_child() -> None:
    items = list(range(101))
    got = forking.split_map(_where, items, min_items=10)
    assert [v for v, _ in got] == [x * x for x in items]
    first = {pid for _, pid in got[:50]}
    second = {pid for _, pid in got[50:]}
    assert first == {PARENT}
    assert len(second) == 1 and PARENT not in second
    assert not _children_left()  # reaped


def test_below_the_threshold_or_where_a_fork_is_unsafe_it_is_all_done_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items = list(range(20))
    assert {pid for _, pid in forking.split_map(_where, items, min_items=21)} == {PARENT}
    assert {pid for _, pid in forking.split_map(_where, items[:1], min_items=0)} == {PARENT}
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert {pid for _, pid in forking.split_map(_where, items, min_items=2)} == {PARENT}
    finally:
        stop.set()
        other.join()
    monkeypatch.setattr(forking, "_in_pool_worker", lambda: True)
    assert {pid for _, pid in forking.split_map(_where, items, min_items=2)} == {PARENT}
    monkeypatch.setattr(forking, "_in_pool_worker", lambda: False)
    monkeypatch.setattr(forking.sys, "platform", "darwin")
    assert {pid for _, pid in forking.split_map(_where, items, min_items=2)} == {PARENT}


def test_idle_helper_threads_are_let_go_before_a_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()

    def let_go() -> None:
        stop.set()
        helper.join()

    monkeypatch.setattr(forking, "_before_fork", [let_go])
    got = forking.split_map(_where, list(range(10)), min_items=2)
    assert {pid for _, pid in got[5:]} != {PARENT}


def _dies_in_child(x: int) -> int:
    if os.getpid() != PARENT:
        os._exit(3)
    return x + 1


class _Odd:
    def __init__(self) -> None:
        self.hook = lambda: None  # does not pickle


def _unpicklable_in_child(x: int) -> Any:
    return _Odd() if os.getpid() != PARENT else x


def _raises_in_child(x: int) -> int:
    if os.getpid() != PARENT:
        raise MemoryError("the child ran out")
    return -x


@pytest.mark.parametrize(
    ("fn", "want"),
    [
        (_dies_in_child, lambda x: x + 1),
        (_unpicklable_in_child, lambda x: x),
        (_raises_in_child, lambda x: -x),
    ],
    ids=["killed", "unpicklable", "raises"],
)
def test_a_failed_child_s_half_is_worked_out_here(fn: Any, want: Any) -> None:
    items = list(range(40))
    assert forking.split_map(fn, items, min_items=2) == [want(x) for x in items]
    assert not _children_left()


def test_an_error_in_this_process_s_half_is_raised_and_the_child_reaped() -> None:
    def fails_here(x: int) -> int:
        if os.getpid() == PARENT and x == 3:
            raise ValueError("three")
        return x

    with pytest.raises(ValueError, match="three"):
        forking.split_map(fails_here, list(range(40)), min_items=2)
    assert not _children_left()


def test_a_child_dies_of_a_stop_signal_and_the_parent_keeps_its_own() -> None:
    """Between the fork and the child's own set-up, SIGINT and SIGTERM are held back (one
    handled there would raise through the parent's stack in the child); in the child they
    are back to their default, in this process as they were."""
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    r, w = os.pipe()
    pid = forking.fork()
    if pid == 0:  # the child: report, then leave
        try:
            seen = [signal.getsignal(s) == signal.SIG_DFL for s in (signal.SIGINT, signal.SIGTERM)]
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
            os.write(w, repr((seen, signal.SIGINT in blocked)).encode())
        finally:
            os._exit(0)
    os.close(w)
    try:
        reported = os.read(r, 200).decode()
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    assert reported == "([True, True], False)"
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


_CLOSED_STDIO = """
import os, sys
from dreaming import forking
os.close(0); os.close(1)  # os.pipe() now returns 0 and 1
parent = os.getpid()
got = forking.split_map(lambda x: os.getpid() != parent, list(range(10)), min_items=2)
with open(sys.argv[1], "w") as out:
    out.write(str(sum(got)))
"""


def test_a_child_s_pipe_where_stdin_and_stdout_were_closed_still_carries_its_half(
    tmp_path: Path,
) -> None:
    report = tmp_path / "children"
    done = subprocess.run(
        [sys.executable, "-c", _CLOSED_STDIO, str(report)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert report.read_text() == "5"  # the child's five came through its pipe
