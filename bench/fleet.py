"""Fleet load benchmark: the full night (light, rem, deep) over many agents, per worker count
and executor (in-process, or Procrastinate workers on one PostgreSQL database).

    .venv/bin/python bench/fleet.py --quick                 # 50 agents x 20 sessions, < 60 s
    .venv/bin/python bench/fleet.py                         # 1,000 agents x 50 sessions
    .venv/bin/python bench/fleet.py --agents 1000 --sessions 50 --workers 1,2,4 \\
        --data-dir /tmp/fleet-1000x50 --pin HEAD --profile  # reuse the set; pin the library
    .venv/bin/python bench/fleet.py --quick --executor both # fleet mode next to in-process
    .venv/bin/python bench/fleet.py --executor procrastinate \\
        --database-url postgresql://me@db:5432/postgres     # an existing PostgreSQL server

What it does, in one run:

1. Generates a deterministic (seeded) fleet of OpenClaw transcripts into a temporary folder,
   or into `--data-dir`, where a fleet with the same parameters is reused instead of
   regenerated (a manifest, written last, records the spec and the file sizes). Each agent
   has `--sessions` sessions (`<root>/agents/<agentId>/sessions/<sessionId>.jsonl` plus a
   `sessions.json` index; one session in ten is a Discord group chat, the rest direct
   chats), each 3-6 turns over a few KB: a user message that often states one of the
   agent's own facts (a small per-agent pool drawn from bench/_synth.py's vocabulary, with
   paraphrases, so the same facts recur across that agent's sessions and candidates and
   entries form), chit-chat and a request; often a tool step (thinking, a read or a test
   run, its result); a final assistant reply. Sessions start over four weeks. Generation
   runs on every core, one chunk of agents per process.
2. For each `--workers` count: a fresh state folder holding only a `dreaming.toml` with
   `read_state_dir = false` and one `[[sources]] kind = "openclaw"` pointing at the shared
   fleet folder (transcripts are not copied; databases, MEMORY.md and corpus files go to
   the fresh state folder), then the documented command in a subprocess:
   `dreaming --state-dir S run --workers N --json`. Measured: wall time of that process,
   peak RSS of its whole process tree (psutil, every 100 ms, RSS of the CLI process plus
   all its descendants summed; the maximum sample is reported, with the largest process
   count seen), agents/minute, sessions/s, corpus lines/s and input MB/s, and what the
   night produced (sessions read, corpus lines, candidates, entries added to MEMORY.md).
   Every agent's run outcome must be `ok`, and `dreaming verify` must exit 0 on a few
   agents (first, middle, last; `--verify` sets how many).
3. With `--executor procrastinate` (or `both`: each worker count measured with the
   in-process executor and then with this one, back to back, so the two share the
   machine's state and the ratio is fair), fleet mode instead: all agents' state in one
   PostgreSQL database, the work handed out by the Procrastinate queue. Per worker count
   N: a fresh database (CREATE DATABASE) and a fresh state folder whose dreaming.toml has
   the same source plus `database_url` and `jobs_dir` (a jobs folder holding `nightly`:
   light, rem, deep, every agent); N `dreaming --state-dir S worker --poll 0.2` processes
   are started and waited for until they have registered with the queue (start-up,
   imports and migrations are not timed); then the clock starts and
   `dreaming --state-dir S jobs run nightly --executor procrastinate --json` enqueues one
   task per agent (with `--agent ...` for each agent of a sample), and the bench polls
   procrastinate_jobs every 100 ms until every task has succeeded or failed: that is the
   wall time. Then the workers get SIGTERM. Measured besides: peak RSS of the worker
   processes' trees plus the enqueueing CLI (same sampler), their CPU over the wall time,
   the PostgreSQL server's peak PSS and CPU (when the bench runs the server), how long the
   enqueue command took, when the first run started and the last one ended, and from the
   `runs` table how many distinct workers (runs.worker, host:pid) ran runs and how many
   each. What the night produced is summed from the run records' summaries as from
   `run --json`. Every task must end `succeeded`, every run `ok`, one run per agent, and
   `dreaming verify` must exit 0 on the same few agents. The server is a throwaway one
   started by this process from the installed binaries (tests/pg.py's PostgresServer;
   the repo root is put on sys.path for it), or the server of `--database-url` (a role
   that may CREATE DATABASE; each run's database is dropped afterwards unless --keep).
   With neither available the bench stops with a message saying so. Sampling (pilot,
   `--max-minutes`, `--sample W:K`) is decided per worker count as above and applies to
   both executors alike; the pilot runs the in-process executor only.
   On a 2-core machine, 4 worker processes cannot beat 2: the runs are CPU-bound Python,
   and the PostgreSQL server needs a share of the same two cores.
4. Prints a table (workers, executor, agents, wall s, agents/min, sessions/s, lines/s,
   peak RSS MB, speed-up), or with --json one JSON document on stdout (progress goes to
   stderr). The speed-up compares throughput (agents/min) against the 1-worker row of
   the first executor measured (the in-process one, with `both`: a same-run baseline), so
   it stays meaningful when the 1-worker run measured a sample. The machine's core count
   is printed: N cores cap the speed-up at about N, whatever --workers says.

Long runs: unless `--max-minutes 0`, a fleet of more than 100 agents first gets a short
pilot (1 worker on spread-out samples of 4 and of 16 agents, not reported as measurements:
the difference gives seconds per agent, the rest is the fixed cost of a run); any worker
count whose full run the pilot predicts to take longer than `--max-minutes` (default 25)
is measured on every k-th agent instead (k = 4, or the next power of two that fits), via
repeated `--agent` options, and the output says so on that row. `--sample 1:4` forces
that for a worker count.

Pinning: other people edit the tree while a long run goes on; `--pin HEAD` extracts the
library (dreaming, prompts, jobs) as committed at that revision into the work dir and
makes every child import it (PYTHONPATH). The report names the library and its commit.

`--profile` adds a cProfile of one agent's night as a worker process runs it
(`dreaming.runner._run_agent_in_worker`: App.open, light, rem, deep, close) in a child
process with a fresh state, after one unprofiled agent has warmed it up; the hot spots are
printed (top functions by own time and by cumulative time).

Note on memory: RSS summed over processes counts shared pages (the interpreter, shared
libraries) once per process, so the tree peak overstates what the tree costs the machine
by roughly (processes - 1) x the shared part; the largest single process is reported too.

The children (workers and enqueue command included) run this venv's `dreaming` (or
`python -c 'from dreaming.cli import main'`) with this process's environment minus
DREAMING_* variables, so the library measured is whatever `import dreaming` finds (or the
--pin snapshot). The procrastinate mode needs the `fleet` extra (psycopg, procrastinate).
Exit status 0 when every run and every verify succeeded, 1 otherwise.

The bench's parts: _fleet_plan.py (the fleet's transcripts and the sampling plan),
_fleet_executor.py (the in-process executor, the children and their samplers, the pilot and
the profile), _fleet_procrastinate.py (fleet mode: PostgreSQL, workers, the queue),
_fleet_report.py (the printed report) and _profile.py (the profile child); this file is the
command line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from _common import human, log
from _fleet_executor import library_info, measure, pilot, pin_library, profile_one
from _fleet_plan import Fleet, FleetSpec, ensure_fleet, plan
from _fleet_procrastinate import Postgres, measure_procrastinate
from _fleet_report import render

DEFAULT_AGENTS = 1000
DEFAULT_SESSIONS = 50
QUICK_AGENTS = 50
QUICK_SESSIONS = 20
DEFAULT_WORKERS = "1,2,4"
# Measured per worker count, in this order; the first one's 1-worker row is the baseline.
EXECUTORS = {
    "in-process": ("in-process",),
    "procrastinate": ("procrastinate",),
    "both": ("in-process", "procrastinate"),
}
PILOT_MIN_FLEET = 100  # smaller fleets are measured whole, without a pilot


def _worker_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of worker counts: {text!r}") from None
    if not values or any(v < 1 or v > 64 for v in values):
        raise argparse.ArgumentTypeError("worker counts must be 1..64")
    return values


def _sample(text: str) -> tuple[int, int]:
    try:
        w, k = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WORKERS:EVERY, got {text!r}") from None
    if w < 1 or k < 1:
        raise argparse.ArgumentTypeError("WORKERS and EVERY must be at least 1")
    return w, k


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="bench/fleet.py",
        description=(
            "Fleet load benchmark: the full night (light, rem, deep) over many agents on the "
            "embedded default (one SQLite file per agent), run by `dreaming run --workers N "
            "--json` for each worker count, and/or (--executor) in fleet mode: one PostgreSQL "
            "database, the nightly job enqueued for N `dreaming worker` processes; reports "
            "wall time, peak RSS of the process tree, agents/minute, sessions/s and corpus "
            "lines/s."
        ),
        epilog=(
            "Examples: .venv/bin/python bench/fleet.py --quick | .venv/bin/python "
            "bench/fleet.py --quick --executor both | .venv/bin/python bench/fleet.py "
            "--agents 1000 --sessions 50 --workers 1,2,4 --data-dir /tmp/fleet-1000x50 --json"
        ),
    )
    _add_fleet_arguments(ap)
    _add_run_arguments(ap)
    return ap


def _add_fleet_arguments(ap: argparse.ArgumentParser) -> None:
    """The fleet's size, where it lives, and how much of it each worker count measures."""
    ap.add_argument("--agents", type=int, default=None, help=f"default {DEFAULT_AGENTS}")
    ap.add_argument(
        "--sessions",
        type=int,
        default=None,
        help=f"sessions per agent (default {DEFAULT_SESSIONS})",
    )
    ap.add_argument(
        "--workers",
        type=_worker_list,
        default=_worker_list(DEFAULT_WORKERS),
        help=f"comma-separated worker counts, one measurement each (default {DEFAULT_WORKERS})",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_AGENTS} agents x {QUICK_SESSIONS} sessions (under a minute)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--data-dir",
        type=Path,
        help="keep the generated fleet here and reuse it when the parameters match",
    )
    ap.add_argument(
        "--work-dir", type=Path, help="where the fresh state folders go (default: a temp dir)"
    )
    ap.add_argument(
        "--max-minutes",
        type=float,
        default=25.0,
        help="measure a worker count on every 4th (8th, ...) agent when the pilot predicts "
        "its full run to take longer than this; 0: never sample (default 25)",
    )
    ap.add_argument(
        "--sample",
        type=_sample,
        action="append",
        default=[],
        metavar="WORKERS:EVERY",
        help="measure this worker count on every EVERY-th agent (repeatable), e.g. 1:4",
    )


