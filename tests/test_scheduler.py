"""The scheduler: persisted job store, reloads, coalesced misfires under controlled time,
the per-agent lock across processes, and the service's signals."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from click.testing import CliRunner

from dreaming import demo, runner, scheduler
from dreaming.app import App
from dreaming.cli import cli
from dreaming.errors import ConfigError, StateError
from dreaming.progress import Tick
from dreaming.scheduler import (
    FireStatus,
    JobScheduler,
    ScheduledCall,
    bundled_jobs_dir,
    job_catalog,
    run_scheduled_job,
    store_url,
)
from dreaming.scheduler._service import _service_lock  # the lock itself, on purpose
from dreaming.store import agent_lock
from tests.deep_helpers import build_state, decide_all
from tests.fake_openai import DEFAULT_KEY, FakeOpenAI

DREAMING = str(Path(sys.executable).parent / "dreaming")


def write_job(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{body}')
    return path


def jobs_folder(root: Path) -> Path:
    return root / "dreaming" / "jobs"


def demo_root(tmp_path: Path) -> Path:
    root = demo.build(tmp_path / "demo")
    jobs_folder(root).mkdir(parents=True)
    return root


def scheduler_for(root: Path, func: str | None = None, bundled: bool = False) -> JobScheduler:
    """A service on the test's jobs folder alone, unless `bundled`: these tests are about
    the store, and the examples' schedules would only add fires to wait through."""
    app = App.open(root, root / "dreaming.toml")
    service = JobScheduler.for_app(app, jobs_folder(root), bundled=bundled)
    if func is not None:
        service = JobScheduler(
            ScheduledCall(root, root / "dreaming.toml", jobs_folder(root), func=func),
            store_url(app.paths),
            lock_path=root / "dreaming" / "locks" / "scheduler.lock",
            bundled=bundled,
        )
    return service


def runs_rows(root: Path, agent: str) -> list[tuple[Any, ...]]:
    db = root / "dreaming" / "agents" / f"{agent}.sqlite"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, job, phases, outcome FROM runs ORDER BY id").fetchall()


def at(hour: int, minute: int) -> datetime:
    return datetime(2026, 3, 10, hour, minute, tzinfo=UTC)


# Half a second before a one-minute interval job's fire (intervals are at least a minute).
BEFORE_A_FIRE = datetime(2026, 3, 10, 10, 30, 59, 500_000, tzinfo=UTC)


def test_the_public_names_and_the_stored_function_name() -> None:
    assert set(scheduler.__all__) == {
        "ENQUEUE_JOB_FUNC",
        "RUN_JOB_FUNC",
        "SCHEDULED_FIRE",
        "AgentOutcome",
        "AgentResult",
        "CopiedJob",
        "CopyOutcome",
        "Executor",
        "Fire",
        "FireStatus",
        "InProcessRunner",
        "Job",
        "JobCatalog",
        "JobFile",
        "JobRunner",
        "JobScheduler",
        "JobSource",
        "ReloadReport",
        "ScheduledCall",
        "ServiceState",
        "StoredSchedule",
        "Trigger",
        "build_trigger",
        "bundled_jobs_dir",
        "copy_bundled_jobs",
        "crontab_weekdays",
        "describe_job",
        "describe_trigger",
        "effective_budget",
        "find_job",
        "job_catalog",
        "jobs_dir",
        "load_job",
        "load_jobs",
        "next_fire_time",
        "read_schedules",
        "run_scheduled_job",
        "store_url",
    }
    # The job store keeps this text; it must keep resolving to the job function.
    module, _, name = scheduler.RUN_JOB_FUNC.partition(":")
    assert module == scheduler.__name__ and getattr(scheduler, name) is run_scheduled_job


# -- the job store ---------------------------------------------------------------------------


