"""Ingestion benchmark: the light phase against a bare JSON parse loop, and its peak memory.

    .venv/bin/python bench/ingest.py --quick          # 64 MB smoke test, well under a minute
    .venv/bin/python bench/ingest.py                  # 1 GB (several minutes)
    .venv/bin/python bench/ingest.py --size 200MB --data-dir /tmp/bench-200mb --json

What it does, in one run:

1. Generates a deterministic (seeded) synthetic OpenClaw transcript set of `--size` bytes
   (see bench/_synth.py for its shape) into a temporary folder, or into `--data-dir`, where a
   set with the same parameters is reused instead of regenerated.
2. Reads every file once (OS caches cannot be dropped without root, so both measurements
   run on a warm page cache), then times
   (a) the baseline: open each file in binary, `for line in f: json.loads(line)`;
   (b) the light phase over the same files, in a child process with a fresh state dir
       (`runner.run_light(App.open(state, None, env={}))`; the state dir links to the set's files
       and copies its sessions.json). Reported: wall time of run_light, MB/s, lines/s
       (lines = transcript lines read), and light/baseline throughput (target >= 0.5).
3. Peak RSS of that child (os.wait4's rusage of exactly that child) for the full set and for
   a 1/8 subset (every 8th session file), plus the floor of a child that imports and opens
   the app but ingests nothing; their ratio shows whether memory is flat in input size.
4. Prints a table, or with --json one JSON document on stdout (progress goes to stderr).

Also reported: "readers only", discovery plus TranscriptReader over the full set in a child
(no admission, stripping, claims or SQLite), which splits the light phase's cost into reading
and what it does with the messages.

The children run `sys.executable` with this process's environment, so the library measured is
whatever `import dreaming` finds; to pin one tree (say a commit, while the working tree is
being edited): `git archive HEAD dreaming | tar -x -C /tmp/snap` and run with
`PYTHONPATH=/tmp/snap`. The report names the library folder it measured.

MB means 10**6 bytes throughout. Exit status 0 unless a child process fails (the targets are
reported, not enforced).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import human, log
from _synth import SynthSet, SynthSpec, ensure_set, parse_size

QUICK_SIZE = "64MB"
DEFAULT_SIZE = "1GB"
SUBSET_EVERY = 8
RATIO_TARGET = 0.5
# Full/subset peak RSS at or below this counts as flat (the subset has 1/8 of the input, so
# memory that grew with input would show a ratio near 8).
FLAT_LIMIT = 1.5
MB = 1e6

# Runs in the child. argv: state dir, then "run" (the light phase), "read" (discovery and
# TranscriptReader only, no admission/corpus/claims/SQLite) or "floor" (start-up only).
# Prints one JSON line last.
_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
import dreaming
from dreaming import runner
from dreaming.app import App
app = App.open(Path(sys.argv[1]), None, env={})
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
    "self_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "library": str(Path(dreaming.__file__).parent),
}))
"""


# --------------------------------------------------------------------------- measurements


def warm_cache(paths: list[Path]) -> float:
    """Read every file once so both timed passes see the same (warm) page cache."""
    started = time.perf_counter()
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 22):
                pass
    return time.perf_counter() - started


def baseline(paths: list[Path]) -> dict[str, Any]:
    """The floor any JSONL ingester pays: open, iterate lines, json.loads each."""
    loads = json.loads
    lines = 0
    size = 0
    started = time.perf_counter()
    for p in paths:
        with open(p, "rb") as f:
            for line in f:
                loads(line)
                lines += 1
                size += len(line)
    wall = time.perf_counter() - started
    return {"wall_s": wall, "bytes": size, "lines": lines}


def _link_state(data: SynthSet, state: Path, every: int = 1) -> int:
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


