"""The fleet bench's Procrastinate executor (imported as `_fleet_procrastinate` from bench/):
fleet mode, all agents' state in one PostgreSQL database and the work handed out by the
queue.

Owns: where the databases live (`Postgres`: a throwaway server from tests/pg.py, or the
server of --database-url; a fresh database per measurement), the `dreaming worker` processes
(started, waited for until registered, stopped), one enqueued night watched every 100 ms
until every task has succeeded or failed, and what the run records say about it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from _common import REPO, log
from _fleet_executor import (
    MB,
    POLL_S,
    _busy_cpu_s,
    _child_env,
    _cli,
    _rates,
    _tree_rss,
    fresh_state,
    summarize,
    verify_agents,
)
from _fleet_plan import Fleet, spread

RUN_TASK = "dreaming.run_agent_job"
JOB_NAME = "nightly"
WORKER_POLL_S = 0.2  # `dreaming worker --poll`
WORKER_READY_S = 90.0  # workers must have registered with the queue within this
STALL_S = 300.0  # no task finished for this long: the measurement is given up
DB_POLL_S = 1.0  # the PostgreSQL server's memory (PSS, slower to read than RSS)


def _libpq(url: str) -> str:
    """A SQLAlchemy-style or libpq PostgreSQL URL as a libpq connection string."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise SystemExit(f"--database-url: not a database URL: {url!r}") from None
    if parsed.get_backend_name() != "postgresql":
        raise SystemExit(f"--database-url must be postgresql://..., not {url!r}")
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