def test_reload_adds_replaces_removes_and_keeps_unchanged_schedules(tmp_path: Path) -> None:
    root = demo_root(tmp_path)
    folder = jobs_folder(root)
    write_job(folder, "daily", '[trigger]\ncron = "0 3 * * *"\ntimezone = "UTC"\n')
    write_job(folder, "often", "[trigger]\ninterval_minutes = 30\n")
    write_job(folder, "manual", 'phases = ["deep"]\n')
    service = scheduler_for(root)
    report = service.start()
    try:
        assert report.added == ("daily", "often") and report.on_demand == ("manual",)
        first = service.scheduled()
        assert set(first) == {"daily", "often"}  # on-demand jobs are not scheduled

        # Nothing changed: nothing is replaced, so an interval keeps its phase (and a
        # misfire pending on a stored job survives a reload or a restart).
        again = service.reload()
        assert again.unchanged == ("daily", "often") and not again.added + again.replaced
        assert service.scheduled() == first

        write_job(folder, "daily", '[trigger]\ncron = "30 4 * * *"\ntimezone = "UTC"\n')
        (folder / "often.toml").unlink()
        write_job(folder, "weekly", '[trigger]\ncron = "0 6 * * 0"\ntimezone = "UTC"\n')
        changed = service.reload()
        assert changed.replaced == ("daily",) and changed.removed == ("often",)
        assert changed.added == ("weekly",)
        now = service.scheduled()
        assert set(now) == {"daily", "weekly"}
        fire = now["daily"]
        assert fire is not None and (fire.hour, fire.minute) == (4, 30)
        weekly = now["weekly"]
        assert weekly is not None and weekly.strftime("%a") == "Sun"

        # A broken file on reload leaves the running schedule as it was.
        (folder / "broken.toml").write_text('name = "broken"\ntrigger = 3\n')
        with pytest.raises(ConfigError, match=r"broken\.toml"):
            service.reload()
        assert service.scheduled() == now
        (folder / "broken.toml").unlink()
    finally:
        service.shutdown()
    # The store persists: a new service on the same state folder finds the same schedule.
    restarted = scheduler_for(root)
    assert restarted.start().unchanged == ("daily", "weekly")
    assert restarted.scheduled() == now
    restarted.shutdown()


def test_one_scheduler_per_state_folder(tmp_path: Path) -> None:
    root = demo_root(tmp_path)
    service = scheduler_for(root)
    assert service.lock_path is not None
    with _service_lock(service.lock_path), pytest.raises(StateError, match="another dreaming"):
        service.serve()


# -- misfires under controlled time -----------------------------------------------------------

EVERY_TEN = '[trigger]\ncron = "*/10 * * * *"\ntimezone = "UTC"\nmisfire_grace_minutes = 5\n'


def schedule_then_go_down(root: Path) -> None:
    """Add the job at 10:31 (next fire 10:40), then stop the service."""
    write_job(jobs_folder(root), "tenmin", 'phases = ["light"]\n' + EVERY_TEN)
    with time_machine.travel(at(10, 31), tick=True):
        service = scheduler_for(root)
        assert service.start().added == ("tenmin",)
        assert service.scheduled() == {"tenmin": at(10, 40)}
        assert service.run_next(timeout=0.2) is None
        service.shutdown()


def test_fires_missed_while_down_run_once_when_within_grace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = demo_root(tmp_path)
    schedule_then_go_down(root)
    caplog.set_level("INFO", logger="dreaming")
    # Down through 10:40, 10:50 and 11:00; back at 11:02, two minutes after the last one.
    with time_machine.travel(at(11, 2), tick=True):
        service = scheduler_for(root)
        assert service.start().unchanged == ("tenmin",)
        fires = service.run_next(timeout=120)
        assert fires is not None
        assert [(f.status, f.scheduled_at) for f in fires] == [(FireStatus.RAN, at(11, 0))]
        assert {r.agent: r.outcome for r in fires[0].results} == {"main": "ok", "bob": "ok"}
        assert service.run_next(timeout=0.5) is None  # coalesced: once, not three times
        assert service.scheduled() == {"tenmin": at(11, 10)}
        service.shutdown()
    # The fire and its outcome are logged, with the next fire time the store holds.
    assert "job=tenmin event=fire scheduled=2026-03-10T11:00:00+00:00" in caplog.text
    assert re.search(
        r"job=tenmin event=done scheduled=2026-03-10T11:00:00\+00:00 ok=2 duration=\d+\.\ds "
        r"next=2026-03-10T11:10:00\+00:00",
        caplog.text,
    )
    for agent in ("main", "bob"):
        assert runs_rows(root, agent) == [(1, "tenmin", "light", "ok")]