def _add_run_arguments(ap: argparse.ArgumentParser) -> None:
    """What else a run does, which executor runs it, and what the report looks like."""
    ap.add_argument(
        "--verify", type=int, default=3, help="agents to spot-check with `dreaming verify`"
    )
    ap.add_argument(
        "--profile", action="store_true", help="also cProfile one agent's night; print hot spots"
    )
    ap.add_argument("--top", type=int, default=25, help="functions kept per profile listing")
    ap.add_argument(
        "--pin",
        metavar="REV",
        help="measure the library as committed at this git revision (say HEAD), extracted "
        "to the work dir, instead of whatever the working tree holds while the runs go on",
    )
    ap.add_argument(
        "--executor",
        choices=("in-process", "procrastinate", "both"),
        default="in-process",
        help="in-process: `dreaming run --workers N` (per-agent SQLite files); procrastinate: "
        "one PostgreSQL database, `jobs run nightly --executor procrastinate` and N `dreaming "
        "worker` processes; both: each worker count with both, in the same run (default "
        "in-process)",
    )
    ap.add_argument(
        "--database-url",
        metavar="URL",
        help="PostgreSQL server for the procrastinate runs, as postgresql://USER@HOST:PORT/DB "
        "of a role that may CREATE DATABASE (each run gets a fresh database, dropped after); "
        "default: a throwaway server started from the installed binaries (tests/pg.py)",
    )
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the state folders (and, with --database-url, the databases)",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = _parser()
    args = ap.parse_args(argv)
    args.agents = args.agents or (QUICK_AGENTS if args.quick else DEFAULT_AGENTS)
    args.sessions = args.sessions or (QUICK_SESSIONS if args.quick else DEFAULT_SESSIONS)
    if args.agents < 1 or args.sessions < 1:
        ap.error("--agents and --sessions must be at least 1")
    if args.database_url and args.executor == "in-process":
        ap.error("--database-url is for --executor procrastinate or both")
    return args


