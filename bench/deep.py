"""Deep-phase benchmark: LLM-decided promotion of ~1,000 candidates against a loopback fake.

    .venv/bin/python bench/deep.py --quick            # 200 candidates, well under 30 s
    .venv/bin/python bench/deep.py                    # 1,000 candidates
    .venv/bin/python bench/deep.py --candidates 2000 --sweep 1,4,8,16,32 --json
    .venv/bin/python bench/deep.py --profile          # + cProfile of the LLM and baseline runs

What it does, in one run:

1. Builds a state folder (agent `main`) in two nights. Night one: synthetic OpenClaw v3
   transcripts (`agents/main/sessions/<id>.jsonl` plus `sessions.json`, days 0-13) stating
   `candidates // 5` seed facts, then the light phase and a deterministic deep run, so
   MEMORY.md starts with live entries (the model can only merge into, or supersede, entries
   that exist, and at most `max_retire_fraction` of them per run). Night two (days 14-41):
   `--candidates` N new facts, each said by the owner in 2 (a quarter: 3) sessions on
   different days, the last within 13 days of the newest line, so every one passes the
   gates (min 2 sessions, min score). Then the light phase again; the number of pending
   eligible candidates (the deep phase's own selection) is checked against N: every
   durable fact must be eligible, an ephemeral one may already stop at the score gate.
   Fact kinds: ~85.5% durable (the model adds them), 10% ephemeral ("the build was slow
   this morning": the model skips them), 3% extensions of a seed fact (merged into the
   shown entry), 1.5% changed values of a seed fact (superseding the shown entry).
   Facts are built from generated code names, so no two of them fold into one candidate.
2. Copies that state for every measured run and runs `App.run_deep` on the copy:
   the LLM path (profile `bench` on tests/fake_openai.FakeOpenAI, started in-process) at
   each batch size of `--sweep` (default 1, 8, 16; `--batch-size`, default 8, is the
   headline run), and the deterministic consolidator (no LLM) as the baseline.
   The scripted model reads the batch out of the prompt and decides like a careful model:
   `add` with a third-person rewrite, `merge`/`supersede` into the shown entry about the
   same subject, `skip` for passing remarks and anything it does not recognise.
3. Times the `run_deep` call (wall clock). The fake server runs in a thread of this
   process; the time its scripted model spends producing replies (the wrapped
   `fake.default`) is measured and subtracted: "wall ex-server". Nothing else is
   subtracted; the fake's HTTP handling, request validation and JSON encoding around the
   reply are reported separately ("server handler") for information. The LLM numbers are
   taken both from the fake's counters and from the run summary's `llm` section, and must
   agree (a mismatch is reported and makes the exit status 1).

Settings overridden for the benchmark (everything else is default): `[deep]
max_candidates = 100000` (default 200 would cap the run), `max_memory_chars = 10000000`
(default 20,000 would defer most adds), `runaway_skip_batches = 1000000` (with batch size
1, three passing remarks in a row would otherwise stop the run early).

Prints a table, or with --json one JSON document on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import HelpFormatter, repo_on_path
from _profile import top_functions

repo_on_path()

# The parts, by concern: the synthetic state, the scripted model, one measured run, and
# the report.
from _deep_data import (  # noqa: E402
    DEFAULT_CANDIDATES,
    DEFAULT_SWEEP,
    QUICK_CANDIDATES,
    SLOW_MS_PER_CANDIDATE,
    Fact,
    build_state,
)
from _deep_report import render  # noqa: E402
from _deep_run import run_once  # noqa: E402

# -- main -----------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--candidates",
        type=int,
        default=DEFAULT_CANDIDATES,
        help="distinct facts (= eligible candidates) in the second night",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_CANDIDATES} candidates (< 30 s)"
    )
    parser.add_argument(
        "--batch-size", type=int, default=8, help="[deep] batch_size of the headline LLM run"
    )
    parser.add_argument(
        "--sweep",
        default=DEFAULT_SWEEP,
        help="comma-separated batch sizes for the sweep table ('' for none)",
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic data")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also run the headline LLM run and the baseline under cProfile (extra, "
        "untimed runs) and report the hot spots",
    )
    parser.add_argument("--profile-rows", type=int, default=15, help="rows per profile view")
    parser.add_argument(
        "--work-dir",
        type=Path,
        help="build the state here (kept) instead of a temporary folder; must not exist",
    )
    return parser


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _profiles(
    args: argparse.Namespace, base: Path, work: Path, facts: list[Fact]
) -> list[dict[str, Any]]:
    """The headline LLM run and the baseline again, under cProfile (extra, untimed runs)."""
    profiles = []
    for use_llm in (True, False):
        label = "LLM" if use_llm else "deterministic"
        log(f"profiling the {label} run")
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        run_once(base, work, facts, batch_size=args.batch_size, use_llm=use_llm, profile=prof)
        profiles.append(
            {
                "run": f"{label} (batch size {args.batch_size})",
                "wall_s": round(time.perf_counter() - t0, 2),
                "views": top_functions(prof, args.profile_rows),
            }
        )
    return profiles


def _measure(args: argparse.Namespace, work: Path, n: int, sweep: list[int]) -> dict[str, Any]:
    """The state folder, an LLM run per batch size, the deterministic run (and profiles)."""
    base = work / "base"
    log(f"building the state folder ({n} candidates) in {base}")
    data, facts = build_state(base, n, args.seed, log)
    runs: dict[int, dict[str, Any]] = {}
    for b in dict.fromkeys([args.batch_size, *sweep]):
        log(f"LLM run, batch size {b}")
        runs[b] = run_once(base, work, facts, batch_size=b, use_llm=True)
        log(
            f"  {runs[b]['llm_calls']} calls, {runs[b]['wall_s']} s "
            f"({runs[b]['wall_ex_server_s']} s ex-server)"
        )
    log(f"deterministic run, batch size {args.batch_size}")
    det = run_once(base, work, facts, batch_size=args.batch_size, use_llm=False)
    log(f"  {det['wall_s']} s")
    profiles = _profiles(args, base, work, facts) if args.profile else []
    return {"data": data, "runs": runs, "det": det, "profiles": profiles}


def _problems(data: dict[str, Any], runs: dict[int, dict[str, Any]], n: int) -> list[str]:
    problems = []
    if not data["eligible_ok"]:
        low, high = data["eligible_expected"]
        problems.append(
            f"{data['eligible']} eligible candidates, expected {low}-{high} (every durable "
            f"fact, and all but the ephemeral ones within {max(2, n // 50)}); "
            f"{data['durable_missing']} durable facts not eligible, e.g. "
            f"{data['durable_missing_examples']}"
        )
    for r in runs.values():
        if not r["counters_agree"]:
            problems.append(f"batch {r['batch_size']}: summary llm counters != fake counters")
        if r["paths"].get("llm", 0) != r["candidates"]:
            problems.append(
                f"batch {r['batch_size']}: only {r['paths'].get('llm', 0)} of "
                f"{r['candidates']} candidates were decided by the LLM ({r['paths']})"
            )
        if r["llm_calls"] != r["expected_batches"]:
            problems.append(
                f"batch {r['batch_size']}: {r['llm_calls']} calls, expected "
                f"{r['expected_batches']} (re-asks or fallbacks: {r['fallbacks']})"
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    n = QUICK_CANDIDATES if args.quick else args.candidates
    sweep = [int(b) for b in args.sweep.split(",") if b.strip()]
    if n < 10 or args.batch_size < 1 or any(b < 1 or b > 100 for b in sweep):
        parser.error("--candidates must be >= 10 and batch sizes within 1..100")
    started = time.perf_counter()
    tmp = None
    if args.work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="dreaming-bench-deep-")
        work = Path(tmp.name)
    else:
        work = args.work_dir
        work.mkdir(parents=True)
    try:
        measured = _measure(args, work, n, sweep)
    finally:
        if tmp is not None:
            tmp.cleanup()
    data, runs, det = measured["data"], measured["runs"], measured["det"]
    main_run = runs[args.batch_size]
    problems = _problems(data, runs, n)
    slow = (main_run["ms_per_candidate"] or 0) > SLOW_MS_PER_CANDIDATE
    if slow and not args.profile:
        problems.append(
            f"{main_run['ms_per_candidate']} ms per candidate ex-server "
            f"(> {SLOW_MS_PER_CANDIDATE}): rerun with --profile"
        )
    doc = {
        "params": {
            "candidates": n,
            "batch_size": args.batch_size,
            "sweep": sweep,
            "seed": args.seed,
            "python": sys.version.split()[0],
        },
        "data": data,
        "llm": main_run,
        "sweep": [runs[b] for b in sweep],
        "deterministic": det,
        "slow": slow,
        "profiles": measured["profiles"],
        "problems": problems,
        "total_s": round(time.perf_counter() - started, 2),
    }
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(render(doc))
        print(f"\n(total {doc['total_s']} s)")
    bad = ("agree", "eligible", "decided by the LLM")
    return 1 if any(word in p for p in problems for word in bad) else 0


if __name__ == "__main__":
    sys.exit(main())
