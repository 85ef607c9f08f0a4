"""The child processes bench/ingest.py times, and what it reads back from them.

Every measurement is a whole process started with `sys.executable -c <script>`, timed from
the parent (spawn to reap, start-up included), its CPU time and peak RSS taken from os.wait4's
rusage of exactly that child. Two scripts:

- the bare baseline: open each file in binary, `for line in f: json.loads(line)`; its start-up
  is Python's alone;
- the light phase (`runner.run_light(App.open(state, None, env={}))`), or discovery plus
  TranscriptReader only ("read"), or start-up only ("floor"); its start-up is Python's plus
  importing dreaming and App.open, which the child also times apart, done as the `dreaming`
  command does it (no cycle collection until the App is open: `gc_tuning`).

A light run's outputs are read back after the child exits (so the reading is not timed): the
counts it printed, and a fingerprint (sha256) of its corpus files and of the corpus_lines and
candidates rows in every agent database, so a speed change can be shown to leave the night's
outputs unchanged byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _synth import SynthSet

# argv: a file holding one path a line. Prints one JSON line.
_BARE_CHILD = r"""
import json, sys
loads = json.loads
lines = size = 0
with open(sys.argv[1]) as listing:
    paths = listing.read().splitlines()
for p in paths:
    with open(p, "rb") as f:
        for line in f:
            loads(line)
            lines += 1
            size += len(line)
print(json.dumps({"bytes": size, "lines": lines}))
"""

# argv: state dir, then "run" (the light phase), "read" (discovery and TranscriptReader only,
# no admission/corpus/claims/SQLite) or "floor" (start-up only). Prints one JSON line last.
_LIGHT_CHILD = r"""
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
try:  # start up as the `dreaming` command does (a revision before it had no such step)
    from dreaming.gc_tuning import pause_for_start_up, start_up_done
except ImportError:
    pause_for_start_up = start_up_done = lambda: None
pause_for_start_up()
import dreaming
from dreaming import runner
from dreaming.app import App
app = App.open(Path(sys.argv[1]), None, env={})
start_up_done()
t1 = time.perf_counter()
agents = []
if sys.argv[2] == "run":
    agents = runner.run_light(app)
elif sys.argv[2] == "read":
    from dreaming.ingest.transcripts import TranscriptReader, discover_openclaw
    for sf in discover_openclaw(Path(sys.argv[1])):
        reader = TranscriptReader(sf)
        n = sum(1 for _ in reader)
        end = reader.cursor
        agents.append({"messages": n, "bytes_read": end.offset, "lines": end.line})
t2 = time.perf_counter()
app.close()
print(json.dumps({
    "startup_s": t1 - t0,
    "light_s": t2 - t1,
    "agents": agents,
    "library": str(Path(dreaming.__file__).parent),
}))
"""

# The candidates columns that make a night's result (ids and timestamps of the run do not).
_CANDIDATE_COLUMNS = (
    "key, text, tokens, sessions, days, owner_lines, agent_lines, untrusted_lines,"
    " system_lines, durable_cue, score, status, evidence_count, salience, features"
)
_CORPUS_COLUMNS = "session_id, line, day, role, origin_class, text, text_hash, speaker"


def spawn(script: str, args: list[str], cwd: Path) -> dict[str, Any]:
    """Run `python -c script args` as a whole process: its last stdout line (JSON) plus the
    wall time from spawn to reap, user+sys CPU and peak RSS of exactly that child."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMING_")}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        env=env,
        cwd=cwd,  # `-c` puts the cwd first on sys.path: never import from wherever we are
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.stdout.close()
    # wait4 reports the rusage of exactly this child (RUSAGE_CHILDREN would be the maximum
    # over every child waited for so far, hiding a smaller later run).
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"benchmark child failed with exit status {proc.returncode}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    result["process_wall_s"] = wall
    result["cpu_s"] = usage.ru_utime + usage.ru_stime
    result["peak_rss_bytes"] = usage.ru_maxrss * 1024  # Linux: kilobytes
    return result


def bare(listing: Path, work: Path) -> dict[str, Any]:
    """One whole-process run of the bare json.loads loop over the files in `listing`."""
    return spawn(_BARE_CHILD, [str(listing)], work)


def link_state(data: SynthSet, state: Path, every: int = 1) -> int:
    """A fresh state dir whose agents/<id>/sessions/ hold (every n-th of) the set's files as
    hard links (a copy across file systems): a symlink out of a sessions folder is never
    followed, since it may be another agent's transcript."""
    chosen = data.files[::every]
    for f in chosen:
        src = data.root / f.path
        dst = state / f.path
        if not dst.parent.is_dir():
            dst.parent.mkdir(parents=True)
            index = src.parent / "sessions.json"
            if index.is_file():
                shutil.copyfile(index, dst.parent / "sessions.json")
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)
    return sum(f.bytes for f in chosen)


