"""Reading ahead: on a night with much to read, a forked child reads the next session files
(decode, parse, strip, normalize: `read_new_lines`) while this process folds and commits the
ones before them.

Over big transcripts light's time splits into two halves of about the same size: reading,
and what is done with what was read (claims, folding, SQL, corpus files). A machine running
light has a second core, so a backlog's first night takes about the time of the slower half.
Nothing else changes: every file's read is the one this process would have made (the same
cursor, the same stat, the same rows), handed over in the files' order, and committed here
exactly as before. Whatever happens to the child - killed, out of memory, a result that
does not arrive - this process reads that file and the rest itself: the child's results are
a shortcut, never a second source of truth.

It is used where a fork is safe (`dreaming.forking`: Linux, no other thread, not a
worker of `run --workers N`) and pays: at least two files to read, holding at least
`[corpus] read_ahead_mb` new bytes between them (0 turns reading ahead off).

The child gets the list of files at the fork and nothing more from this process. It reads
them in order, and a thread of its own writes each result (pickled, length first) to the
pipe. Light folds and commits in batches, so it takes results in bursts; the child reads on
meanwhile, holding up to `AHEAD_BYTES` of results not yet taken, so memory stays bounded
whatever the night's size. If this process dies first, the child's next write fails and it
leaves.
"""

from __future__ import annotations

import os
import select
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol

from dreaming import faults, forking
from dreaming.config import Settings
from dreaming.ingest.tags import TagRegistry
from dreaming.messages import SessionFile
from dreaming.phases.light._read import Read, read_new_lines
from dreaming.phases.light._summary import LightSummary

MB = 1024 * 1024
# A pipe holds 64 KiB by default; a bigger one lets a file's result cross in fewer turns.
_PIPE_BYTES = 1 * MB
# How much of its results (pickled) the child may hold that the parent has not taken: a
# batch's worth of rows is a few MB (154 MB of transcripts make about 5 MB of results).
AHEAD_BYTES = 32 * MB
# The fault point (see `dreaming.faults`) the child passes before each file: tests kill it
# there to show this process carries on alone.
CHILD_CHECKPOINT = "light.read_ahead"


@dataclass(frozen=True, slots=True)
class Job:
    """One file to read: its cursor (None: from the start) and its stat when the night was
    planned (whether it changed, how much is new; the read stats it again, `read_now`)."""

    sf: SessionFile
    prev: dict[str, Any] | None
    st: os.stat_result

    @property
    def new_bytes(self) -> int:
        return max(self.st.st_size - (self.prev["offset"] if self.prev else 0), 0)


class Reads(Protocol):
    """Where light gets each file's read, in the order of the jobs it was started with."""

    def read(self, job: Job, summary: LightSummary) -> Read | None: ...

    def ready(self) -> bool:
        """Whether the next read can be had now, without waiting for it."""
        ...

    def close(self) -> None: ...


class InProcess:
    """Every file read here, when it is its turn."""

    def __init__(self, settings: Settings, registry: TagRegistry) -> None:
        self.settings, self.registry = settings, registry

    def read(self, job: Job, summary: LightSummary) -> Read | None:
        return read_now(job, self.settings, self.registry, summary)

    def ready(self) -> bool:
        return True

    def close(self) -> None:
        pass


def start(jobs: Sequence[Job], settings: Settings, registry: TagRegistry) -> Reads:
    """The reads of `jobs`, ahead in a forked child where that is safe and pays (see the
    module's docstring), else in this process."""
    in_process = InProcess(settings, registry)
    limit = settings.corpus.read_ahead_mb * MB
    if not limit or len(jobs) < 2 or sum(j.new_bytes for j in jobs) < limit:
        return in_process
    if not forking.fork_safe():
        return in_process
    try:
        return ReadAhead(jobs, in_process)
    except OSError:  # no pipe or no process to be had: read here
        return in_process


