"""Work shared with a forked child, where that is safe: the second core of a machine that
would otherwise run light's pure-Python work on one.

A fork, not a spawned interpreter: a spawned one spends about 0.4 s importing the library
before it does anything, and a forked child starts with everything this process has built
(settings, the tag registry, the salience lexicon). So a child is forked only where that is
safe (`fork_safe`):
- on Linux (macOS's system libraries are not safe to use in a forked child);
- when this process runs no other thread: helpers' idle threads (corpus's fsyncs) are let
  go first (`on_fork_check`); a process with other threads (a scheduler's) works alone;
- not in a worker of `run --workers N`, which already shares the cores with the others.

SIGINT and SIGTERM are held back across the fork itself (`fork`), and a child dies of them.
A child's discipline (`child`): it freezes what the parent left to the cycle collector (a
connection finalized here would close a descriptor number since reused), lets go of every
inherited descriptor but its own pipe (a lock file, a database or the caller's output must
not stay open in it after the parent is gone), and leaves with `os._exit`, never running
the parent's exit handlers. What it sends is a shortcut: if the child fails, or what it
sends cannot be read, the parent does that work itself.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

LENGTH = struct.Struct("!Q")  # a message's length, before it
_before_fork: list[Callable[[], None]] = []


def on_fork_check(stop_idle_threads: Callable[[], None]) -> None:
    """Have `fork_safe` call `stop_idle_threads` first: a module's idle helper threads,
    which it starts again when next needed."""
    _before_fork.append(stop_idle_threads)


def fork_safe() -> bool:
    """Whether a child may be forked now (see the module's docstring)."""
    if sys.platform != "linux" or _in_pool_worker():
        return False
    for stop in _before_fork:
        stop()
    return _threads() == 1


def _threads() -> int:
    return threading.active_count()


def _in_pool_worker() -> bool:
    mp = sys.modules.get("multiprocessing")  # a pool's worker has it; others need not load it
    return mp is not None and mp.parent_process() is not None


# What stops a command (Ctrl-C, a service manager's SIGTERM): held back across a fork.
_STOPS = (signal.SIGINT, signal.SIGTERM)


def fork() -> int:
    """`os.fork`, with SIGINT and SIGTERM held back across it. Handled in the child while it
    still runs the parent's code, either would raise KeyboardInterrupt through the parent's
    stack there (the command's cleanup, an open transaction's rollback). The child gets
    their default action (a Ctrl-C meant for the command ends it at once) before they are
    let through; one the parent receives meanwhile is handled once the fork is done."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    if pid == 0:
        for sig in _STOPS:
            if signal.getsignal(sig) is not signal.SIG_IGN:  # ignored stays ignored
                signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return 0
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    except BaseException:  # a stop held back during the fork, handled here: no child left
        stop(pid)
        raise
    return pid


@contextlib.contextmanager
def child(keep: int) -> Iterator[int]:
    """The body of a forked child: set up as the module's docstring says, given the
    descriptor `keep` is now (see `_let_go_of_inherited`), and never returning: whatever
    the body does or raises, the child then leaves."""
    try:
        gc.freeze()
        yield _let_go_of_inherited(keep)
    except BaseException:  # the parent carries on without us
        pass
    finally:
        os._exit(0)


def _let_go_of_inherited(keep: int) -> int:
    """Close every descriptor the fork copied but `keep`, and point stdin, stdout and stderr
    at /dev/null: a lock file, a database or a caller's output pipe stays open in this child
    only as long as the parent holds it. Returns `keep`'s descriptor now: a pipe made where
    the parent had closed stdin or stdout has a number /dev/null takes, so it moves first."""
    if keep <= 2:
        import fcntl  # POSIX only, as forking is: not at the top, where Windows imports it

        keep = fcntl.fcntl(keep, fcntl.F_DUPFD, 3)
    null = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(null, std)
    for fd in [int(p.name) for p in Path("/proc/self/fd").iterdir()]:
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed
                os.close(fd)
    return keep


def framed(message: Any) -> bytes:
    """`message` pickled, its length first. What cannot be pickled raises: in a child, that
    ends it, and the parent does the work itself."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return LENGTH.pack(len(body)) + body


def receive(fd: int) -> Any:
    """The next message `framed` wrote to the pipe `fd`. Raises whatever stops it (the
    child gone: EOFError; a message that does not unpickle)."""
    (size,) = LENGTH.unpack(_read_exactly(fd, LENGTH.size))
    return pickle.loads(_read_exactly(fd, size))


def _read_exactly(fd: int, size: int) -> bytearray:
    """`size` bytes from the pipe `fd`, however many reads that takes; EOFError at its end."""
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise EOFError("the child closed its pipe mid-message")
        got += n
    return buf


def stop(pid: int) -> None:
    """Kill the child `pid` if it is still there, and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):  # reaped by someone else already
        os.waitpid(pid, 0)


def split_map(fn: Callable[[T], R], items: Sequence[T], *, min_items: int) -> list[R]:
    """`[fn(x) for x in items]`, the second half worked out in a forked child while this
    process works out the first, when there are at least `min_items` and a fork is safe.
    `fn` must be pure: the child's answers are taken as this process's would be, and if
    the child fails its half is worked out here."""
    if len(items) < max(min_items, 2) or not fork_safe():
        return [fn(x) for x in items]
    half = len(items) // 2
    r, w = os.pipe()
    try:
        pid = fork()
    except OSError:
        os.close(r)
        os.close(w)
        return [fn(x) for x in items]
    if pid == 0:
        with child(keep=w) as fd, os.fdopen(fd, "wb") as out:
            out.write(framed([fn(x) for x in items[half:]]))
    os.close(w)
    try:
        first = [fn(x) for x in items[:half]]
        try:
            second = receive(r)
        except Exception:  # the child failed: its half is worked out here
            second = None
    finally:
        os.close(r)
        stop(pid)
    if not isinstance(second, list) or len(second) != len(items) - half:
        second = [fn(x) for x in items[half:]]
    return first + second