def run_child(state: Path, mode: str) -> dict[str, Any]:
    """Run the light phase (or just the app's startup) in a child; add its peak RSS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMING_")}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(state), mode],
        stdout=subprocess.PIPE,
        env=env,
        cwd=state,  # `-c` puts the cwd first on sys.path: never import from wherever we are
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
        raise SystemExit(f"light phase child failed with exit status {proc.returncode}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    result["process_wall_s"] = wall
    result["peak_rss_bytes"] = usage.ru_maxrss * 1024  # Linux: kilobytes
    return result


def light(data: SynthSet, work: Path, every: int, keep: bool) -> dict[str, Any]:
    """The light phase over (every n-th file of) the set, in a child with a fresh state dir."""
    state = Path(tempfile.mkdtemp(prefix="light-state-", dir=work))
    try:
        input_bytes = _link_state(data, state, every)
        chosen = data.files[::every]
        r = run_child(state, "run")
        agents = r["agents"]
        skips: dict[str, int] = {}
        for a in agents:
            for k, v in a["skips"].items():
                skips[k] = skips.get(k, 0) + v
        out = {
            "files": len(chosen),
            "bytes": input_bytes,
            "lines": sum(f.lines for f in chosen),
            "wall_s": r["light_s"],
            "process_wall_s": r["process_wall_s"],
            "startup_s": r["startup_s"],
            "bytes_read": sum(a["bytes_read"] for a in agents),
            "sessions_read": sum(a["sessions"]["read"] for a in agents),
            "messages": sum(a["messages"] for a in agents),
            "corpus_lines": sum(a["corpus_lines"] for a in agents),
            "candidates_new": sum(a["candidates"]["new"] for a in agents),
            "candidates_pending": sum(a["candidates"]["pending"] for a in agents),
            "recalls": sum(a["recalls"] for a in agents),
            "corpus_files_written": sum(a["corpus_files_written"] for a in agents),
            "skips": skips,
            "peak_rss_bytes": r["peak_rss_bytes"],
            "library": r["library"],
            "state_dir": str(state) if keep else None,
        }
        out.update(_rates(out["wall_s"], out["bytes"], out["lines"]))
        return out
    finally:
        if not keep:
            shutil.rmtree(state, ignore_errors=True)


def readers_only(data: SynthSet, work: Path) -> dict[str, Any]:
    """Discovery + TranscriptReader alone (no admission, stripping, claims or SQLite): how
    much of the light phase's time is reading, the rest being what it does with messages."""
    state = Path(tempfile.mkdtemp(prefix="read-state-", dir=work))
    try:
        input_bytes = _link_state(data, state)
        r = run_child(state, "read")
        out = {
            "files": len(r["agents"]),
            "bytes": input_bytes,
            "lines": sum(a["lines"] for a in r["agents"]),
            "bytes_read": sum(a["bytes_read"] for a in r["agents"]),
            "messages": sum(a["messages"] for a in r["agents"]),
            "wall_s": r["light_s"],
            "peak_rss_bytes": r["peak_rss_bytes"],
        }
        out.update(_rates(out["wall_s"], out["bytes"], out["lines"]))
        return out
    finally:
        shutil.rmtree(state, ignore_errors=True)


def floor_rss(work: Path) -> int:
    """Peak RSS of a child that starts up (imports, App.open) and ingests nothing."""
    state = Path(tempfile.mkdtemp(prefix="floor-state-", dir=work))
    try:
        return int(run_child(state, "floor")["peak_rss_bytes"])
    finally:
        shutil.rmtree(state, ignore_errors=True)


def _rates(wall: float, size: int, lines: int) -> dict[str, float]:
    return {"mb_per_s": size / MB / wall, "lines_per_s": lines / wall}


# --------------------------------------------------------------------------- report


