"""Scheduling `jobs/`: triggers, the runner seam, and the long-running service.

    JobScheduler      decides *when*: APScheduler 3 with a persistent SQLite job store,
        │             coalesced misfires and a grace time per job. Due jobs are handed to
        │             the thread that serves (the main thread), which runs them one at a
        │             time and handles SIGHUP (reload) and SIGTERM/SIGINT (stop).
        ▼
    ScheduledCall     what the job store persists: an importable function and plain args.
        ▼
    run_scheduled_job opens an App and asks a JobRunner to run the job now.
        ▼
    JobRunner         decides *how*: InProcessRunner runs the job's phases agent by agent
                      under each agent's lock; a busy agent is skipped, not fatal. A queue
                      based runner (Procrastinate, for fleets) plugs in here and leaves the
                      trigger code alone.

Cron expressions follow standard crontab: weekday 0 and 7 are Sunday, and when both the
day of month and the weekday are restricted a day matching either fires (APScheduler 3
counts weekdays from Monday and requires both, so expressions are translated here).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import queue
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from pathlib import Path
from types import FrameType
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED
from apscheduler.events import JobExecutionEvent
from apscheduler.executors.base import BaseExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.exc import SQLAlchemyError
from tzlocal import get_localzone

from dreaming.app import App
from dreaming.config import BudgetSettings, Paths
from dreaming.errors import ConfigError, DreamingError, LockedError, StateError
from dreaming.jobs import Job, JobFile, Trigger, bundled_jobs_dir, load_job, load_jobs
from dreaming.phases.light import Progress
from dreaming.runs import record_skipped

log = logging.getLogger(__name__)

RUN_JOB_FUNC = "dreaming.scheduler:run_scheduled_job"
AgentResult = dict[str, Any]


# -- where jobs live, and finding one ------------------------------------------------------


def jobs_dir(paths: Paths) -> Path:
    """`jobs_dir` from the settings, else `<state>/dreaming/jobs` if it exists, else the
    bundled examples."""
    if paths.settings.jobs_dir is not None:
        return paths.settings.jobs_dir
    own = paths.home / "jobs"
    return own if own.is_dir() else bundled_jobs_dir()


def find_job(folder: Path, name: str, profiles: Sequence[str] = ()) -> JobFile:
    """The job called `name` in `folder`. Other files that do not load do not stop it."""
    known: list[str] = []
    broken: list[str] = []
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        try:
            job = load_job(path, profiles)
        except ConfigError as err:
            broken.append(str(err))
            continue
        if job.name == name:
            return JobFile(path, job)
        known.append(job.name)
    hint = f" (known: {', '.join(known)})" if known else f" (no job files in {folder})"
    if broken:
        hint += "; files that did not load: " + "; ".join(broken)
    raise StateError(f"unknown job {name!r}{hint}")


# -- triggers ---------------------------------------------------------------------------------

_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _weekday(token: str) -> int:
    low = token.strip().lower()
    if low in _DAYS:
        return _DAYS.index(low)
    if low.isdigit() and int(low) <= 7:
        return int(low)
    raise ValueError(f"weekday {token!r} is not 0-7 or sun-sat")


def crontab_weekdays(spec: str) -> str:
    """A crontab weekday field (0/7 = Sunday) as APScheduler day names ("mon,wed")."""
    if spec == "*":
        return "*"
    days: set[int] = set()
    for part in spec.split(","):
        base, slash, step_text = part.partition("/")
        if slash and not (step_text.isdigit() and int(step_text) > 0):
            raise ValueError(f"weekday step {step_text!r} is not a positive number")
        step = int(step_text) if slash else 1
        if base == "*":
            low, high = 0, 6
        elif "-" in base:
            first, last = base.split("-", 1)
            low, high = _weekday(first), _weekday(last)
            if low > high:
                raise ValueError(f"weekday range {base!r} runs backwards")
        else:
            low = _weekday(base)
            high = 6 if slash else low
        days.update(d % 7 for d in range(low, high + 1, step))
    return ",".join(_DAYS[d] for d in sorted(days))


def trigger_zone(trigger: Trigger) -> tzinfo:
    return ZoneInfo(trigger.timezone) if trigger.timezone else get_localzone()


def build_trigger(trigger: Trigger, origin: Path | str = "job") -> Any:
    """The APScheduler trigger for a job's `[trigger]`; a bad expression is a ConfigError
    naming `origin` and the key."""
    zone = trigger_zone(trigger)
    if trigger.interval_minutes is not None:
        return IntervalTrigger(minutes=trigger.interval_minutes, timezone=zone)
    assert trigger.cron is not None
    minute, hour, dom, month, dow = trigger.cron.split()
    try:
        days = crontab_weekdays(dow)
        if not dom.startswith("*") and not dow.startswith("*"):
            # crontab: a restricted day of month and weekday fire on a day matching either
            return OrTrigger(
                [
                    CronTrigger.from_crontab(f"{minute} {hour} {dom} {month} *", zone),
                    CronTrigger.from_crontab(f"{minute} {hour} * {month} {days}", zone),
                ]
            )
        return CronTrigger.from_crontab(f"{minute} {hour} {dom} {month} {days}", timezone=zone)
    except ValueError as err:
        raise ConfigError(f"{origin}: key 'trigger.cron': {trigger.cron!r}: {err}") from None


def describe_trigger(trigger: Trigger | None) -> str:
    if trigger is None:
        return "on demand"
    zone = trigger.timezone or f"local {get_localzone()}"
    if trigger.interval_minutes is not None:
        return f"every {trigger.interval_minutes:g} min ({zone})"
    return f"cron {trigger.cron} ({zone})"


def next_fire_time(
    trigger: Trigger | None, now: datetime | None = None, origin: Path | str = "job"
) -> datetime | None:
    """When a freshly scheduled trigger would fire next (None: on demand)."""
    if trigger is None:
        return None
    built = build_trigger(trigger, origin)
    zone = trigger_zone(trigger)
    moment = (now or datetime.now(UTC)).astimezone(zone)
    fire: datetime | None = built.get_next_fire_time(None, moment)
    return fire


def grace_seconds(trigger: Trigger) -> int:
    # APScheduler wants a positive whole number of seconds; 0 minutes means "never late".
    return max(1, round(trigger.misfire_grace_minutes * 60))


def describe_job(job_file: JobFile, now: datetime | None = None) -> dict[str, Any]:
    """What `dreaming jobs list` shows for one job."""
    job = job_file.job
    fire = next_fire_time(job.trigger, now, job_file.path)
    trig = job.trigger
    return {
        "name": job.name,
        "description": job.description,
        "file": str(job_file.path),
        "phases": list(job.phases),
        "agents": job.agents if job.agents == "*" else list(job.agents),
        "trigger": describe_trigger(trig),
        "cron": trig.cron if trig else None,
        "interval_minutes": trig.interval_minutes if trig else None,
        "timezone": (trig.timezone or str(get_localzone())) if trig else None,
        "misfire_grace_minutes": trig.misfire_grace_minutes if trig else None,
        "next_fire_time": fire.isoformat() if fire else None,
        "budget": job.budget.model_dump(),
        "llm": job.llm,
        "dry_run": job.dry_run,
    }


# -- running a job now --------------------------------------------------------------------


class AgentOutcome(StrEnum):
    OK = "ok"
    BUDGET = "budget"  # deep stopped on its budget; the rest waits for the next run
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    SKIPPED = "skipped"  # another run held the agent's lock


def effective_budget(settings: BudgetSettings, job: BudgetSettings) -> BudgetSettings:
    """A job's per-run limits replace the settings' defaults; the daily caps are per agent
    and shared by every job, so the stricter of the two applies."""
    update: dict[str, Any] = {
        key: getattr(job, key)
        for key in ("max_usd", "max_tokens", "max_calls")
        if getattr(job, key) is not None
    }
    for key in ("daily_max_usd", "daily_max_tokens"):
        caps = [v for v in (getattr(settings, key), getattr(job, key)) if v is not None]
        if caps:
            update[key] = min(caps)
    return settings.model_copy(update=update)


class JobRunner(ABC):
    """Runs one job now over its agents and reports one result per agent.

    Contract: a result is `{"agent", "job", "phases", "dry_run", "run_id", "outcome"}` with
    `outcome` an `AgentOutcome` value (plus `reason` for skipped and `error` for failed
    agents). An agent that another run holds is reported `skipped`, never raised; a failure
    on one agent does not stop the others. An unknown job raises `StateError`.
    """

    @abstractmethod
    def run(
        self,
        job_name: str,
        *,
        agents: Sequence[str] | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> list[AgentResult]:
        """Run `job_name` now; `agents` narrows the job's agents, `dry_run` forces one."""