def test_fires_missed_by_more_than_the_grace_time_do_not_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = demo_root(tmp_path)
    schedule_then_go_down(root)
    caplog.set_level("INFO", logger="dreaming")
    # Back at 11:07: the last missed fire (11:00) is 7 minutes late, the grace is 5.
    with time_machine.travel(at(11, 7), tick=True):
        service = scheduler_for(root)
        service.start()
        fires = service.run_next(timeout=120)
        assert fires is not None
        assert [(f.status, f.scheduled_at) for f in fires] == [(FireStatus.MISSED, at(11, 0))]
        assert service.run_next(timeout=0.5) is None
        assert service.scheduled() == {"tenmin": at(11, 10)}
        service.shutdown()
    assert runs_rows(root, "main") == runs_rows(root, "bob") == []
    assert re.search(
        r"job=tenmin event=missed scheduled=2026-03-10T11:00:00\+00:00 late=4\d\ds grace=300s"
        r" next=2026-03-10T11:10:00\+00:00",
        caplog.text,
    )
    assert "event=fire" not in caplog.text


def test_the_service_schedules_the_bundled_examples_and_their_fire_finds_them(
    tmp_path: Path,
) -> None:
    """A fresh install's schedule is the nightly example alone: the hourly `capped` example
    is switched off (a nightly user does not expect hourly runs), `promote` is on demand."""
    root = demo_root(tmp_path)  # no job files of its own: the examples are its schedule
    with time_machine.travel(at(10, 31), tick=True):
        service = scheduler_for(root, bundled=True)
        report = service.start()
        assert report.added == ("nightly",) and report.on_demand == ("promote",)
        assert report.disabled == ("capped",)
        nightly = service.scheduled()["nightly"]
        service.shutdown()
    assert nightly is not None
    # The store keeps the user's folder only: the example is looked up under it at the fire
    # (a fire missed by five minutes runs once, within nightly's grace).
    with time_machine.travel(nightly + timedelta(minutes=5), tick=True):
        service = scheduler_for(root, bundled=True)
        assert service.start().unchanged == ("nightly",)
        fires = service.run_next(timeout=120)
        service.shutdown()
    assert fires is not None
    assert [(f.job, f.status) for f in fires] == [("nightly", FireStatus.RAN)]
    assert {r.agent: r.outcome for r in fires[0].results} == {"main": "ok", "bob": "ok"}
    assert runs_rows(root, "main") == [(1, "nightly", "light,rem,deep", "ok")]


def test_once_the_folder_has_jobs_only_they_are_scheduled(tmp_path: Path) -> None:
    """The examples stay runnable by name, but a jobs folder of one's own is the schedule:
    no job the user never listed starts firing (and spending) on its own."""
    root = demo_root(tmp_path)
    write_job(jobs_folder(root), "mine", '[trigger]\ncron = "0 5 * * *"\ntimezone = "UTC"\n')
    write_job(jobs_folder(root), "nightly", "enabled = false\n")  # switched off: not scheduled
    with time_machine.travel(at(10, 31), tick=True):
        service = scheduler_for(root, bundled=True)
        report = service.start()
        assert report.added == ("mine",) and report.disabled == ("nightly",)
        assert set(service.scheduled()) == {"mine"}
        service.shutdown()
    app = App.open(root, root / "dreaming.toml")
    try:
        assert job_catalog(app.paths).find("promote").job.name == "promote"
    finally:
        app.close()


def job_file_gone(*_args: str | None) -> list[dict[str, Any]]:
    raise StateError("unknown job 'soon' (known: capped, nightly, promote)")


def job_crashes(*_args: str | None) -> list[dict[str, Any]]:
    raise RuntimeError("boom")