def light(data: SynthSet, work: Path, every: int, keep: bool) -> dict[str, Any]:
    """One light phase over (every n-th file of) the set, in a child with a fresh state dir;
    its figures, its outputs' counts and their fingerprint."""
    state = Path(tempfile.mkdtemp(prefix="light-state-", dir=work))
    try:
        input_bytes = link_state(data, state, every)
        chosen = data.files[::every]
        r = spawn(_LIGHT_CHILD, [str(state), "run"], state)
        agents = r["agents"]
        skips: dict[str, int] = {}
        for a in agents:
            for k, v in a["skips"].items():
                skips[k] = skips.get(k, 0) + v
        return {
            "files": len(chosen),
            "bytes": input_bytes,
            "lines": sum(f.lines for f in chosen),
            "process_wall_s": r["process_wall_s"],
            "cpu_s": r["cpu_s"],
            "wall_s": r["light_s"],
            "startup_s": r["startup_s"],
            "peak_rss_bytes": r["peak_rss_bytes"],
            "bytes_read": sum(a["bytes_read"] for a in agents),
            "sessions_read": sum(a["sessions"]["read"] for a in agents),
            "outputs": {
                "messages": sum(a["messages"] for a in agents),
                "corpus_lines": sum(a["corpus_lines"] for a in agents),
                "candidates_new": sum(a["candidates"]["new"] for a in agents),
                "candidates_pending": sum(a["candidates"]["pending"] for a in agents),
                "recalls": sum(a["recalls"] for a in agents),
                "corpus_files_written": sum(a["corpus_files_written"] for a in agents),
                "skips": skips,
                "fingerprint": fingerprint(state),
            },
            "library": r["library"],
            "state_dir": str(state) if keep else None,
        }
    finally:
        if not keep:
            shutil.rmtree(state, ignore_errors=True)


def fingerprint(state: Path) -> str:
    """sha256 over the night's outputs in `state`: every corpus file's name and bytes, and
    the corpus_lines and candidates rows of every agent database, in a fixed order."""
    h = hashlib.sha256()
    for path in sorted(state.rglob("session-corpus/*.txt")):
        h.update(str(path.relative_to(state)).encode() + b"\0" + path.read_bytes() + b"\0")
    for db in sorted(state.rglob("dreaming/agents/*.sqlite")):
        h.update(db.name.encode() + b"\0")
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            for table, columns, order in (
                ("corpus_lines", _CORPUS_COLUMNS, "agent, session_id, line, text_hash"),
                ("candidates", _CANDIDATE_COLUMNS, "agent, key"),
            ):
                for row in con.execute(f"SELECT {columns} FROM {table} ORDER BY {order}"):
                    h.update(repr(row).encode() + b"\n")
        finally:
            con.close()
    return h.hexdigest()


def readers_only(data: SynthSet, work: Path) -> dict[str, Any]:
    """Discovery + TranscriptReader alone (no admission, stripping, claims or SQLite): how
    much of the light phase's time is reading, the rest being what it does with messages."""
    state = Path(tempfile.mkdtemp(prefix="read-state-", dir=work))
    try:
        input_bytes = link_state(data, state)
        r = spawn(_LIGHT_CHILD, [str(state), "read"], state)
        return {
            "files": len(r["agents"]),
            "bytes": input_bytes,
            "lines": sum(a["lines"] for a in r["agents"]),
            "bytes_read": sum(a["bytes_read"] for a in r["agents"]),
            "messages": sum(a["messages"] for a in r["agents"]),
            "process_wall_s": r["process_wall_s"],
            "cpu_s": r["cpu_s"],
            "wall_s": r["light_s"],
            "startup_s": r["startup_s"],
            "peak_rss_bytes": r["peak_rss_bytes"],
        }
    finally:
        shutil.rmtree(state, ignore_errors=True)


def floor(work: Path) -> dict[str, Any]:
    """A child that starts up (imports, App.open) and ingests nothing: start-up's cost."""
    state = Path(tempfile.mkdtemp(prefix="floor-state-", dir=work))
    try:
        return spawn(_LIGHT_CHILD, [str(state), "floor"], state)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def spread(values: list[float]) -> dict[str, float]:
    """Median and the min-max range of a figure over the runs."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}
