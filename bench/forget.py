"""Forget benchmark: purge time for one session in an agent with 10,000 sessions and 20,000
entries, next to the time of a full light pass over the same data.

    .venv/bin/python bench/forget.py --quick          # 1,000 sessions, 2,000 entries (< 60 s)
    .venv/bin/python bench/forget.py                  # 10,000 sessions, 20,000 entries
    .venv/bin/python bench/forget.py --json           # one JSON document on stdout
    .venv/bin/python bench/forget.py --quick --profile   # + cProfile and SQL timing of a purge

What it does, in one run (agent `main`, everything seeded and deterministic):

1. Transcripts. `--sessions` OpenClaw v3 JSONL files under `<state>/agents/main/sessions/`
   (plus a `sessions.json` of direct Telegram chats), started at random times over six
   weeks. A session is a handful of turns: the owner states facts ("My staging database for
   project Kabeto is called rimazu."), sometimes paraphrased, with the odd question or
   chit-chat; the agent acknowledges, and closes with one sentence of its own. There are
   `ceil(1.15 * entries)` distinct facts, built from generated code names so no two fold
   into one candidate; each is said in 1 to 4 different sessions (mean ~2.45: 5% once, 55%
   twice, 30% three times, 10% four times), so the candidates carry multi-session evidence.
2. Light pass (TIMED, fresh state): `App.run(["light"])` over every file.
3. Entries (untimed). Running the deep phase for 20,000 candidates takes minutes, so the
   entries are made directly with the library's own functions: the `--entries` owner
   candidates with the most sessions (then score) are promoted by `lineage.apply_batch` with
   `Action.ADD` decisions whose text is what the deterministic consolidator writes
   (`The user said: "..."`), so each entry's origins and evidence are its candidate's real
   corpus lines. They are applied over `--nights` deep "runs" (one transaction, one run
   record with a deep summary listing the decisions, then `memory_sync.mark_dirty` +
   `memory_sync.write`), so MEMORY.md ends with `--entries` lines and every night but the
   first leaves a MEMORY.md backup. `--llm-calls` call records (default entries / 10) are
   stored with `llm.calls.record_calls`: each a real `render_prompt` batch of 8 of those
   candidates (their texts and corpus snippets) with 5 earlier entries, and a JSON reply.
   `SELECT count(*) FROM entries` must equal `--entries` (checked; exit status 1 if not).
4. Purges (TIMED). `--repeats` sessions (default 3) whose lines support entries are picked
   at random (seeded); for each, the wall time of `App.forget(main, Selector(sessions=(id,)))`
   as a dry run and then for real, with the report's counts. Each real purge runs on the
   state the previous one left (one session fewer).
5. If the median real purge takes more than 10% of the light pass or more than 5 s (or with
   `--profile`), one more session is purged under cProfile with every SQL statement timed
   (SQLAlchemy cursor events, grouped by statement): the hot spots are reported.

Prints tables (progress on stderr), or with --json one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import HelpFormatter, human, repo_on_path

REPO = repo_on_path()

# The parts, by concern: the synthetic data, the entries built on it, what is measured, and
# the report.
from _forget_data import (  # noqa: E402
    AGENT,
    DEFAULT_ENTRIES,
    DEFAULT_SESSIONS,
    QUICK_ENTRIES,
    QUICK_SESSIONS,
    SLOW_S,
    SLOW_SHARE,
    write_transcripts,
)
from _forget_entries import build_entries  # noqa: E402
from _forget_measure import pick_sessions, profile_purge, purge_once, state_facts  # noqa: E402
from _forget_report import render  # noqa: E402

from dreaming import runner  # noqa: E402
from dreaming.app import App  # noqa: E402
from dreaming.progress import Tick  # noqa: E402


def _tree() -> str:
    """The commit measured, and whether the working tree differed from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "dreaming"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return head + (" (dreaming/ modified)" if dirty else "") if head else "unknown"


# -- main -------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS, help="session files")
    parser.add_argument("--entries", type=int, default=DEFAULT_ENTRIES, help="live entries")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_SESSIONS:,} sessions and {QUICK_ENTRIES:,} entries (< 60 s)",
    )
    parser.add_argument(
        "--llm-calls", type=int, help="llm_calls rows to store (default: entries / 10)"
    )
    parser.add_argument(
        "--nights",
        type=int,
        default=4,
        help="deep runs the entries are spread over "
        "(each after the first leaves a MEMORY.md backup)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="sessions purged and timed")
    parser.add_argument("--seed", type=int, default=11, help="seed of the synthetic data")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--json-out", type=Path, help="also write the JSON document here")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile one extra purge even if purges are fast (it is done anyway when slow)",
    )
    parser.add_argument("--profile-rows", type=int, default=15, help="rows per profile view")
    parser.add_argument(
        "--work-dir",
        type=Path,
        help="build the state here (kept) instead of a temporary folder; must not exist",
    )
    return parser