def test_a_fire_that_fails_is_logged_with_its_error_and_the_next_fire(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = demo_root(tmp_path)
    write_job(jobs_folder(root), "soon", 'phases = ["light"]\n[trigger]\ninterval_minutes = 1\n')
    caplog.set_level("INFO", logger="dreaming")
    for func in (job_file_gone, job_crashes):
        # Half a second before a minute's fire (intervals are at least a minute).
        with time_machine.travel(BEFORE_A_FIRE, tick=True):
            service = scheduler_for(root, func=f"{__name__}:{func.__name__}")
            service.start()
            try:
                fires = service.run_next(timeout=20)
            finally:
                service.shutdown()
        assert fires is not None and [f.status for f in fires] == [FireStatus.FAILED]
    assert re.search(
        r"job=soon event=error scheduled=\S+ error=\"unknown job 'soon' \(known: [^)]*\)\""
        r" next=20\d\d-",
        caplog.text,
    )
    crash = [r for r in caplog.records if "event=error" in r.getMessage() and r.exc_info]
    assert len(crash) == 1 and "RuntimeError: boom" in caplog.text  # with its traceback


# -- what the store holds, seen from other commands ----------------------------------------------


def cli_json(root: Path, *args: str) -> tuple[int, Any]:
    from dreaming.cli import _jobs, _scheduler  # noqa: F401  (registers commands)

    base = ["--state-dir", str(root), "--config", str(root / "dreaming.toml")]
    result = CliRunner().invoke(cli, [*base, *args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def cli_text(root: Path, *args: str) -> str:
    base = ["--state-dir", str(root), "--config", str(root / "dreaming.toml")]
    return CliRunner().invoke(cli, [*base, *args]).stdout


def test_jobs_list_and_scheduler_status_show_what_the_store_holds(tmp_path: Path) -> None:
    root = demo_root(tmp_path)
    folder = jobs_folder(root)
    write_job(folder, "daily", '[trigger]\ncron = "0 3 * * *"\ntimezone = "UTC"\n')
    code, status = cli_json(root, "scheduler", "status")
    assert code == 3 and status["running"] is False and status["stores"] == []
    with time_machine.travel(at(10, 31), tick=False):
        service = scheduler_for(root)
        service.start()
        service.shutdown()
    store = root / "dreaming" / "scheduler.sqlite"
    before = store.read_bytes()
    # The file changed since the store was written: the listing shows both times.
    write_job(folder, "daily", '[trigger]\ncron = "30 4 * * *"\ntimezone = "UTC"\n')
    write_job(folder, "later", '[trigger]\ncron = "0 6 * * *"\ntimezone = "UTC"\n')
    with time_machine.travel(at(12, 0), tick=False):
        _, listing = cli_json(root, "jobs", "list")
    jobs = {j["name"]: j for j in listing["jobs"]}
    assert jobs["daily"]["next_fire_time"] == "2026-03-11T04:30:00+00:00"
    assert jobs["daily"]["scheduler_next_fire_time"] == {"scheduler": "2026-03-11T03:00:00+00:00"}
    assert jobs["later"]["scheduler_next_fire_time"] == {}
    [stored] = listing["schedulers"]
    assert stored["store"] == "scheduler" and stored["path"] == str(store)
    assert stored["running"] is False and stored["holder"] is None
    text = cli_text(root, "jobs", "list")
    assert "scheduler (not running): 2026-03-11T03:00:00+00:00" in text
    assert "later: cron 0 6 * * * (UTC); next: " in text
    assert "scheduler (not running): not scheduled yet (added when it starts)" in text

    assert service.lock_path is not None
    with _service_lock(service.lock_path):  # as a running service holds it
        code, status = cli_json(root, "scheduler", "status")
        running_text = cli_text(root, "jobs", "list")
    assert code == 0 and status["running"] is True
    [stored] = status["stores"]
    assert stored["holder"] == f"pid {os.getpid()} scheduler"
    assert stored["jobs"] == {"daily": "2026-03-11T03:00:00+00:00"}
    assert "scheduler: not scheduled yet (SIGHUP reloads the jobs)" in running_text
    assert f"running (pid {os.getpid()} scheduler)" in running_text
    assert store.read_bytes() == before  # looking never writes the store


def test_a_probe_of_the_service_lock_is_not_another_scheduler(tmp_path: Path) -> None:
    lock = tmp_path / "locks" / "scheduler.lock"
    lock.parent.mkdir()
    lock.touch()
    probe = os.open(lock, os.O_RDONLY)
    fcntl.flock(probe, fcntl.LOCK_SH)  # what `jobs list` holds for an instant
    threading.Timer(0.1, os.close, (probe,)).start()
    with _service_lock(lock):
        assert lock.read_text() == f"pid {os.getpid()} scheduler"


# -- the per-agent lock across processes ---------------------------------------------------------

HOLD = """
import sys
from pathlib import Path
from dreaming.store import agent_lock
with agent_lock(Path(sys.argv[1]), sys.argv[2], "holder-test"):
    print("held", flush=True)
    sys.stdin.read()
"""


@contextlib.contextmanager
def lock_held_elsewhere(root: Path, agent: str) -> Iterator[subprocess.Popen[str]]:
    lock = root / "dreaming" / "locks" / f"{agent}.lock"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock), agent],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


def test_a_scheduled_run_skips_a_busy_agent_and_runs_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = demo_root(tmp_path)
    write_job(jobs_folder(root), "night", "")
    args = ("night", str(root), str(root / "dreaming.toml"), str(jobs_folder(root)))
    caplog.set_level("INFO", logger="dreaming")
    with lock_held_elsewhere(root, "bob") as holder:
        results = {r.agent: r for r in run_scheduled_job(*args)}
    assert results["main"].outcome == "ok"
    assert results["main"].phase_dicts()["deep"]["actions"]["add"] >= 1
    bob = results["bob"]
    assert bob.outcome == "skipped" and bob.summaries == {}
    assert bob.reason == f"locked by pid {holder.pid} holder-test"
    assert runs_rows(root, "bob") == [(1, "night", "light,rem,deep", "skipped")]
    assert runs_rows(root, "main") == [(1, "night", "light,rem,deep", "ok")]
    assert "job=night agent=bob run=1 outcome=skipped" in caplog.text
    assert "job=night agent=main run=1 outcome=ok duration=" in caplog.text
    # Once the other run is gone, the next run takes the agent as usual.
    again = {r.agent: r.outcome for r in run_scheduled_job(*args)}
    assert again == {"main": "ok", "bob": "ok"}


def test_two_processes_on_one_job_and_agent_one_runs_the_other_reports_the_lock(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    root = build_state(tmp_path / "s", base_url=fake_openai.base_url)
    # The model answers only once the second process is done: the first process must wait for
    # it however long that takes on a loaded machine, not time out into the fallback path.
    config = root / "dreaming.toml"
    config.write_text(
        config.read_text().replace(
            "deadline_s = 5\ntimeout_s = 5", "deadline_s = 600\ntimeout_s = 600"
        )
    )
    write_job(jobs_folder(root), "deepmain", 'phases = ["light", "deep"]\nagents = ["main"]\n')
    arrived, release = threading.Event(), threading.Event()
    decide = decide_all("add")

    def slow_model(request: dict[str, Any]) -> Any:
        arrived.set()  # the first process holds the lock and waits on the model
        # Released only once the second process has finished, however slow the machine: a
        # bounded wait here let the first run finish first on a loaded CI host.
        release.wait(600)
        return decide(request)

    fake_openai.default = slow_model
    env = os.environ | {"OPENAI_API_KEY": DEFAULT_KEY}
    base = [DREAMING, "--state-dir", str(root), "--config", str(root / "dreaming.toml")]
    first = subprocess.Popen(
        [*base, "jobs", "run", "deepmain", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert arrived.wait(60), "the first run never reached the model"
        second = subprocess.run(
            [*base, "jobs", "run", "deepmain"], capture_output=True, text=True, env=env, timeout=60
        )
    finally:
        release.set()
        out, err = first.communicate(timeout=300)
    assert second.returncode == 75, second.stderr  # busy, as `run` says it
    assert second.stdout.strip() == f"agent main: skipped, locked by pid {first.pid} deepmain"
    assert "Traceback" not in second.stderr
    assert first.returncode == 0, err
    assert "Traceback" not in err
    report = json.loads(out)
    assert report["runs"] == [{"agent": "main", "run_id": 1, "outcome": "ok"}]
    assert report["agents"]["main"]["deep"]["paths"].get("llm", 0) >= 1
    assert runs_rows(root, "main") == [
        (1, "deepmain", "light,deep", "ok"),
        (2, "deepmain", "light,deep", "skipped"),
    ]
    with sqlite3.connect(root / "dreaming" / "agents" / "main.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert "<!-- dreaming:group -->" in (root / "workspace" / "MEMORY.md").read_text()


# -- the service and its signals -------------------------------------------------------------------


class Lines:
    """Collects a process's stderr lines on a thread; `wait_for` polls them."""

    def __init__(self, stream: Any) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            self._queue.put(line)

    def wait_for(self, needle: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        for line in self.seen:
            if needle in line:
                return line
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            self.seen.append(line)
            if needle in line:
                return line
        raise AssertionError(f"no line with {needle!r} in:\n" + "".join(self.seen))

    def text(self) -> str:
        while not self._queue.empty():
            self.seen.append(self._queue.get())
        return "".join(self.seen)


def store_ids(root: Path) -> set[str]:
    with sqlite3.connect(root / "dreaming" / "scheduler.sqlite") as conn:
        return {r[0] for r in conn.execute("SELECT id FROM apscheduler_jobs")}


def test_service_reloads_on_sighup_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    root = demo_root(tmp_path)
    folder = jobs_folder(root)
    write_job(folder, "fast", 'phases = ["light"]\n[trigger]\ninterval_minutes = 1\n')
    # A folder with jobs of its own is the schedule: no bundled hourly or nightly fire.
    proc = subprocess.Popen(
        [DREAMING, "--state-dir", str(root), "--config", str(root / "dreaming.toml"), "scheduler"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = Lines(proc.stderr)
    try:
        lines.wait_for(f"bundled={bundled_jobs_dir()}")
        lines.wait_for("job=fast next=")  # scheduled (its fires are tested in process)
        assert store_ids(root) == {"fast"}
        write_job(folder, "later", '[trigger]\ncron = "0 3 * * *"\n')
        proc.send_signal(signal.SIGHUP)
        lines.wait_for(
            "reload (SIGHUP) added=later replaced=- removed=- unchanged=fast on_demand=- disabled=-"
        )
        assert store_ids(root) == {"fast", "later"}
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        assert proc.wait(timeout=15) == 0
        assert time.monotonic() - sent < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = lines.text()
    assert "signal=SIGTERM stopping" in log and "scheduler stopped" in log
    assert "Traceback" not in log
    # Consistent state: every run that started finished, no agent lock is left held, the
    # store kept.
    for agent in ("main", "bob"):
        rows = runs_rows(root, agent)
        assert {r[3] for r in rows} <= {"ok"}
        with agent_lock(root / "dreaming" / "locks" / f"{agent}.lock", agent, "test"):
            pass
    assert store_ids(root) == {"fast", "later"}


def stop_during_the_run(
    job_name: str, state_dir: str, config: str | None, folder: str
) -> list[dict[str, Any]]:
    """A job that receives SIGTERM as it starts: the service lets it finish, then stops."""
    os.kill(os.getpid(), signal.SIGTERM)
    return run_scheduled_job(job_name, state_dir, config, folder)


def interrupt_during_the_run(
    job_name: str, state_dir: str, config: str | None, folder: str
) -> list[dict[str, Any]]:
    """A job that receives two SIGTERMs in the middle of light: the second interrupts it."""
    app = App.open(Path(state_dir), Path(config) if config else None)

    def progress(tick: Tick) -> None:
        if tick.phase == "light" and tick.done == 2:
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)

    try:
        return [
            r.to_dict()
            for r in runner.run(app, ["light"], ["main"], job=job_name, progress=progress)
        ]
    finally:
        app.close()


def serve_in_this_process(root: Path, func: Callable[..., Any]) -> int:
    write_job(jobs_folder(root), "soon", 'phases = ["light"]\n[trigger]\ninterval_minutes = 1\n')
    service = scheduler_for(root, func=f"{__name__}:{func.__name__}")
    # Should the job never fire, stop the service instead of hanging the test run.
    guard = threading.Timer(20, os.kill, (os.getpid(), signal.SIGINT))
    guard.start()
    try:
        with time_machine.travel(BEFORE_A_FIRE, tick=True):
            return service.serve()
    finally:
        guard.cancel()


def test_sigterm_during_a_run_lets_it_finish_and_exits_0(tmp_path: Path) -> None:
    root = demo_root(tmp_path)
    assert serve_in_this_process(root, stop_during_the_run) == 0
    for agent in ("main", "bob"):
        assert runs_rows(root, agent) == [(1, "soon", "light", "ok")]


def test_a_second_signal_interrupts_the_run_and_it_is_recorded(tmp_path: Path) -> None:
    root = demo_root(tmp_path)
    assert serve_in_this_process(root, interrupt_during_the_run) == 130
    assert runs_rows(root, "main") == [(1, "soon", "light", "interrupted")]
    with agent_lock(root / "dreaming" / "locks" / "main.lock", "main", "test"):
        pass
