"""The `dreaming scheduler` service: APScheduler 3 with a persistent SQLite job store,
coalesced misfires and a grace time per job. Due jobs are handed to the thread that serves
(the main thread), which runs them one at a time and handles SIGHUP (reload) and
SIGTERM/SIGINT (stop after the running job; a second signal interrupts it). A listener on
APScheduler's events logs every fire's outcome with the job's next fire time.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import queue
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from pathlib import Path
from types import FrameType
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobExecutionEvent,
)
from apscheduler.executors.base import BaseExecutor, MaxInstancesReachedError
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from tzlocal import get_localzone

from dreaming.app import App
from dreaming.errors import DreamingError, StateError

from ._jobs import JobCatalog, JobFile
from ._runner import (
    RUN_JOB_FUNC,
    SCHEDULED_FIRE,
    AgentOutcome,
    AgentResult,
    ScheduledCall,
)
from ._store import Executor, lock_path, store_name, store_url
from ._triggers import build_trigger, fingerprint, grace_seconds

log = logging.getLogger("dreaming.scheduler")


class ServiceState(StrEnum):
    STOPPED = "stopped"
    RUNNING = "running"
    STOPPING = "stopping"


class FireStatus(StrEnum):
    RAN = "ran"
    MISSED = "missed"  # later than the job's misfire grace time
    FAILED = "failed"  # the job function raised (per-agent failures are results, not this)


@dataclass(frozen=True)
class Fire:
    job: str
    scheduled_at: datetime
    status: FireStatus
    results: tuple[AgentResult, ...] = ()
    duration_s: float = 0.0

    def tally(self) -> str:
        """How many agents ended each way, as "ok=2 skipped=1"."""
        counts: dict[str, int] = {}
        for result in self.results:
            counts[result.outcome] = counts.get(result.outcome, 0) + 1
        return " ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "agents=0"


@dataclass(frozen=True)
class ReloadReport:
    added: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    on_demand: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()  # enabled = false: not scheduled

    def __str__(self) -> str:
        return " ".join(
            f"{name}={','.join(getattr(self, name)) or '-'}"
            for name in ("added", "replaced", "removed", "unchanged", "on_demand", "disabled")
        )


@dataclass(frozen=True)
class _Due:
    job: Any  # apscheduler.job.Job
    run_times: tuple[datetime, ...]


@dataclass(frozen=True)
class _Signal:
    signum: int


# The one job store, by the alias the scheduler knows it under (events name it).
JOBSTORE = "default"


class _MainThreadExecutor(BaseExecutor):  # type: ignore[misc]
    """Queues due jobs for the serving thread instead of running them on a pool, so one job
    runs at a time, a run sees signals like a foreground command, and a forced stop is
    recorded `interrupted` by the run itself.

    Only APScheduler's public API: `submit_job` is overridden whole (it keeps its own count
    of queued and running fires per job, so `max_instances` holds as before) and outcomes go
    to `on_event`, the listener the service registered, rather than through the base class's
    private bookkeeping. `_do_submit_job` is the abstract hook BaseExecutor declares."""

    def __init__(
        self, inbox: queue.SimpleQueue[_Due | _Signal], on_event: Callable[[Any], None]
    ) -> None:
        super().__init__()
        self._inbox = inbox
        self._on_event = on_event
        self._guard = threading.Lock()
        self._in_flight: Counter[str] = Counter()

    def submit_job(self, job: Any, run_times: list[datetime]) -> None:
        with self._guard:
            if self._in_flight[job.id] >= job.max_instances:
                raise MaxInstancesReachedError(job)  # the scheduler reports it as an event
            self._in_flight[job.id] += 1
        self._do_submit_job(job, run_times)

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        self._inbox.put(_Due(job, tuple(run_times)))

    def execute(self, due: _Due) -> list[Fire]:
        """What APScheduler's `run_job` does, except that KeyboardInterrupt propagates.
        Outcomes go out as APScheduler events (logged by JobScheduler's listener); a ran
        event carries its Fire."""
        job = due.job
        fires: list[Fire] = []
        events: list[Any] = []
        try:
            for run_time in due.run_times:
                fire, event = self._fire(job, run_time)
                fires.append(fire)
                events.append(event)
        finally:
            with self._guard:
                self._in_flight[job.id] -= 1
                if self._in_flight[job.id] <= 0:
                    del self._in_flight[job.id]
            for event in events:
                try:
                    self._on_event(event)
                except Exception:  # as APScheduler's own dispatch: a listener never stops a run
                    log.exception("job=%s event=listener-error", job.id)
        return fires

    def _fire(self, job: Any, run_time: datetime) -> tuple[Fire, JobExecutionEvent]:
        """One scheduled run time of `job`: missed past its grace, else run."""
        late = datetime.now(UTC) - run_time
        if job.misfire_grace_time is not None and late > timedelta(seconds=job.misfire_grace_time):
            missed = JobExecutionEvent(EVENT_JOB_MISSED, job.id, JOBSTORE, run_time)
            return Fire(job.id, run_time, FireStatus.MISSED), missed
        log.info("job=%s event=fire scheduled=%s", job.id, run_time.isoformat())
        started = time.monotonic()
        token = SCHEDULED_FIRE.set(run_time)
        try:
            results = job.func(*job.args, **job.kwargs)
        except Exception as err:
            failed = JobExecutionEvent(EVENT_JOB_ERROR, job.id, JOBSTORE, run_time, exception=err)
            return Fire(job.id, run_time, FireStatus.FAILED), failed
        finally:
            SCHEDULED_FIRE.reset(token)
        took = time.monotonic() - started
        fire = Fire(job.id, run_time, FireStatus.RAN, tuple(results or ()), took)
        return fire, JobExecutionEvent(EVENT_JOB_EXECUTED, job.id, JOBSTORE, run_time, retval=fire)


@contextlib.contextmanager
def _service_lock(path: Path) -> Iterator[None]:
    """One scheduler per state folder: two would run every job twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _take(fd):
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
            raise StateError(
                f"another dreaming scheduler already serves this state folder ({holder})"
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} scheduler".encode(), 0)
        yield
    finally:
        os.close(fd)


def _take(fd: int, patience_s: float = 0.5) -> bool:
    """The exclusive lock, tried for a moment: `jobs list` asking whether a scheduler runs
    holds a shared lock for an instant, which must not read as another scheduler."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


# What a procrastinate-executor scheduler stores and calls (dreaming.fleet, fleet extra).
ENQUEUE_JOB_FUNC = "dreaming.fleet:enqueue_scheduled_job"


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class JobScheduler:
    """The `dreaming scheduler` service: keeps the job store in step with the jobs folder
    and runs due jobs in the thread that calls `serve()` (or `run_next()` in tests)."""

    def __init__(
        self,
        call: ScheduledCall,
        store: str,
        *,
        profiles: Sequence[str] = (),
        timezone: tzinfo | None = None,
        lock_path: Path | None = None,
        bundled: bool = True,
    ) -> None:
        self.call = call
        # The jobs a fire can find (run_scheduled_job looks them up the same way), so the
        # store never holds a job its fire would call unknown.
        self.catalog = (
            JobCatalog.over_bundled(call.jobs_dir) if bundled else JobCatalog(call.jobs_dir)
        )
        self.store = store
        self.profiles = tuple(profiles)
        self.lock_path = lock_path
        self.state = ServiceState.STOPPED
        self._inbox: queue.SimpleQueue[_Due | _Signal] = queue.SimpleQueue()
        self._deferred: list[_Due] = []
        self._busy: str | None = None
        self._executor = _MainThreadExecutor(self._inbox, self._log_outcome)
        self._aps = BackgroundScheduler(
            jobstores={JOBSTORE: SQLAlchemyJobStore(url=store)},
            executors={"default": self._executor},
            job_defaults={"coalesce": True, "max_instances": 1},
            timezone=timezone or get_localzone(),
        )
        # A fire's own outcomes come from the executor (`on_event`); the scheduler itself
        # reports a fire dropped because the previous one has not finished.
        self._aps.add_listener(self._log_outcome, EVENT_JOB_MAX_INSTANCES)

    @classmethod
    def for_app(
        cls, app: App, folder: Path, executor: Executor = "in-process", *, bundled: bool = True
    ) -> JobScheduler:
        """The service for a state folder, scheduling the jobs of `folder` over the bundled
        examples (`bundled=False`: the folder alone). With the procrastinate executor a fire
        enqueues one task per agent for fleet workers instead of running the job here; its
        store and lock are per host, so a second scheduler on another machine (kept for
        availability) has its own, and the queue refuses what both enqueue."""
        app.paths.home.mkdir(parents=True, exist_ok=True)
        config = app.config_path.resolve() if app.config_path is not None else None
        func = ENQUEUE_JOB_FUNC if executor == "procrastinate" else RUN_JOB_FUNC
        call = ScheduledCall(app.paths.state_dir.resolve(), config, folder.resolve(), func)
        name = store_name(executor)
        return cls(
            call,
            store_url(app.paths, name),
            profiles=list(app.settings.llm.profiles),
            lock_path=lock_path(app.paths, name),
            bundled=bundled,
        )

    @property
    def jobs_dir(self) -> Path:
        return self.call.jobs_dir

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> ReloadReport:
        """Open the store, bring it in step with the folder, then let due jobs through:
        a fire missed while the service was down runs once now if within its grace time."""
        self._aps.start(paused=True)
        try:
            report = self.reload()
        except BaseException:
            self._aps.shutdown(wait=False)
            raise
        if self.state is ServiceState.STOPPED:  # a stop signal during start-up stays
            self.state = ServiceState.RUNNING
        self._aps.resume()
        log.info(
            "scheduler started pid=%d jobs_dir=%s bundled=%s store=%s %s",
            os.getpid(),
            self.jobs_dir,
            self.catalog.bundled or "-",
            self.store,
            report,
        )
        self._log_next()
        return report

    def shutdown(self) -> None:
        """Stop taking jobs; fires that came due but did not start are given back to the
        store, so the next start treats them as misfires (coalesced, within grace)."""
        if not self._aps.running:
            self.state = ServiceState.STOPPED
            return
        self.state = ServiceState.STOPPING
        self._aps.pause()
        self._aps.get_jobs()  # waits out a pass over the store that is still submitting
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Due):
                self._deferred.append(item)
        for due in self._deferred:
            with contextlib.suppress(JobLookupError):
                self._aps.modify_job(due.job.id, next_run_time=min(due.run_times))
                log.info(
                    "job=%s scheduled=%s event=deferred (runs at the next start within grace)",
                    due.job.id,
                    min(due.run_times).isoformat(),
                )
        self._deferred.clear()
        self._aps.shutdown(wait=True)
        self.state = ServiceState.STOPPED
        log.info("scheduler stopped")

    # -- the job store ----------------------------------------------------------------------

    def reload(self) -> ReloadReport:
        """Add, replace and remove stored jobs to match the folder. A job whose schedule is
        unchanged keeps its stored next fire time (and so any misfire pending on it)."""
        files = self.catalog.scheduled(self.profiles)
        wanted: dict[str, tuple[JobFile, Any]] = {}
        on_demand: list[str] = []
        disabled: list[str] = []
        for jf in files:
            if not jf.job.enabled:
                disabled.append(jf.job.name)
            elif jf.job.trigger is None:
                on_demand.append(jf.job.name)
            else:
                wanted[jf.job.name] = (jf, build_trigger(jf.job.trigger, jf.path))
        stored = {job.id: job for job in self._aps.get_jobs()}
        removed = sorted(set(stored) - set(wanted))
        for name in removed:
            self._aps.remove_job(name)
        added: list[str] = []
        replaced: list[str] = []
        unchanged: list[str] = []
        for name, (jf, trigger) in wanted.items():
            assert jf.job.trigger is not None
            grace = grace_seconds(jf.job.trigger)
            args = self.call.args(name)
            old = stored.get(name)
            if (
                old is not None
                and old.func_ref == self.call.func
                and tuple(old.args) == args
                and old.misfire_grace_time == grace
                and fingerprint(old.trigger) == fingerprint(trigger)
            ):
                unchanged.append(name)
                continue
            self._aps.add_job(
                self.call.func,
                trigger=trigger,
                args=args,
                id=name,
                name=name,
                misfire_grace_time=grace,
                coalesce=True,
                max_instances=1,
                replace_existing=True,
            )
            (added if old is None else replaced).append(name)
        return ReloadReport(
            tuple(added),
            tuple(replaced),
            tuple(removed),
            tuple(unchanged),
            tuple(on_demand),
            tuple(disabled),
        )

    def scheduled(self) -> dict[str, datetime | None]:
        """Stored job name -> next fire time."""
        return {job.id: job.next_run_time for job in self._aps.get_jobs()}

    def _log_next(self) -> None:
        for name, fire in sorted(self.scheduled().items()):
            log.info("job=%s next=%s", name, fire.isoformat() if fire else "-")

    def _next_of(self, job_id: str) -> str:
        job = self._aps.get_job(job_id)
        return job.next_run_time.isoformat() if job and job.next_run_time else "-"

    def _log_outcome(self, event: Any) -> None:
        """One line for every fire's outcome (ran with its agents' tally, failed, missed,
        or dropped because the previous fire is still going), with the next fire time."""
        upcoming = self._next_of(event.job_id)
        if event.code == EVENT_JOB_MAX_INSTANCES:
            log.warning(
                "job=%s event=skipped scheduled=%s reason='the previous fire has not finished'"
                " next=%s",
                event.job_id,
                ",".join(t.isoformat() for t in event.scheduled_run_times),
                upcoming,
            )
            return
        scheduled = event.scheduled_run_time.isoformat()
        if event.code == EVENT_JOB_MISSED:
            job = self._aps.get_job(event.job_id)
            log.warning(
                "job=%s event=missed scheduled=%s late=%.0fs grace=%ss next=%s",
                event.job_id,
                scheduled,
                (datetime.now(UTC) - event.scheduled_run_time).total_seconds(),
                job.misfire_grace_time if job else "-",
                upcoming,
            )
        elif event.code == EVENT_JOB_ERROR:
            err = event.exception
            if isinstance(err, DreamingError):  # e.g. the job file went away: no traceback
                log.error(
                    "job=%s event=error scheduled=%s error=%r next=%s",
                    event.job_id,
                    scheduled,
                    str(err),
                    upcoming,
                )
            else:
                log.error(
                    "job=%s event=error scheduled=%s next=%s",
                    event.job_id,
                    scheduled,
                    upcoming,
                    exc_info=(type(err), err, err.__traceback__),
                )
        else:
            fire: Fire = event.retval
            failed = any(r.outcome == AgentOutcome.FAILED for r in fire.results)
            log.log(
                logging.WARNING if failed else logging.INFO,
                "job=%s event=done scheduled=%s %s duration=%.1fs next=%s",
                event.job_id,
                scheduled,
                fire.tally(),
                fire.duration_s,
                upcoming,
            )

    # -- running ------------------------------------------------------------------------------

    def run_next(self, timeout: float | None = None) -> list[Fire] | None:
        """Wait up to `timeout` for the next due job and run it in this thread."""
        try:
            item = self._inbox.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, _Signal):
            self._inbox.put(item)  # serve() handles signals
            return None
        return self._run(item)

    def _run(self, due: _Due) -> list[Fire]:
        self._busy = due.job.id
        try:
            return self._executor.execute(due)
        finally:
            self._busy = None

    def serve(self) -> int:
        """Run until SIGTERM/SIGINT (exit 0 after the running job finishes; a second signal
        interrupts it: 130). SIGHUP reloads the jobs folder."""
        lock = _service_lock(self.lock_path) if self.lock_path else contextlib.nullcontext()
        with lock:
            previous = {
                sig: signal.signal(sig, self._on_signal) for sig in (*_STOP_SIGNALS, signal.SIGHUP)
            }
            try:
                self.start()
                return self._loop()
            except KeyboardInterrupt:
                log.warning("scheduler stopped during a run; the run is recorded interrupted")
                return 130
            finally:
                self.shutdown()
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    def _loop(self) -> int:
        while True:
            item = self._inbox.get()
            if isinstance(item, _Signal):
                name = signal.Signals(item.signum).name
                if item.signum == signal.SIGHUP:
                    self._reload_logged(name)
                    continue
                log.info("signal=%s stopping", name)
                return 0
            if self.state is ServiceState.RUNNING:
                self._run(item)
            else:
                self._deferred.append(item)

    def _reload_logged(self, reason: str) -> None:
        try:
            report = self.reload()
        except DreamingError as err:
            log.error("reload failed (%s), keeping the current schedule: %s", reason, err)
            return
        log.info("reload (%s) %s", reason, report)
        self._log_next()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # Signal handlers run between bytecodes of the main thread: queue, never log here.
        if signum == signal.SIGHUP:
            self._inbox.put(_Signal(signum))
        elif self.state is not ServiceState.STOPPING:  # running, or still starting up
            self.state = ServiceState.STOPPING
            self._inbox.put(_Signal(signum))
            if self._busy is not None:
                os.write(
                    2,
                    f"dreaming scheduler: stopping after job {self._busy} finishes "
                    "(signal again to interrupt it)\n".encode(),
                )
        elif self._busy is not None:
            raise KeyboardInterrupt
