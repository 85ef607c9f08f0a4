#!/usr/bin/env python3
"""A night against a large memory, revision against revision: whole processes, wall and CPU.

    .venv/bin/python bench/forget.py --work-dir /tmp/big      # builds the state once (minutes)
    .venv/bin/python bench/bignight.py --state /tmp/big/state --pin 0de8a9a --pin HEAD
    .venv/bin/python bench/bignight.py --state /tmp/big/state --pin HEAD --budget 20000

bench/fleet.py and bench/night.py measure small agents (50 sessions, a few hundred entries).
This measures one agent that has lived long: the state bench/forget.py leaves (10,000
sessions, 20,000 entries, thousands of candidates still waiting), where deep compares each
night's candidates with every held entry. Each run is `dreaming --state-dir COPY run --json`
in a child, on a fresh copy of `--state` (copied with its files' times; light still checks
every transcript's cursor once, the copy's files being new ones), timed from spawn to reap.
`--budget N` sets `[memory] max_chars = N` in the copy first: the night that first puts a
big memory under a budget archives nearly all of it. The revisions take turns, `--rounds`
times; each is reported as the median (min-max) of its rounds, with the ratio to the first.

Each run also reports what the night did (the deep actions, entries held and archived) and a
sha256 over every entry's key, text and status and the MEMORY.md, DREAMS.md and archive it
wrote: revisions whose nights wrote different things are flagged (exit status 1).

Children run from the work folder, not the checkout (Python puts the current folder first on
sys.path, so a child started in the checkout would import the working tree).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fleet_executor import pin_library
from _report import DIFFER, spread

REPO = Path(__file__).resolve().parent.parent
PHASES = ("light", "rem", "deep")


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    state = Path(args.state)
    if not (state / "dreaming").is_dir():
        raise SystemExit(f"--state: {state} holds no dreaming state (build one: see --help)")
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bignight-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    libraries = [(rev, pin_library(rev, work)["path"]) for rev in args.pin]
    if args.tree or not libraries:
        libraries.append(("work tree", str(REPO)))
    runs: dict[str, list[dict[str, Any]]] = {rev: [] for rev, _ in libraries}
    try:
        for round_no in range(1, args.rounds + 1):
            for rev, lib in libraries:
                run = _night(lib, work, state, args.budget)
                runs[rev].append(run)
                print(
                    f"  round {round_no}, {rev}: {run['wall_s']:.1f} s wall,"
                    f" deep {run['phases_s']['deep']:.1f} s",
                    file=sys.stderr,
                )
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    report = _report(runs, [rev for rev, _ in libraries], args)
    print(json.dumps(report, indent=2) if args.json else _table(report))
    return 0 if report["same_output"] else 1


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Build the state first: bench/forget.py --work-dir DIR (then --state DIR/state).",
    )
    p.add_argument("--state", required=True, help="a state folder to copy for each night")
    p.add_argument("--pin", action="append", default=[], help="a git revision (repeatable)")
    p.add_argument("--tree", action="store_true", help="also the working tree (last)")
    p.add_argument("--rounds", type=int, default=2, help="turns each revision takes")
    p.add_argument("--budget", type=int, help="[memory] max_chars for the night")
    p.add_argument("--work-dir", help="copies and snapshots (default: a temp dir, removed)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def _night(lib: str, work: Path, state: Path, budget: int | None) -> dict[str, Any]:
    """One night on a fresh copy of `state`, in a child importing `lib`."""
    copy = Path(tempfile.mkdtemp(prefix="night-", dir=work)) / "state"
    shutil.copytree(state, copy, symlinks=True)
    if budget is not None:
        (copy / "dreaming.toml").write_text(f"[memory]\nmax_chars = {budget}\n")
    env = {**os.environ, "PYTHONPATH": lib}
    env.pop("DREAMING_STATE_DIR", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dreaming", "--state-dir", str(copy), "run", "--json"],
            cwd=work,  # not the checkout: see the module's docstring
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"the night failed under {lib}:\n{done.stderr[-3000:]}")
        night = json.loads(done.stdout)["agents"]
        (agent, phases), *_ = night.items()
        return {
            "wall_s": wall,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "peak_rss_mb": after.ru_maxrss / 1024,
            "phases_s": {p: float(phases[p]["duration_s"]) for p in PHASES if p in phases},
            "actions": phases.get("deep", {}).get("actions", {}),
            "entries": phases.get("deep", {}).get("entries"),
            "archived": phases.get("deep", {}).get("archived"),
            "fingerprint": _fingerprint(copy, agent),
        }
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)


def _fingerprint(state: Path, agent: str) -> str:
    """What the night left: every entry's key, text and status, and the memory files."""
    digest = hashlib.sha256()
    db = sqlite3.connect(state / "dreaming" / "agents" / f"{agent}.sqlite")
    try:
        for row in db.execute("SELECT key, text, status FROM entries ORDER BY key"):
            digest.update("\0".join(map(str, row)).encode() + b"\n")
    finally:
        db.close()
    for path in sorted(state.glob("workspace*/**/*.md")):
        if ".dreams" not in path.parts:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def _report(
    runs: dict[str, list[dict[str, Any]]], order: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    rows = []
    base: float | None = None
    for rev in order:
        each = runs[rev]
        row: dict[str, Any] = {"revision": rev}
        for key, values in (
            ("wall_s", [r["wall_s"] for r in each]),
            ("cpu_s", [r["cpu_s"] for r in each]),
            *((f"{p}_s", [r["phases_s"].get(p, 0.0) for r in each]) for p in PHASES),
        ):
            row[key] = spread(values)
        wall = row["wall_s"]["median"]
        base = wall if base is None else base
        row["ratio"] = round(wall / base, 3) if base else None
        row["peak_rss_mb"] = round(max(r["peak_rss_mb"] for r in each))
        first = each[0]
        row["did"] = {k: first[k] for k in ("actions", "entries", "archived")}
        row["fingerprints"] = sorted({r["fingerprint"] for r in each})
        rows.append(row)
    prints = {fp for row in rows for fp in row["fingerprints"]}
    return {
        "state": str(args.state),
        "budget": args.budget,
        "rounds": args.rounds,
        "revisions": rows,
        "same_output": len(prints) == 1,
    }


def _table(report: dict[str, Any]) -> str:
    head = f"{'revision':<12} {'wall s (min-max)':>20} {'ratio':>6} {'CPU s':>7}"
    head += "".join(f" {p:>6}" for p in PHASES) + f" {'RSS MB':>7}  output"
    lines = [head, "-" * len(head)]
    for row in report["revisions"]:
        w = row["wall_s"]
        line = f"{row['revision']:<12} {w['median']:>8.2f} ({w['min']:.2f}-{w['max']:.2f})"
        line = f"{line:<33} {row['ratio']:>6.3f} {row['cpu_s']['median']:>7.2f}"
        line += "".join(f" {row[f'{p}_s']['median']:>6.2f}" for p in PHASES)
        did = row["did"]
        line += (
            f" {row['peak_rss_mb']:>7}  {did['actions']}, {did['entries']} in MEMORY.md,"
            f" {did['archived']} archived, {'/'.join(row['fingerprints'])}"
        )
        lines.append(line)
    lines.append("")
    budget = f"[memory] max_chars = {report['budget']}" if report["budget"] else "its own settings"
    lines.append(
        f"one night (`dreaming run`) on a fresh copy of {report['state']} under {budget};"
        f" whole processes, medians of {report['rounds']} round(s) taken in turns; light/rem/"
        "deep: the seconds each phase's summary records"
    )
    if not report["same_output"]:
        lines.append(DIFFER)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
