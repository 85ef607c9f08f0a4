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

Across a run's agents (`NightReads`): a run of several agents (`dreaming run`) reads one
agent at a time, and between two agents' reading there is the first agent's tail (corpus
files, rescoring; in a whole night REM and deep too), while the next agent's first read
would make its light wait. So on a backlog night the child forked for one agent goes on to
the next ones (up to `LATER_AGENTS`): before the fork, this process plans what each of
their lights will most likely ask for (`Plan`: its cursors, tombstones and admission as
they stand now, without its lock), and the child reads that after this agent's files. Light
takes such a read only if it asks for that file from the same cursor with the same
admission; any other file it reads itself, and what it did not ask for is dropped. A read
made ahead is as consistent as any: it covers the file as it was when read, and its cursor
records that stat, so what was appended later is read the next night. (The child itself
never opens a database: SQLite's state for files this process has open is copied into a
forked child, and a connection there fails or worse.)
"""

from __future__ import annotations

import dataclasses
import os
import select
import threading
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol

from dreaming import faults, forking
from dreaming.config import Settings
from dreaming.ingest.tags import TagRegistry
from dreaming.messages import SessionFile
from dreaming.phases.light import _claims_ahead
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
# Reading on into the agents after it is planned from this much new in the first one (a
# backlog, not a night's few lines), for at most this many of them; it pays with at least
# `read_ahead_mb` new between them all.
LATER_FROM_MB = 1
LATER_AGENTS = 8


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


# How light will most likely read an agent's session files (as the run found them): each
# file's place among them, and its job. And the agents after the one a child is forked for,
# each with its plan.
Plan = Callable[[str, Sequence[SessionFile]], list[tuple[int, Job]]]
Later = Sequence[tuple[str, list[tuple[int, Job]]]]


class Reads(Protocol):
    """Where light gets each file's read (asked for in the order of its jobs: a reading
    child reads them in that order, and drops what is passed over)."""

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


def start(
    jobs: Sequence[Job], settings: Settings, registry: TagRegistry, *, later: Later = ()
) -> Reads:
    """The reads of `jobs`, ahead in a forked child where that is safe and pays (see the
    module's docstring), else in this process. With `later`, the child reads on into those
    agents' planned files (`NightReads`)."""
    in_process = InProcess(settings, registry)
    limit = settings.corpus.read_ahead_mb * MB
    if not limit or not jobs:
        return in_process
    files = len(jobs) + sum(len(p) for _, p in later)
    new = sum(j.new_bytes for j in jobs) + sum(j.new_bytes for _, p in later for _, j in p)
    if files < 2 or new < limit or not forking.fork_safe():
        return in_process
    try:
        return ReadAhead(jobs, in_process, later)
    except OSError:  # no pipe or no process to be had: read here
        return in_process


class ReadAhead:
    """The reads of `jobs` (and of the `later` agents' planned files) from a forked child,
    each taken once, by `read`, in the child's order."""

    def __init__(self, jobs: Sequence[Job], in_process: InProcess, later: Later = ()) -> None:
        self._here = in_process
        # Every job the child reads, by its place in the child's order: the first agent's
        # jobs, then each later agent's planned ones; and each file's place.
        self._planned: dict[tuple[int, int], Job] = {(0, i): job for i, job in enumerate(jobs)}
        for k, (_, planned) in enumerate(later, 1):
            self._planned.update(((k, i), job) for i, job in planned)
        self._at: dict[tuple[str, str], tuple[int, int]] = {}
        for place, job in self._planned.items():
            self._at.setdefault((job.sf.agent, str(job.sf.path)), place)
        self._agents = {agent: k for k, (agent, _) in enumerate(later, 1)}
        self._passed = (0, -1)  # the last place taken, or passed over
        self._held: tuple[Any, ...] | None = None  # received, not yet asked for
        r, w = os.pipe()
        try:
            _grow_pipe(w)
            pid = forking.fork()
        except OSError:
            os.close(r)
            os.close(w)
            raise
        if pid == 0:  # the child: never returns
            _child(list(jobs), later, in_process.settings, in_process.registry, w)
        os.close(w)
        self._pid: int | None = pid
        self._pipe: int | None = r

    def serves(self, agent: str, jobs: Sequence[Job], limit: int) -> bool:
        """Whether this child is worth keeping for `agent`'s light (`jobs`): it is still
        there and reads on into that agent; it planned most of what light reads of it (or
        little is left to read here); and light would not first wait while the child reads
        much that was planned for agents before it and never taken (one another run holds,
        or whose night failed)."""
        k = self._agents.get(agent)
        if self._pipe is None or k is None:
            return False
        skipped = sum(j.new_bytes for at, j in self._planned.items() if self._passed < at < (k, 0))
        if skipped >= limit:
            return False
        planned = unplanned = 0
        for job in jobs:
            if self._place(job) is not None:
                planned += job.new_bytes
            else:
                unplanned += job.new_bytes
        return planned >= unplanned or unplanned < limit

    def read(self, job: Job, summary: LightSummary) -> Read | None:
        want = self._place(job)
        while want is not None and self._pipe is not None:
            message = self._next()
            if message is None:  # the child is gone: this file and the rest are read here
                self.close()
                break
            if message[1] > want:  # taken already (asked for twice): read here
                break
            self._held = None
            self._passed = message[1]
            if message[1] == want:
                _, _, read, counted = message
                return _received(job, read, counted, summary)
            # A file light does not ask for (not admitted now, unchanged, read here): dropped.
        return self._here.read(job, summary)

    def _place(self, job: Job) -> tuple[int, int] | None:
        """`job`'s place in the child's order, when the child reads it as light would: the
        same file, cursor and admission. (Any other job light reads here, at once.)"""
        at = self._at.get((job.sf.agent, str(job.sf.path)))
        planned = self._planned.get(at) if at is not None else None
        if planned is None or at is None or at <= self._passed:
            return None
        same = planned.prev == job.prev and planned.sf == job.sf
        return at if same and planned.sf.extra == job.sf.extra else None

    def ready(self) -> bool:
        if self._pipe is None or self._held is not None:
            return True  # read here from now on, or the next message is here already
        poll = select.poll()  # not select(): a descriptor past 1023 is fine
        poll.register(self._pipe, select.POLLIN)
        return bool(poll.poll(0))

    def _next(self) -> tuple[Any, ...] | None:
        """The child's next message, held until taken; None when it cannot come (the child
        is gone)."""
        if self._held is None:
            self._held = self._receive()
        return self._held

    def _receive(self) -> tuple[Any, ...] | None:
        if self._pipe is None:
            return None
        try:
            message = forking.receive(self._pipe)
        except Exception:  # whatever it was, the file is read here instead
            return None
        if isinstance(message, tuple) and len(message) == 4:
            return message
        return None

    def close(self) -> None:
        """Stop the child (if still there) and reap it. Safe to call more than once."""
        self._held = None
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self._pid is not None:
            pid, self._pid = self._pid, None
            forking.stop(pid)


class NightReads:
    """Reading ahead across one run's agents, in the run's order (`order`): on a backlog
    night, the child forked for one agent reads on into the next ones, as `plan` plans them
    here (see the module's docstring), and serves them while it is worth keeping
    (`ReadAhead.serves`); then the next agent that reads ahead forks its own."""

    def __init__(self, order: Sequence[tuple[str, Sequence[SessionFile]]], plan: Plan) -> None:
        self._order = list(order)
        self._plan = plan
        self._plans: dict[str, list[tuple[int, Job]]] = {}  # made once in a run
        self._reader: ReadAhead | None = None

    def reads(
        self, agent: str, jobs: Sequence[Job], settings: Settings, registry: TagRegistry
    ) -> Reads:
        limit = settings.corpus.read_ahead_mb * MB
        if self._reader is not None:
            if self._reader.serves(agent, jobs, limit):
                return _Borrowed(self._reader)
            self.close()
        later = self._later(agent, jobs, limit)
        reads = start(jobs, settings, registry, later=later)
        if isinstance(reads, ReadAhead) and later:
            self._reader = reads
            return _Borrowed(reads)
        return reads

    def _later(self, agent: str, jobs: Sequence[Job], limit: int) -> Later:
        """The next agents' plans, when `agent`'s night is a backlog's and a child may be
        forked to read them."""
        new = sum(j.new_bytes for j in jobs)
        if not limit or new < LATER_FROM_MB * MB or not forking.fork_safe():
            return []
        names = [a for a, _ in self._order]
        after = names.index(agent) + 1 if agent in names else len(names)
        later: list[tuple[str, list[tuple[int, Job]]]] = []
        for name, files in self._order[after : after + LATER_AGENTS]:
            planned = self._plans.get(name)
            if planned is None:
                try:
                    planned = self._plan(name, files) if files else []
                except Exception:  # its own night meets (and reports) what is wrong
                    planned = []
                self._plans[name] = planned
            later.append((name, planned))
        return later

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


class _Borrowed:
    """A run's reader lent to one agent's light: closed by the run, not by the agent."""

    def __init__(self, reader: ReadAhead) -> None:
        self._reader = reader

    def read(self, job: Job, summary: LightSummary) -> Read | None:
        return self._reader.read(job, summary)

    def ready(self) -> bool:
        return self._reader.ready()

    def close(self) -> None:
        pass


def _grow_pipe(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (ImportError, AttributeError, OSError):  # a smaller pipe only means more turns
        pass


def _child(
    jobs: list[Job], later: Later, settings: Settings, registry: TagRegistry, w: int
) -> None:
    """The forked child's whole life: read each job in order, then each later agent's
    planned ones, handing each result to the thread that sends them; leave once all are
    sent (or the parent is gone). Whatever stops the reading (an error, memory) ends it
    there: what was read is still sent, and the parent reads the rest itself, meeting that
    error first hand if it is one."""
    with forking.child(keep=w) as fd:
        outbox = _Outbox(os.fdopen(fd, "wb"))
        sender = threading.Thread(target=outbox.send_all, daemon=True)
        sender.start()
        try:
            recent = _claims_ahead.Recent()  # light's claim cache, as it most likely is
            _read_all(outbox, 0, list(enumerate(jobs)), settings, registry, recent)
            for k, (_, planned) in enumerate(later, 1):
                _read_all(outbox, k, planned, settings, registry, recent)
        finally:
            outbox.put(None)
            sender.join()


def _read_all(
    outbox: _Outbox,
    agent: int,
    planned: list[tuple[int, Job]],
    settings: Settings,
    registry: TagRegistry,
    recent: _claims_ahead.Recent,
) -> None:
    """Read one agent's planned files, each result with its place."""
    for i, job in planned:
        faults.checkpoint(CHILD_CHECKPOINT)
        part = LightSummary(agent=job.sf.agent)
        read = read_now(job, settings, registry, part)
        if read is not None:
            ahead = outbox.holds() >= _claims_ahead.FROM_HELD
            claims = _claims_ahead.claims_of(read.rows, settings, recent, ahead)
            if claims is not None:
                read = dataclasses.replace(read, claims=claims)
        outbox.put(forking.framed(("read", (agent, i), *_sent(read, part))))


# A read crosses the pipe without what the parent has already: the file's SessionFile (the
# job's, equal to it: `ReadAhead._place`) and an empty summary of the read. Over many short
# sessions, unpickling those was a third of taking each read (frozen dataclasses, a path, enums).
def _sent(read: Read | None, part: LightSummary) -> tuple[Read | None, tuple[Any, ...]]:
    if read is not None:
        read.reader.session = None  # type: ignore[assignment]  # put back by `_received`
    return read, (part.messages, dict(part.dropped), dict(part.skips))


def _received(
    job: Job, read: Read | None, counted: tuple[Any, ...], summary: LightSummary
) -> Read | None:
    messages, dropped, skips = counted
    summary.absorb_read(
        job.sf,
        LightSummary(
            agent=job.sf.agent, messages=messages, dropped=Counter(dropped), skips=Counter(skips)
        ),
    )
    if read is not None:
        read.reader.session = job.sf
    return read


class _Outbox:
    """The child's results on their way to the pipe. Light folds and commits in batches, so
    the parent takes results in bursts: the child reads on while a batch commits, holding up
    to `AHEAD_BYTES` of results the parent has not taken yet."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._queue: deque[bytes | None] = deque()
        self._held = 0
        self._sending = 0  # of `_held`: the result being written (light may be taking it)
        self._cond = threading.Condition()

    def holds(self) -> int:
        """Bytes of the results waiting behind the one being sent: light has not begun to
        take them (the one being sent may be a big file's, which light is taking)."""
        with self._cond:
            return self._held - self._sending

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
                    self._sending = len(body) if body is not None else 0
                if body is None:
                    self._out.close()
                    return
                self._out.write(body)
                self._out.flush()
                with self._cond:
                    self._queue.popleft()
                    self._held -= len(body)
                    self._sending = 0
                    self._cond.notify_all()
        except BaseException:  # the parent is gone (a broken pipe): so are we
            os._exit(0)


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