class InProcessRunner(JobRunner):
    """Runs a job in this process, agent by agent, through `App.run` (one lock, one run
    record per agent)."""

    def __init__(self, app: App, jobs_dir: Path) -> None:
        self.app = app
        self.jobs_dir = jobs_dir

    def job(self, job_name: str) -> Job:
        return find_job(self.jobs_dir, job_name, list(self.app.settings.llm.profiles)).job

    def agents_for(self, job: Job, only: Sequence[str] | None = None) -> list[str]:
        if not only:
            return job.agent_list(self.app.agents())
        chosen = self.app.agents(only)
        if job.agents != "*":
            outside = [a for a in chosen if a not in job.agents]
            if outside:
                raise StateError(
                    f"job {job.name!r} does not run on {', '.join(outside)} "
                    f"(its agents: {', '.join(job.agents)})"
                )
        return chosen

    def run(
        self,
        job_name: str,
        *,
        agents: Sequence[str] | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> list[AgentResult]:
        job = self.job(job_name)
        budget = effective_budget(self.app.settings.budget, job.budget)
        return [
            self._run_agent(job, agent, dry_run or job.dry_run, budget, progress)
            for agent in self.agents_for(job, agents)
        ]

    def _run_agent(
        self,
        job: Job,
        agent: str,
        dry_run: bool,
        budget: BudgetSettings,
        progress: Progress | None,
    ) -> AgentResult:
        base: AgentResult = {"agent": agent, "job": job.name, "phases": {}, "dry_run": dry_run}
        phases = ",".join(job.phases)
        log.info("job=%s agent=%s phases=%s dry_run=%s event=start", job.name, agent, phases, dry_run)
        started = time.monotonic()
        try:
            [result] = self.app.run(
                job.phases,
                [agent],
                job=job.name,
                dry_run=dry_run,
                budget=budget,
                llm=job.llm,
                progress=progress,
            )
        except LockedError as err:
            result = base | {
                "run_id": None,
                "outcome": AgentOutcome.SKIPPED.value,
                "reason": f"locked by {err.holder}",
            }
            if not dry_run:
                result["run_id"] = self._record_skip(job, agent, result)
        except Exception as err:  # one agent's failure must not cost the others their run
            if isinstance(err, DreamingError):
                log.error("job=%s agent=%s error=%r", job.name, agent, str(err))
            else:
                log.exception("job=%s agent=%s crashed", job.name, agent)
            result = base | {"run_id": None, "outcome": AgentOutcome.FAILED.value}
            result["error"] = str(err) or type(err).__name__
        took = time.monotonic() - started
        why = result.get("reason") or result.get("error")
        if why is None:
            log.info(
                "job=%s agent=%s run=%s outcome=%s duration=%.1fs",
                job.name,
                agent,
                result["run_id"],
                result["outcome"],
                took,
            )
        else:
            log.warning(
                "job=%s agent=%s run=%s outcome=%s duration=%.1fs reason=%r",
                job.name,
                agent,
                result["run_id"],
                result["outcome"],
                took,
                why,
            )
        return result

    def _record_skip(self, job: Job, agent: str, result: AgentResult) -> int | None:
        try:
            return record_skipped(self.app.engine(agent), agent, list(job.phases), job.name, result)
        except (SQLAlchemyError, DreamingError) as err:
            log.warning("job=%s agent=%s cannot record the skipped run: %s", job.name, agent, err)
            return None


def run_scheduled_job(
    job_name: str, state_dir: str, config: str | None, jobs_folder: str
) -> list[AgentResult]:
    """The function the job store persists: plain arguments only, so a stored job survives
    restarts and could be dispatched anywhere."""
    app = App.open(Path(state_dir), Path(config) if config else None)
    try:
        return InProcessRunner(app, Path(jobs_folder)).run(job_name)
    finally:
        app.close()


@dataclass(frozen=True)
class ScheduledCall:
    """What every stored job calls: `func` (an importable "module:function") with
    (job name, state dir, config path, jobs dir). Another executor (a queue for fleets)
    is another `func`; the trigger code does not change."""

    state_dir: Path
    config: Path | None
    jobs_dir: Path
    func: str = RUN_JOB_FUNC

    def args(self, job_name: str) -> tuple[str, str, str | None, str]:
        config = str(self.config) if self.config is not None else None
        return (job_name, str(self.state_dir), config, str(self.jobs_dir))


# -- the service ----------------------------------------------------------------------------


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


@dataclass(frozen=True)
class ReloadReport:
    added: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    on_demand: tuple[str, ...] = ()

    def __str__(self) -> str:
        return " ".join(
            f"{name}={','.join(getattr(self, name)) or '-'}"
            for name in ("added", "replaced", "removed", "unchanged", "on_demand")
        )


@dataclass(frozen=True)
class _Due:
    job: Any  # apscheduler.job.Job
    run_times: tuple[datetime, ...]


@dataclass(frozen=True)
class _Signal:
    signum: int


class _MainThreadExecutor(BaseExecutor):  # type: ignore[misc]
    """Queues due jobs for the serving thread instead of running them on a pool, so one job
    runs at a time, a run sees signals like a foreground command, and a forced stop is
    recorded `interrupted` by the run itself."""

    def __init__(self, inbox: queue.SimpleQueue[_Due | _Signal]) -> None:
        super().__init__()
        self._inbox = inbox

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        self._inbox.put(_Due(job, tuple(run_times)))

    def execute(self, due: _Due) -> list[Fire]:
        """What APScheduler's `run_job` does, except that KeyboardInterrupt propagates."""
        job = due.job
        alias = job._jobstore_alias
        fires: list[Fire] = []
        events: list[Any] = []
        try:
            for run_time in due.run_times:
                late = datetime.now(UTC) - run_time
                if job.misfire_grace_time is not None and late > timedelta(
                    seconds=job.misfire_grace_time
                ):
                    log.warning(
                        "job=%s outcome=missed scheduled=%s late=%.0fs grace=%ss",
                        job.id,
                        run_time.isoformat(),
                        late.total_seconds(),
                        job.misfire_grace_time,
                    )
                    events.append(JobExecutionEvent(EVENT_JOB_MISSED, job.id, alias, run_time))
                    fires.append(Fire(job.id, run_time, FireStatus.MISSED))
                    continue
                log.info("job=%s event=fire scheduled=%s", job.id, run_time.isoformat())
                try:
                    results = job.func(*job.args, **job.kwargs)
                except Exception as err:
                    log.exception("job=%s event=error scheduled=%s", job.id, run_time.isoformat())
                    events.append(
                        JobExecutionEvent(EVENT_JOB_ERROR, job.id, alias, run_time, exception=err)
                    )
                    fires.append(Fire(job.id, run_time, FireStatus.FAILED))
                else:
                    events.append(
                        JobExecutionEvent(EVENT_JOB_EXECUTED, job.id, alias, run_time, retval=None)
                    )
                    fires.append(Fire(job.id, run_time, FireStatus.RAN, tuple(results or ())))
        finally:
            self._run_job_success(job.id, events)
        return fires


@contextlib.contextmanager
def _service_lock(path: Path) -> Iterator[None]:
    """One scheduler per state folder: two would run every job twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
            raise StateError(
                f"another dreaming scheduler already serves this state folder ({holder})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} scheduler".encode(), 0)
        yield
    finally:
        os.close(fd)


def store_url(paths: Paths) -> str:
    return f"sqlite:///{paths.home / 'scheduler.sqlite'}"


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
    ) -> None:
        self.call = call
        self.store = store
        self.profiles = tuple(profiles)
        self.lock_path = lock_path
        self.state = ServiceState.STOPPED
        self._inbox: queue.SimpleQueue[_Due | _Signal] = queue.SimpleQueue()
        self._deferred: list[_Due] = []
        self._busy: str | None = None
        self._executor = _MainThreadExecutor(self._inbox)
        self._aps = BackgroundScheduler(
            jobstores={"default": SQLAlchemyJobStore(url=store)},
            executors={"default": self._executor},
            job_defaults={"coalesce": True, "max_instances": 1},
            timezone=timezone or get_localzone(),
        )

    @classmethod
    def for_app(cls, app: App, folder: Path) -> JobScheduler:
        app.paths.home.mkdir(parents=True, exist_ok=True)
        config = app.config_path.resolve() if app.config_path is not None else None
        call = ScheduledCall(app.paths.state_dir.resolve(), config, folder.resolve())
        return cls(
            call,
            store_url(app.paths),
            profiles=list(app.settings.llm.profiles),
            lock_path=app.paths.home / "locks" / "scheduler.lock",
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
        self.state = ServiceState.RUNNING
        self._aps.resume()
        log.info(
            "scheduler started pid=%d jobs_dir=%s store=%s %s",
            os.getpid(),
            self.jobs_dir,
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
        files = load_jobs(self.jobs_dir, self.profiles)
        wanted: dict[str, tuple[JobFile, Any]] = {}
        on_demand: list[str] = []
        for jf in files:
            if jf.job.trigger is None:
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
                and _fingerprint(old.trigger) == _fingerprint(trigger)
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
            tuple(added), tuple(replaced), tuple(removed), tuple(unchanged), tuple(on_demand)
        )

    def scheduled(self) -> dict[str, datetime | None]:
        """Stored job name -> next fire time."""
        return {job.id: job.next_run_time for job in self._aps.get_jobs()}

    def _log_next(self) -> None:
        for name, fire in sorted(self.scheduled().items()):
            log.info("job=%s next=%s", name, fire.isoformat() if fire else "-")

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
        elif self.state is ServiceState.RUNNING:
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


def _fingerprint(trigger: Any) -> str:
    """What a trigger fires on; a fresh IntervalTrigger's start date is not part of it."""
    if isinstance(trigger, OrTrigger):
        return "or[" + ";".join(_fingerprint(t) for t in trigger.triggers) + "]"
    if isinstance(trigger, IntervalTrigger):
        return f"interval[{trigger.interval.total_seconds()}]@{trigger.timezone}"
    return f"{trigger}@{getattr(trigger, 'timezone', '')}"


__all__ = [
    "AgentOutcome",
    "Fire",
    "FireStatus",
    "InProcessRunner",
    "JobRunner",
    "JobScheduler",
    "ReloadReport",
    "ScheduledCall",
    "ServiceState",
    "build_trigger",
    "crontab_weekdays",
    "describe_job",
    "describe_trigger",
    "effective_budget",
    "find_job",
    "jobs_dir",
    "next_fire_time",
    "run_scheduled_job",
    "store_url",
]