def _prepare_fleet(spec: FleetSpec, data_root: Path) -> Fleet:
    log(f"fleet: {spec.agents} agents x {spec.sessions} sessions under {data_root} ...")
    fleet = ensure_fleet(spec, data_root)
    log(
        ("  generated" if fleet.generated else "  reused")
        + f": {fleet.files:,} files, {human(fleet.total_bytes)}"
        + (f" in {fleet.generate_s:.1f} s" if fleet.generated else "")
    )
    return fleet


def _library(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Which library the children import (with --pin, the snapshot extracted first)."""
    pinned = pin_library(args.pin, work) if args.pin else None
    library = library_info(work)
    if pinned:
        library.update(commit=pinned["commit"], uncommitted_changes=False, pinned=True)
    return library


def _measure_all(
    args: argparse.Namespace,
    fleet: Fleet,
    work: Path,
    schedule: dict[int, tuple[int, float | None]],
    pg: Postgres | None,
) -> tuple[list[dict[str, Any]], str | None]:
    """Every worker count with every executor, each row's speed-up, and the row that is
    the speed-ups' baseline (None: no 1-worker row)."""
    executors = EXECUTORS[args.executor]
    runs = []
    # Worker count by worker count, both executors back to back, so a drift in the
    # machine's load touches both alike.
    for w in args.workers:
        every, est = schedule[w]
        for executor in executors:
            if executor == "in-process":
                r = measure(fleet, work, w, every, args.verify, args.keep)
            else:
                assert pg is not None
                r = measure_procrastinate(fleet, work, w, every, args.verify, args.keep, pg)
            r["estimated_full_wall_s"] = est
            runs.append(r)
    base = next((r for r in runs if r["workers"] == 1 and r["executor"] == executors[0]), None)
    for r in runs:
        r["speedup"] = r["agents_per_min"] / base["agents_per_min"] if base else None
    return runs, f"{executors[0]}, 1 worker" if base else None


def _fleet_doc(fleet: Fleet) -> dict[str, Any]:
    spec = fleet.spec
    return {
        "agents": spec.agents,
        "sessions_per_agent": spec.sessions,
        "sessions": fleet.files,
        "seed": spec.seed,
        "bytes": fleet.total_bytes,
        "lines": fleet.total_lines,
        "avg_session_bytes": fleet.total_bytes / fleet.files,
        "generated": fleet.generated,
        "generate_s": fleet.generate_s,
        "root": str(fleet.root),
    }


def _machine_doc(cores: int, load_start: list[float]) -> dict[str, Any]:
    return {
        "cores": cores,
        "memory_total_bytes": psutil.virtual_memory().total,
        "loadavg_start": load_start,
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spec = FleetSpec(args.agents, args.sessions, args.seed)
    cores = os.cpu_count() or 1
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    data_root = args.data_dir or work / "data"
    started = time.perf_counter()
    pg: Postgres | None = None
    postgres: dict[str, Any] | None = None
    executors = EXECUTORS[args.executor]
    try:
        if "procrastinate" in executors:  # first, so a missing server costs no generating
            pg = Postgres(args.database_url)
            postgres = pg.describe()
        fleet = _prepare_fleet(spec, data_root)
        pilot_result = None
        if args.max_minutes > 0 and spec.agents > PILOT_MIN_FLEET:
            pilot_result = pilot(fleet, work)
        schedule = plan(
            fleet, args.workers, dict(args.sample), pilot_result, args.max_minutes, cores
        )
        library = _library(args, work)
        load_start = [round(x, 2) for x in os.getloadavg()]
        runs, baseline = _measure_all(args, fleet, work, schedule, pg)
        report: dict[str, Any] = {
            "fleet": _fleet_doc(fleet),
            "machine": _machine_doc(cores, load_start),
            "library": library,
            "executor": args.executor,
            "postgres": postgres,
            "speedup_baseline": baseline,
            "max_minutes": args.max_minutes,
            "pilot": pilot_result,
            "runs": runs,
            "profile": profile_one(fleet, work, args.top) if args.profile else None,
            "total_s": time.perf_counter() - started,
        }
    finally:
        if pg is not None:
            pg.stop()
        if not args.keep:
            if args.data_dir is None:
                shutil.rmtree(data_root, ignore_errors=True)
            if args.work_dir is None:
                shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