def _light(app: App, log: Callable[[str], None]) -> tuple[dict[str, Any], float]:
    """The timed full light pass over every file: its summary and its wall time."""
    last = [time.perf_counter()]

    def progress(tick: Tick) -> None:
        now = time.perf_counter()
        if now - last[0] > 15:
            last[0] = now
            log(f"  light: {tick.done:,} of {tick.total:,} sessions")

    log("light pass (timed)")
    t0 = time.perf_counter()
    light = runner.run_light(app, [AGENT], progress=progress)[0]
    light_s = time.perf_counter() - t0
    log(f"  {light_s:.1f} s; {light['corpus_lines']:,} corpus lines")
    return light, light_s


def _purges(
    app: App, picks: list[tuple[str, int]], repeats: int, log: Callable[[str], None]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The first `repeats` picked sessions purged (dry run, then real): rows and problems."""
    purges, problems = [], []
    for sid, supports in picks[:repeats]:
        log(f"purging {sid} (supports {supports} entries)")
        row = purge_once(app, sid, supports)
        log(
            f"  dry {row['dry_s']} s, real {row['real_s']} s, {row['entries_removed']} "
            "entries removed"
        )
        if not row["dry_matches_real"]:
            problems.append(f"{sid}: dry-run counts differ from the real purge's")
        purges.append(row)
    return purges, problems


def _result(purges: list[dict[str, Any]], light: dict[str, Any], light_s: float) -> dict[str, Any]:
    dry = [x["dry_s"] for x in purges]
    real = [x["real_s"] for x in purges]
    result = {
        "light_s": round(light_s, 2),
        "light_summary_s": light["duration_s"],
        "dry_min_s": min(dry),
        "dry_median_s": round(statistics.median(dry), 3),
        "real_min_s": min(real),
        "real_median_s": round(statistics.median(real), 3),
        "ratio_min": min(real) / light_s,
        "ratio_median": statistics.median(real) / light_s,
    }
    med = statistics.median(real)
    result["slow"] = med > SLOW_SHARE * light_s or med > SLOW_S
    return result


def _measure(
    args: argparse.Namespace, state: Path, sessions: int, entries: int, n_calls: int
) -> dict[str, Any]:
    """Everything but the parameters: write, light pass, build, purge, profile, count."""
    log(f"writing {sessions:,} transcripts in {state}")
    t0 = time.perf_counter()
    data = write_transcripts(state, sessions, entries, args.seed)
    data["write_s"] = round(time.perf_counter() - t0, 2)
    log(f"  {data['transcript_lines']:,} lines, {human(data['transcript_bytes'])}")

    # MEMORY.md holds every entry (no capacity budget): the purge is what is measured.
    (state / "dreaming.toml").write_text("[memory]\nmax_chars = 1000000000\n")
    app = App.open(state, env={})
    light, light_s = _light(app, log)

    log(f"building {entries:,} entries over {args.nights} nights, {n_calls:,} call records")
    t0 = time.perf_counter()
    built = build_entries(app, entries, args.nights, n_calls, log)
    built["build_s"] = round(time.perf_counter() - t0, 2)
    facts = state_facts(app)
    problems: list[str] = []
    if facts["entries"] != entries:
        problems.append(f"SELECT count(*) FROM entries = {facts['entries']}, not {entries}")
    if facts["memory_md_blocks"] != entries:
        problems.append(f"MEMORY.md has {facts['memory_md_blocks']} blocks, not {entries}")

    picks = pick_sessions(app, args.repeats + 1, args.seed)
    purges, failed = _purges(app, picks, args.repeats, log)
    problems += failed
    result = _result(purges, light, light_s)
    profile = None
    if (result["slow"] or args.profile) and len(picks) > args.repeats:
        sid, supports = picks[args.repeats]
        log(f"profiling the purge of {sid}")
        profile = profile_purge(app, sid, supports, args.profile_rows)
    t0 = time.perf_counter()
    app.discover()
    result["discover_s"] = round(time.perf_counter() - t0, 3)
    after = state_facts(app)
    app.close()
    return {
        "data": data,
        "light": light,
        "entries": built,
        "state": facts,
        "purges": purges,
        "result": result,
        "state_after": after,
        "profile": profile,
        "problems": problems,
    }


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    sessions = QUICK_SESSIONS if args.quick else args.sessions
    entries = QUICK_ENTRIES if args.quick else args.entries
    n_calls = args.llm_calls if args.llm_calls is not None else entries // 10
    if sessions < 10 or entries < 10 or args.repeats < 1 or args.nights < 1:
        parser.error("--sessions and --entries must be >= 10, --repeats and --nights >= 1")
    started = time.perf_counter()
    tmp = None
    if args.work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="dreaming-bench-forget-")
        work = Path(tmp.name)
    else:
        work = args.work_dir
        work.mkdir(parents=True)
    try:
        measured = _measure(args, work / "state", sessions, entries, n_calls)
    finally:
        if tmp is not None:
            shutil.rmtree(work, ignore_errors=True)
            tmp.cleanup()
    params = {
        "sessions": sessions,
        "entries": entries,
        "llm_calls": n_calls,
        "nights": args.nights,
        "repeats": args.repeats,
        "seed": args.seed,
        "python": sys.version.split()[0],
        "tree": _tree(),
    }
    doc = {"params": params, **measured, "total_s": round(time.perf_counter() - started, 2)}
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
    else:
        print(render(doc))
        print(f"\n(total {doc['total_s']} s)")
    return 1 if measured["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