def render(report: dict[str, Any]) -> str:
    d, b, lf, ls, m = (
        report["data"],
        report["baseline"],
        report["light_full"],
        report["light_subset"],
        report["memory"],
    )
    origin = (
        f"generated in {d['generate_s']:.1f} s ({d['total_bytes'] / MB / d['generate_s']:.0f} MB/s)"
        if d["generated"]
        else "reused from an earlier run"
    )
    ok = "OK" if report["ratio_light_baseline"] >= RATIO_TARGET else "BELOW TARGET"
    flat = "flat" if m["flat"] else "NOT flat"
    rows = [
        ("baseline json.loads", b),
        ("light phase (full)", lf),
        (f"light phase (1/{SUBSET_EVERY})", ls),
        ("readers only (full)", report["readers_only"]),
    ]
    out = [
        "dreaming ingest benchmark",
        f"data     {human(d['total_bytes'])} ({d['total_bytes']:,} bytes), {d['total_lines']:,}"
        f" lines, {d['files']} files ({d['agents']} agents x {d['sessions_per_agent']}"
        f" sessions), seed {d['seed']}; {origin}",
        f"         {d['root']}",
        f"library  {report['library']} (Python {report['python']})",
        f"cache    warm for both: every file read once first ({report['warm_s']:.1f} s);"
        " OS caches are not dropped",
        "",
        f"{'':24} {'input':>10} {'wall s':>8} {'MB/s':>8} {'lines/s':>10} {'peak RSS':>10}",
    ]
    for name, r in rows:
        rss = f"{r['peak_rss_bytes'] / MB:.0f} MB" if "peak_rss_bytes" in r else "-"
        out.append(
            f"{name:24} {human(r['bytes']):>10} {r['wall_s']:8.2f} {r['mb_per_s']:8.1f}"
            f" {r['lines_per_s']:10,.0f} {rss:>10}"
        )
    out += [
        "",
        f"ratio light/baseline (MB/s)   {report['ratio_light_baseline']:.2f}"
        f"   (target >= {RATIO_TARGET}: {ok})",
        f"peak RSS full / 1/{SUBSET_EVERY} subset   {m['ratio_full_subset']:.2f}"
        f"   ({m['full_bytes'] / MB:.0f} MB vs {m['subset_bytes'] / MB:.0f} MB for"
        f" {report['input_ratio']:.1f}x the input: {flat})",
        f"floor (python + imports + App.open, no ingest)   {m['floor_bytes'] / MB:.0f} MB;"
        f" above floor: {(m['full_bytes'] - m['floor_bytes']) / MB:.0f} MB vs"
        f" {(m['subset_bytes'] - m['floor_bytes']) / MB:.0f} MB"
        f" (x{m['above_floor_ratio']:.2f})",
        f"light phase (full): {lf['messages']:,} messages, {lf['corpus_lines']:,} corpus lines,"
        f" {lf['candidates_new']:,} candidates, {lf['corpus_files_written']} corpus files;"
        f" child process wall {lf['process_wall_s']:.1f} s (startup {lf['startup_s']:.2f} s)",
    ]
    if lf["skips"]:
        out.append(f"skips: {lf['skips']}")
    for note in report["checks"]:
        out.append(f"CHECK FAILED: {note}")
    return "\n".join(out)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench/ingest.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--size",
        help=f"total transcript bytes, e.g. 200MB, 1GB, 512MiB (default {DEFAULT_SIZE})",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"smoke test: --size {QUICK_SIZE} unless given"
    )
    parser.add_argument("--agents", type=int, default=4, help="agents in the set (default 4)")
    parser.add_argument(
        "--sessions-per-agent", type=int, default=32, help="session files per agent (default 32)"
    )
    parser.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="keep the set here and reuse it when it matches (default: a temp folder, removed"
        " at exit)",
    )
    parser.add_argument(
        "--work-dir", type=Path, help="where the fresh state dirs go (default: system temp)"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="timed baseline passes, best kept (default 1)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temp data set and the light state dirs"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document on stdout, no table"
    )
    args = parser.parse_args(argv)

    size = parse_size(args.size or (QUICK_SIZE if args.quick else DEFAULT_SIZE))
    spec = SynthSpec(
        total_bytes=size,
        agents=args.agents,
        sessions_per_agent=args.sessions_per_agent,
        seed=args.seed,
    )
    temp_data = args.data_dir is None
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="dreaming-bench-data-"))
    work = args.work_dir or Path(tempfile.gettempdir())
    work.mkdir(parents=True, exist_ok=True)
    try:
        log(f"data set: {human(size)} in {root}")
        data = ensure_set(spec, root, log=log)
        paths = [data.root / f.path for f in data.files]
        log("warming the page cache (reading every file once) ...")
        warm_s = warm_cache(paths)

        log("baseline: for line in f: json.loads(line) ...")
        base = min((baseline(paths) for _ in range(max(1, args.repeat))), key=lambda r: r["wall_s"])
        base.update(_rates(base["wall_s"], base["bytes"], base["lines"]))

        log("light phase, full set (child process, fresh state dir) ...")
        full = light(data, work, 1, args.keep)
        log(f"light phase, 1/{SUBSET_EVERY} subset ...")
        sub = light(data, work, SUBSET_EVERY, args.keep)
        log("readers only, full set (child process) ...")
        read = readers_only(data, work)
        log("floor: child that imports and opens the app only ...")
        floor = floor_rss(work)

        checks = []
        if base["bytes"] != data.total_bytes or base["lines"] != data.total_lines:
            checks.append("baseline did not read every byte and line of the set")
        for name, r in (("light (full)", full), ("light (subset)", sub), ("readers", read)):
            if r["bytes_read"] != r["bytes"]:
                checks.append(f"{name} read {r['bytes_read']:,} bytes of {r['bytes']:,}")
        for name, r in (("full", full), ("subset", sub)):
            if r["sessions_read"] != r["files"]:
                checks.append(f"light ({name}) read {r['sessions_read']} of {r['files']} files")
        ratio_rss = full["peak_rss_bytes"] / sub["peak_rss_bytes"]
        report = {
            "data": {
                "root": str(data.root),
                "generated": data.generated,
                "generate_s": data.generate_s,
                "total_bytes": data.total_bytes,
                "total_lines": data.total_lines,
                "files": len(data.files),
                "agents": spec.agents,
                "sessions_per_agent": spec.sessions_per_agent,
                "seed": spec.seed,
            },
            "warm_s": warm_s,
            "cache": "warm for both measurements: every file was read once before timing",
            "baseline": base,
            "light_full": full,
            "light_subset": sub,
            "readers_only": read,
            "library": full["library"],
            "ratio_light_baseline": full["mb_per_s"] / base["mb_per_s"],
            "ratio_target": RATIO_TARGET,
            "input_ratio": full["bytes"] / sub["bytes"],
            "memory": {
                "full_bytes": full["peak_rss_bytes"],
                "subset_bytes": sub["peak_rss_bytes"],
                "floor_bytes": floor,
                "ratio_full_subset": ratio_rss,
                "above_floor_ratio": (full["peak_rss_bytes"] - floor)
                / max(1, sub["peak_rss_bytes"] - floor),
                "flat": ratio_rss <= FLAT_LIMIT,
                "flat_limit": FLAT_LIMIT,
            },
            "python": sys.version.split()[0],
            "checks": checks,
        }
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            print(render(report))
        return 0
    finally:
        if temp_data and not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