class Postgres:
    """Where the procrastinate runs' databases live: a throwaway server (tests/pg.py's
    PostgresServer, run by this process) or the server of --database-url. Every
    measurement gets a fresh database (CREATE DATABASE), dropped afterwards."""

    def __init__(self, database_url: str | None) -> None:
        try:
            import procrastinate  # noqa: F401
            import psycopg  # noqa: F401
        except ImportError as e:
            raise SystemExit(
                f"--executor procrastinate needs the fleet extra (pip install -e '.[fleet]'): {e}"
            ) from None
        self.server: Any = None
        if database_url:
            self.admin = _libpq(database_url)
            self.kind = "--database-url"
            return
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))
        from tests.pg import PostgresServer, PostgresUnavailable

        server = PostgresServer()
        log("starting a throwaway PostgreSQL server (tests/pg.py) ...")
        try:
            server.start()
        except PostgresUnavailable as e:
            raise SystemExit(
                "--executor procrastinate needs PostgreSQL: no --database-url was given and no "
                f"local server could be started ({e.reason.splitlines()[0]}). Install the "
                "server binaries (Debian: apt-get install postgresql; or set DREAMING_PG_BIN), "
                "or pass --database-url postgresql://USER@HOST:PORT/postgres (a role that may "
                "CREATE DATABASE)."
            ) from None
        self.server = server
        self.admin = server.dsn("postgres")
        self.kind = "throwaway server"

    def describe(self) -> dict[str, Any]:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return {
            "kind": self.kind,
            "server_version": row[0] if row else None,
            "dsn": self.admin if self.server else _hide_password(self.admin),
        }

    def dsn(self, name: str) -> str:
        from sqlalchemy.engine import make_url

        url = make_url(self.admin).set(database=name)
        return url.render_as_string(hide_password=False)

    def create(self, name: str) -> str:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)

    def drop(self, name: str) -> None:
        import psycopg
        from psycopg import sql

        try:
            with psycopg.connect(self.admin, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        except psycopg.Error as e:
            log(f"  could not drop database {name}: {e}")

    def process(self) -> psutil.Process | None:
        """The postmaster, when this process runs the server (its RSS and CPU are measured)."""
        pid = self.server.pid if self.server is not None else None
        return psutil.Process(pid) if pid else None

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def _hide_password(dsn: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(dsn).render_as_string(hide_password=True)


def _tree_cpu_s(proc: psutil.Process | None) -> float:
    """CPU seconds (user+sys) of `proc`, its reaped children and its live descendants."""
    if proc is None:
        return 0.0
    try:
        t = proc.cpu_times()
        total = float(t.user + t.system + t.children_user + t.children_system)
        children = proc.children(recursive=True)
    except psutil.Error:
        return 0.0
    for child in children:
        try:
            c = child.cpu_times()
        except psutil.Error:
            continue
        total += c.user + c.system
    return total


def _tree_pss(proc: psutil.Process) -> int:
    """Summed PSS of `proc` and its descendants: a PostgreSQL server's shared buffers are
    mapped by every backend, so their RSS would count them once per backend."""
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        procs = [proc]
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except (psutil.Error, AttributeError):
            continue
    return total


def _queue_states(conn: Any) -> dict[str, int]:
    rows = conn.execute(
        "SELECT status, count(*) FROM procrastinate_jobs WHERE task_name = %s GROUP BY status",
        (RUN_TASK,),
    ).fetchall()
    return {str(status): int(n) for status, n in rows}


def _tail(path: Path, limit: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def start_workers(state: Path, n: int) -> list[subprocess.Popen[bytes]]:
    """`dreaming --state-dir S worker --poll 0.2`, n times; output to S/worker-<i>.log."""
    cmd = [*_cli(), "--state-dir", str(state), "worker", "--poll", str(WORKER_POLL_S)]
    procs = []
    for i in range(n):
        with open(state / f"worker-{i}.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, env=_child_env(), cwd=state
                )
            )
    return procs


def wait_workers_ready(dsn: str, procs: list[subprocess.Popen[bytes]], state: Path) -> float:
    """Until every worker has registered with the queue (procrastinate_workers): they have
    created the schemas and are listening. Seconds it took."""
    import psycopg

    started = time.perf_counter()
    deadline = started + WORKER_READY_S
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            dead = [i for i, p in enumerate(procs) if p.poll() is not None]
            if dead:
                raise RuntimeError(
                    f"worker {dead[0]} exited with {procs[dead[0]].returncode} at start:\n"
                    + _tail(state / f"worker-{dead[0]}.log")
                )
            row = conn.execute("SELECT to_regclass('procrastinate_workers')").fetchone()
            if row is not None and row[0] is not None:
                count = conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
                if count is not None and count[0] >= len(procs):
                    return time.perf_counter() - started
            if time.perf_counter() > deadline:
                raise RuntimeError(f"workers not registered after {WORKER_READY_S:.0f} s")
            time.sleep(POLL_S)


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> list[int | None]:
    """SIGTERM (finish the running task, then exit), SIGKILL after 30 s; exit statuses."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    codes: list[int | None] = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=30))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            codes.append(None)  # had to be killed
    return codes


@dataclass
class _Memory:
    """What the watch saw of memory: the watched trees' summed RSS over time, its peaks, and
    the database server's peak PSS."""

    peak: int = 0
    procs: int = 0
    single: int = 0
    db: int = 0
    timeline: list[tuple[float, int]] = field(default_factory=list)

    def sample(self, procs: list[psutil.Process], at: float) -> None:
        total_rss = count = 0
        for p in procs:
            t, c, largest = _tree_rss(p)
            total_rss, count = total_rss + t, count + c
            self.single = max(self.single, largest)
        self.timeline.append((at, total_rss))
        self.peak, self.procs = max(self.peak, total_rss), max(self.procs, count)

    def by_quarter(self, wall: float) -> list[int]:
        return [
            max((b for t, b in self.timeline if q * wall / 4 <= t <= (q + 1) * wall / 4), default=0)
            for q in range(4)
        ]


@dataclass
class _Watch:
    """The enqueueing CLI and the queue as the watch loop follows them."""

    proc: subprocess.Popen[bytes]
    out_path: Path
    err_path: Path
    failures: list[str] = field(default_factory=list)
    enqueue: dict[str, Any] = field(default_factory=dict)
    states: dict[str, int] = field(default_factory=dict)
    total: int | None = None  # tasks queued, once the CLI has said
    usage: Any = None  # the CLI's resource usage, once it has exited

    def enqueued(self, status: int, seconds: float) -> bool:
        """Read the exited CLI's JSON; False: it printed none (give up)."""
        proc = self.proc
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.enqueue = {"exit_status": proc.returncode, "s": seconds}
        try:
            queued = json.loads(self.out_path.read_bytes())["queued"]
        except (ValueError, KeyError):
            self.failures.append("enqueue printed no JSON: " + _tail(self.err_path))
            return False
        kinds: dict[str, int] = {}
        for q in queued:
            kinds[q["outcome"]] = kinds.get(q["outcome"], 0) + 1
        self.enqueue["outcomes"] = kinds
        self.total = kinds.get("queued", 0)
        if proc.returncode != 0 or self.total != len(queued):
            self.failures.append(f"enqueue: exit {proc.returncode}, outcomes {kinds}")
        return True


def _follow(
    watch: _Watch,
    conn: Any,
    workers: list[subprocess.Popen[bytes]],
    watched: list[psutil.Process],
    db_proc: psutil.Process | None,
    memory: _Memory,
    started: float,
) -> None:
    """Every POLL_S until every task succeeded or failed (or the run stalls, or every worker
    exits): sample memory, reap the enqueueing CLI, read the queue."""
    enqueuer = psutil.Process(watch.proc.pid)
    last_finished, last_progress = -1, started
    db_next = started
    while True:
        now = time.perf_counter()
        memory.sample([*watched, *([enqueuer] if watch.usage is None else [])], now - started)
        if db_proc is not None and now >= db_next:
            db_next = now + DB_POLL_S
            memory.db = max(memory.db, _tree_pss(db_proc))
        if watch.usage is None:
            pid, status, ru = os.wait4(watch.proc.pid, os.WNOHANG)
            if pid:
                watch.usage = ru
                if not watch.enqueued(status, now - started):
                    break
        watch.states = states = _queue_states(conn)
        finished = states.get("succeeded", 0) + states.get("failed", 0)
        if watch.total is not None and finished >= watch.total:
            break
        if finished != last_finished:
            last_finished, last_progress = finished, now
        elif now - last_progress > STALL_S:
            watch.failures.append(f"no task finished for {STALL_S:.0f} s; queue {states}")
            break
        if all(w.poll() is not None for w in workers):
            watch.failures.append(f"every worker exited; queue {states}")
            break
        time.sleep(POLL_S)


def run_queue(
    state: Path,
    dsn: str,
    workers: list[subprocess.Popen[bytes]],
    agents: list[str] | None,
    pg: Postgres,
) -> dict[str, Any]:
    """Enqueue the nightly job (`jobs run nightly --executor procrastinate --json`) while
    the workers wait, and watch every 100 ms until every task succeeded or failed: the
    RSS of the workers' trees (and of the enqueueing CLI while it runs) and the queue."""
    import psycopg

    base = [*_cli(), "--state-dir", str(state), "jobs", "run", JOB_NAME]
    base += ["--executor", "procrastinate", "--json"]
    cmd = list(base)
    for agent in agents or ():
        cmd += ["--agent", agent]
    out_path, err_path = state / "enqueue.json", state / "enqueue.stderr"
    watched = [psutil.Process(p.pid) for p in workers]
    db_proc = pg.process()
    memory = _Memory()
    conn = psycopg.connect(dsn, autocommit=True)
    try:
        cpu0 = sum(_tree_cpu_s(w) for w in watched)
        db_cpu0 = _tree_cpu_s(db_proc)
        busy0 = _busy_cpu_s()
        wall0 = time.time()
        started = time.perf_counter()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=_child_env(), cwd=state)
        watch = _Watch(proc, out_path, err_path)
        _follow(watch, conn, workers, watched, db_proc, memory, started)
        wall = time.perf_counter() - started
        cpu = sum(_tree_cpu_s(w) for w in watched) - cpu0
        db_cpu = _tree_cpu_s(db_proc) - db_cpu0 if db_proc is not None else None
        busy = _busy_cpu_s() - busy0
    finally:
        conn.close()
    if watch.usage is None:  # gave up before the enqueue finished
        proc.kill()
        _, _, watch.usage = os.wait4(proc.pid, 0)
    enqueue_cpu = watch.usage.ru_utime + watch.usage.ru_stime
    tree_cpu = cpu + enqueue_cpu
    return {
        "command": " ".join(base) + (f" --agent ... ({len(agents)} agents)" if agents else ""),
        "worker_command": " ".join([*_cli(), "--state-dir", "S", "worker", "--poll"])
        + f" {WORKER_POLL_S}",
        "wall_s": wall,
        "wall_started_at": wall0,
        "enqueue": watch.enqueue,
        "queue_total": watch.total,
        "queue_states_at_end": watch.states,
        "peak_rss_bytes": memory.peak,
        "peak_processes": memory.procs,
        "peak_single_rss_bytes": memory.single,
        "rss_samples": len(memory.timeline),
        "rss_by_quarter_bytes": memory.by_quarter(wall),
        "cpu_s": tree_cpu,
        "worker_cpu_s": cpu,
        "enqueue_cpu_s": enqueue_cpu,
        "db_cpu_s": db_cpu,
        "db_peak_pss_bytes": memory.db if db_proc is not None else None,
        # PostgreSQL's CPU is the system under test here, not another job competing.
        "others_cores": max(0.0, busy - tree_cpu - (db_cpu or 0.0)) / wall if wall else 0.0,
        "watch_failures": watch.failures,
    }


def _utc_seconds(value: Any) -> float | None:
    if not isinstance(value, datetime):
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def read_runs(dsn: str, wall0: float) -> dict[str, Any]:
    """The run records the workers wrote (table `runs`): what the night did, summed as for
    `run --json`, which workers ran it, and when the first run started and the last ended."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT agent, worker, started_at, ended_at, outcome, summary FROM runs "
            "WHERE job = %s ORDER BY started_at",
            (JOB_NAME,),
        ).fetchall()
        states = _queue_states(conn)
    runs: list[dict[str, Any]] = []
    agents: dict[str, Any] = {}
    by_worker: dict[str, int] = {}
    for agent, worker, _, _, outcome, summary in rows:
        try:
            doc = json.loads(summary or "{}")
        except ValueError:
            doc = {}
        runs.append({"agent": agent, "outcome": outcome, "error": doc.get("error")})
        agents[agent] = doc.get("phases") or {}
        by_worker[str(worker)] = by_worker.get(str(worker), 0) + 1
    starts = [s for s in (_utc_seconds(r[2]) for r in rows) if s is not None]
    ends = [e for e in (_utc_seconds(r[3]) for r in rows) if e is not None]
    return {
        **summarize({"runs": runs, "agents": agents}),
        "runs_by_worker": dict(sorted(by_worker.items())),
        "distinct_workers": len(by_worker),
        "duplicate_runs": len(runs) - len(agents),
        "first_run_started_s": min(starts) - wall0 if starts else None,
        "last_run_ended_s": max(ends) - wall0 if ends else None,
        "queue_states": states,
    }


def measure_procrastinate(
    fleet: Fleet, work: Path, workers: int, every: int, verify_k: int, keep: bool, pg: Postgres
) -> dict[str, Any]:
    """One night of the fleet (or every `every`-th agent) through the Procrastinate queue:
    a fresh database and state folder, `workers` worker processes started and registered
    first, then enqueue and wait until every task has succeeded or failed."""
    all_agents = fleet.spec.agent_ids()
    chosen = all_agents[::every]
    db = f"fleet_bench_{os.getpid()}_w{workers}"
    dsn = pg.create(db)
    jobs = work / f"jobs-{db}"
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / f"{JOB_NAME}.toml").write_text(
        f'name = "{JOB_NAME}"\nphases = ["light", "rem", "deep"]\nagents = "*"\n',
        encoding="utf-8",
    )
    head = f"database_url = {json.dumps(dsn)}\njobs_dir = {json.dumps(str(jobs))}\n"
    state = fresh_state(work, f"state-pq-w{workers}", fleet.root, head)
    label = f"{len(chosen)} agents" + (f" (every {every}th: a sample)" if every > 1 else "")
    log(f"measuring: procrastinate, {workers} worker process(es), {label} ...")
    procs: list[subprocess.Popen[bytes]] = []
    r: dict[str, Any] = {"watch_failures": []}
    try:
        procs = start_workers(state, workers)
        try:
            ready_s = wait_workers_ready(dsn, procs, state)
        except RuntimeError as e:
            raise SystemExit(f"procrastinate, {workers} worker(s): {e}") from None
        r = run_queue(state, dsn, procs, chosen if every > 1 else None, pg)
        r["workers_ready_s"] = ready_s
        r["worker_exit_statuses"] = stop_workers(procs)
        r.update(read_runs(dsn, r.pop("wall_started_at")))
        r["verify"] = verify_agents(state, spread(chosen, verify_k))
        logs = [_tail(state / f"worker-{i}.log", 4000) for i in range(workers)]
        r["worker_log_warnings"] = [
            line
            for log in logs
            for line in log.splitlines()
            if any(w in line for w in ("ERROR", "Traceback", "outcome=failed", "event=stalled"))
        ][:10]
        if r["watch_failures"]:
            r["stderr_tail"] = "\n".join(log[-1000:] for log in logs)
    finally:
        stop_workers(procs)
        if not keep:
            shutil.rmtree(state, ignore_errors=True)
            shutil.rmtree(jobs, ignore_errors=True)
            pg.drop(db)
    wall = r["wall_s"]
    r["failures"] = [*({"watch": f} for f in r["watch_failures"]), *r["failures"]]
    r.update(_rates(r, fleet, chosen, wall, "procrastinate", workers, every))
    r.update(
        {
            "state_dir": str(state) if keep else None,
            "database": db if keep else None,
            "ok": not r["watch_failures"]
            and r["all_ok"]
            and r["queue_states"] == {"succeeded": len(chosen)}
            and r["agents_run"] == len(chosen)
            and r["duplicate_runs"] == 0
            and r["sessions_read"] == len(chosen) * fleet.spec.sessions
            and r["verify"]["ok"],
        }
    )
    log(
        f"  {wall:.1f} s, {r['agents_per_min']:.0f} agents/min, "
        f"peak RSS {r['peak_rss_bytes'] / MB:.0f} MB, runs on {r['distinct_workers']} "
        f"worker(s), {'ok' if r['ok'] else 'NOT OK'}"
    )
    return r