class ReadAhead:
    """The reads of `jobs` from a forked child, in order; each taken once, by `read`."""

    def __init__(self, jobs: Sequence[Job], in_process: InProcess) -> None:
        self._jobs = list(jobs)
        self._here = in_process
        self._next = 0
        r, w = os.pipe()
        try:
            _grow_pipe(w)
            pid = forking.fork()
        except OSError:
            os.close(r)
            os.close(w)
            raise
        if pid == 0:  # the child: never returns
            _child(self._jobs, in_process.settings, in_process.registry, w)
        os.close(w)
        self._pid: int | None = pid
        self._pipe: int | None = r

    def read(self, job: Job, summary: LightSummary) -> Read | None:
        expected = self._jobs[self._next] if self._next < len(self._jobs) else None
        if job is not expected:
            raise RuntimeError(f"read ahead out of order: {job.sf.path} is not next")
        self._next += 1
        message = self._receive()
        if message is None:  # the child is gone: this file and the rest are read here
            self.close()
            return self._here.read(job, summary)
        read, part = message
        summary.absorb_read(job.sf, part)
        return read  # type: ignore[no-any-return]

    def ready(self) -> bool:
        if self._pipe is None:
            return True  # read here from now on
        poll = select.poll()  # not select(): a descriptor past 1023 is fine
        poll.register(self._pipe, select.POLLIN)
        return bool(poll.poll(0))

    def _receive(self) -> tuple[Any, ...] | None:
        """The next result from the child; None when it cannot come (the child is gone)."""
        if self._pipe is None:
            return None
        try:
            message = forking.receive(self._pipe)
        except Exception:  # whatever it was, the file is read here instead
            return None
        return message if isinstance(message, tuple) and len(message) == 2 else None

    def close(self) -> None:
        """Stop the child (if still there) and reap it. Safe to call more than once."""
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self._pid is not None:
            pid, self._pid = self._pid, None
            forking.stop(pid)


def _grow_pipe(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (ImportError, AttributeError, OSError):  # a smaller pipe only means more turns
        pass


def _child(jobs: list[Job], settings: Settings, registry: TagRegistry, w: int) -> None:
    """The forked child's whole life: read each job in order, hand each result to the
    thread that sends them, leave once all are sent (or the parent is gone). Whatever stops
    the reading (an error, memory) ends it there: what was read is still sent, and the
    parent reads the rest itself, meeting that error first hand if it is one."""
    with forking.child(keep=w) as fd:
        outbox = _Outbox(os.fdopen(fd, "wb"))
        sender = threading.Thread(target=outbox.send_all, daemon=True)
        sender.start()
        try:
            for job in jobs:
                faults.checkpoint(CHILD_CHECKPOINT)
                outbox.put(forking.framed(_result(job, settings, registry)))
        finally:
            outbox.put(None)
            sender.join()


class _Outbox:
    """The child's results on their way to the pipe. Light folds and commits in batches, so
    the parent takes results in bursts: the child reads on while a batch commits, holding up
    to `AHEAD_BYTES` of results the parent has not taken yet."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._queue: deque[bytes | None] = deque()
        self._held = 0
        self._cond = threading.Condition()

    def put(self, body: bytes | None) -> None:
        size = len(body) if body is not None else 0
        with self._cond:
            while self._held and self._held + size > AHEAD_BYTES:
                self._cond.wait()
            self._queue.append(body)
            self._held += size
            self._cond.notify_all()

    def send_all(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._queue:
                        self._cond.wait()
                    body = self._queue[0]
                if body is None:
                    self._out.close()
                    return
                self._out.write(body)
                self._out.flush()
                with self._cond:
                    self._queue.popleft()
                    self._held -= len(body)
                    self._cond.notify_all()
        except BaseException:  # the parent is gone (a broken pipe): so are we
            os._exit(0)


def _result(job: Job, settings: Settings, registry: TagRegistry) -> tuple[Any, ...]:
    part = LightSummary(agent=job.sf.agent)
    return (read_now(job, settings, registry, part), part)


def read_now(
    job: Job, settings: Settings, registry: TagRegistry, summary: LightSummary
) -> Read | None:
    """`job`'s file read, with its stat taken again just before: the cursor records the size
    and time of what was read, however long ago the night was planned (a file still being
    written grows meanwhile). Gone or unreadable since: the reader says so."""
    try:
        st = job.sf.path.stat()
    except OSError:
        st = job.st
    return read_new_lines(job.sf, job.prev, st, settings, registry, summary)
