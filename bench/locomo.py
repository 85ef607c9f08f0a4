"""LoCoMo benchmark: what a night of dreaming keeps of ten long, real-shaped conversations.

    .venv/bin/python bench/locomo.py --quick                  # 2 conversations (seconds)
    .venv/bin/python bench/locomo.py                          # all 10
    .venv/bin/python bench/locomo.py --schedule nightly       # a night after every session
    .venv/bin/python bench/locomo.py --conversations 3 --json
    .venv/bin/python bench/locomo.py --llm NAME --config dreaming.toml   # + an LLM run beside it
    .venv/bin/python bench/locomo.py --keep /tmp/locomo-state            # keep the state folders

Data: LoCoMo (snap-research/LoCoMo, `data/locomo10.json`, CC BY-NC 4.0), read at run time
from `../shared/data/locomo/locomo10.json` beside the project (or `--data`); never copied
into the repository. Without it the benchmark prints why and exits 0 (nothing to measure).

What it does, per conversation (one agent each, named by its `sample_id`, e.g. `conv-26`):

1. Writes one OpenClaw v3 transcript per LoCoMo session into a fresh state folder:
   `agents/<agent>/sessions/<agent>-sNN.jsonl` (a `session` header, then one `message` line
   per turn, the first at the session's date and time, each next one a minute later) and
   `sessions.json` (key `agent:<agent>:main:<sid>`, chatType `direct`). Turn k of a session
   is transcript line k + 2; that map (session file, line) -> `dia_id` translates entry
   evidence back to LoCoMo turn ids. Only the turn's `text` is written: shared images
   (`img_url`, `blip_caption`) are not, as a text transcript would not carry them. Each
   `user` message opens with the block OpenClaw puts before a message from a chat channel,
   naming its sender (`Sender (untrusted metadata):` and a fenced JSON object with `label`,
   `id`, `name`), so the library learns who said it the way it does from OpenClaw.

   Roles (`--roles`). LoCoMo is two people talking; there is no assistant. Default
   `both-user`: both speakers' turns are `user` messages, so both are origin class `owner`,
   the class the library trusts and weights fully - the people the agent listens to. The
   alternative `b-assistant` writes speaker B as the `assistant`; that would score B's words
   at half weight (origin `agent`) and the deterministic consolidator would attribute them
   as "The agent said", i.e. it would mislabel a person as the agent and depress B's facts
   for a reason that has nothing to do with memory quality, so it is not the default (it is
   kept to measure exactly that effect). With `both-user` a session has two senders, so
   the deterministic consolidator names who said each entry ("Caroline: I ..."), and one
   person's "I" never folds into or supersedes the other's ("gold-fact recall" below
   ignores speaker names all the same).
2. Runs one night on all sessions at once: `light`, `rem`, `deep`, each timed on its own
   (`App.run([phase], [agent])`), on the embedded default: default settings, no settings
   file, no LLM, offline. The agent's clock is then the last session's date, so facts from
   months before it are old to the recency score and the `max_age_days` gate. With
   `--schedule nightly` a night runs after each session instead (its transcript is written,
   then light, rem, deep), the way a deployment dreams every night; times are summed.
   With `--llm PROFILE --config FILE`, the same conversations are written to a second
   state folder and run with that settings file and profile (rem and deep use the LLM;
   the LLM decides only candidates that passed deep's gates), and every table shows both
   runs side by side.
3. Measures (after the night, before the purge):
   - QA evidence coverage: LoCoMo questions of categories 1-4 (5, adversarial, has no
     answer in the conversation) whose evidence turns are among the evidence turns of
     MEMORY.md's live entries (the union over all entries: `entry_evidence` rows mapped back
     to `dia_id`s). "any": at least one of the question's evidence turns is; "all": every
     one is. Evidence ids are normalized (`D8:6; D9:17` is two ids, `D:11:26` is `D11:26`,
     `D30:05` is `D30:5`); ids naming no turn are dropped, and a question left with none is
     not counted (reported as `qa_unresolvable`).
   - Gold-fact recall: LoCoMo's per-session observations (facts with the turn they came
     from). An observation is matched by an entry when (a) the entry's evidence includes one
     of the observation's turns, and (b) at least half (`MATCH_CONTAINMENT`) of the
     observation's content words occur in the entry text. Content words: lower-cased
     `\\w+` tokens minus a fixed stopword list, the two speakers' names and digits, with
     plural "s"/"ies" folded; computed here, independent of the library's tokenizer.
     "recall" is (a) and (b); "recall (evidence)" is (a) alone: the entry was built from
     the observation's turn, whatever it says (an upper bound for "recall").
   - Compression: live entries and MEMORY.md characters against turns and transcript
     characters (the turns' text only, not the JSON around it). "framing/entry" (JSON
     `framing`, and `framing_chars` in all): MEMORY.md's characters beyond the statements
     themselves (headings, bullets, key comments, line ends, and the date and speaker the
     deterministic path writes before a statement), per live entry; overall, the sums'
     ratio.
   - Cost: LLM calls (every attempt sent), input and output tokens and USD, from the
     agent's `llm_calls` table (rem and deep); 0 on the embedded default.
   - "match a fact": the share of entries that match at least one gold fact (a precision
     proxy: the rest are small talk, or facts LoCoMo's annotators did not list).
   - Random baseline ("QA any (random)", "recall(ev) (random)", "vs random"): does the
     selector beat chance at the same size? Budget: the characters of the MEMORY.md the
     night wrote for the conversation. Overhead: that file's mean framing per live entry,
     (MEMORY.md characters - sum of the live entries' text lengths) / live entries (30 when
     there are no entries; never below 0). The agent's candidates (every row of its
     `candidates` table, any status), ordered by id, are shuffled with
     `random.Random(seed)` and taken in that order, each costing len(text) + overhead
     characters, until the next one would take the total past the budget. The selection's
     evidence turns are its candidates' `candidate_evidence` rows joined to `corpus_lines`,
     (session_id, line) mapped to `dia_id`s as for entries; from their union, QA evidence
     coverage (any, all) and gold-fact recall (evidence) are computed by the same function
     as for the real entries. `--random-draws` R draws (default 5) use seeds seed ..
     seed + R - 1 (`--seed`, default 0); the tables and the JSON show their mean (the JSON
     also each draw), "QA any (random)" as a share of the QA questions and "recall(ev)
     (random)" of the gold facts. "vs random" is real QA any / mean random QA any ("-" when
     the random mean is 0). Overall: the per-conversation means summed, and the ratio of
     the sums.
   - "small talk": the share of live entries none of whose evidence turns is an evidence
     turn of any QA question (any category, 5 included, unresolvable ids dropped) nor a
     turn of any gold observation (an entry without mapped evidence counts as small talk).
     The JSON lists up to 5 such entry texts per conversation (`small_talk_examples`).
     An entry built from an evidence turn can still be small talk ("Wow, that's awesome!"
     said in the turn that holds the fact), so this figure is a floor.
   - "small talk (labelled)": `bench/locomo_labels.tsv` holds hand labels (memory or
     smalltalk) of a fixed random sample of entries (25 per conversation, seed 21, see
     `bench/locomo_labels.py`); an entry whose statement (date prefix and key comment
     removed, whitespace collapsed, case folded) is a labelled one of its conversation takes
     its label. Reported: the share labelled small talk of the matched entries, and how many
     of tonight's entries matched and how many did not (`labelled` in the JSON).
   - Where gold facts are lost (the funnel): matched; in an entry built from its turn whose
     text does not match; otherwise the stage of the fact's own claim - of the candidates
     its turns fed, the one whose text holds most of the fact's words (a turn also feeds
     candidates for its other sentences, "Wow, that's awesome!", which say nothing about
     the fact): a deep gate it fails (the first, in `_select`'s order: fewer than
     `min_sessions` sessions and no durability cue; clarity (what the statement's text and
     speaker earn, `gates.row_clarity`) below `min_score`; last seen more
     than `max_age_days` before the agent's clock; no owner/agent line - and, listed below
     the funnel, every gate such facts fail); passed the gates but not decided in this run
     (`max_candidates` cap or the MEMORY.md size budget) or decided skip; no candidate
     because its claim repeats a live entry (a recall: counted for that entry, but not its
     evidence); no candidate at all (`claims.extract` found no statement: questions,
     fragments too short or long); no corpus line.
4. Purge check: `App.forget` of the conversation's first session, then every artifact is
   searched for that session's words: MEMORY.md, DREAMS.md and every other file of the
   workspace (corpus files included), the agent's SQLite database dumped with
   `sqlite3 iterdump`, and the raw bytes of every file under `<state>/dreaming/` (database,
   WAL, locks). Needles: each turn's text and each of its sentences and comma clauses,
   whitespace-collapsed and case-folded, at least 20 characters, minus any that also occur
   in a session that was not forgotten (that text may rightly remain). Each needle is also
   looked for in its SQL-quoted and JSON-escaped forms. The same scan runs before the
   purge as a control ("needles seen before": it must find them, in the corpus at least).
   Leaks are counted apart: "files, dump" (what any reader of the state sees) and "raw db
   bytes" (only in the database file's bytes, e.g. the unallocated space of a page, which
   `iterdump` does not show; forget promises purged text is gone from the bytes on disk,
   so these count too). Then `verify()` must pass. A leak of either kind, a failed verify
   or a blind control makes the exit status 1.
5. Timing: wall time of each phase and of the purge, per conversation.

Prints tables, or with --json one JSON document on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _labels
from _common import repo_on_path

REPO = repo_on_path()


# The parts, by concern; the names the tests (and readers of old results) use as
# `locomo.X` stay importable from here.
from _locomo_data import (  # noqa: E402, F401
    DEFAULT_OVERHEAD,
    MATCH_CONTAINMENT,
    QA_CATEGORIES,
    QUICK_CONVERSATIONS,
    RANDOM_DRAWS,
    ROLES,
    SCHEDULES,
    Conversation,
    load,
    write_conversation,
)
from _locomo_match import (  # noqa: E402, F401
    Pick,
    coverage,
    framing,
    random_baseline,
    random_selection,
    small_talk,
)
from _locomo_measure import STAGES, measure  # noqa: E402, F401
from _locomo_purge import ok, purge_check  # noqa: E402
from _locomo_report import overall, render  # noqa: E402

from dreaming import runner  # noqa: E402
from dreaming.app import App  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"

# -- one run --------------------------------------------------------------------------------


@dataclass
class Mode:
    label: str
    state: Path
    config: Path | None
    llm: str | None
    env: dict[str, str]


def night(app: App, agent: str, llm: str | None) -> dict[str, float]:
    times: dict[str, float] = {}
    for phase in ("light", "rem", "deep"):
        t0 = time.perf_counter()
        runner.run(app, [phase], [agent], llm=llm)
        times[phase] = time.perf_counter() - t0
    return times


def run_mode(
    mode: Mode,
    convs: list[Conversation],
    roles: str,
    schedule: str,
    log: Callable[[str], None],
    seed: int = 0,
    draws: int = RANDOM_DRAWS,
    labels: Sequence[_labels.Label] = (),
) -> dict[str, Any]:
    mode.state.mkdir(parents=True, exist_ok=True)
    nightly = schedule == "nightly"
    for conv in convs:
        write_conversation(mode.state, conv, roles, 1 if nightly else None)
    app = App.open(mode.state, mode.config, env=mode.env)
    per: dict[str, Any] = {}
    try:
        for conv in convs:
            times: Counter[str] = Counter()
            for upto in range(1, len(conv.sessions) + 1) if nightly else [None]:
                if upto is not None and upto > 1:
                    write_conversation(mode.state, conv, roles, upto)
                times.update(night(app, conv.agent, mode.llm))
            data = measure(app, conv, seed, draws, labels)
            purge = purge_check(app, conv)
            times["forget"] = purge.pop("seconds")
            data["nights"] = len(conv.sessions) if nightly else 1
            data["times"] = {k: round(v, 3) for k, v in times.items()}
            data["purge"] = purge
            per[conv.agent] = data
            log(
                f"  [{mode.label}] {conv.agent}: {data['entries']} entries, recall "
                f"{data['recall']}/{data['gold']}, QA any {data['qa_any']}/{data['qa']} "
                f"(random {data['random']['qa_any']:g}), "
                f"purge {'ok' if ok(purge) else 'FAILED'} "
                f"({sum(times.values()):.1f}s)"
            )
    finally:
        app.close()
    return {"label": mode.label, "llm": mode.llm, "conversations": per, "overall": overall(per)}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="locomo10.json")
    ap.add_argument("--conversations", type=int, default=None, help="only the first N")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_CONVERSATIONS} conversations")
    ap.add_argument("--roles", choices=ROLES, default="both-user")
    ap.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default="once",
        help="once: one night after all sessions; nightly: a night after each session",
    )
    ap.add_argument("--llm", metavar="PROFILE", help="also run with this [llm.profiles] name")
    ap.add_argument("--config", type=Path, help="settings file for the --llm run")
    ap.add_argument("--keep", type=Path, help="keep the state folders here (must not exist)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--seed", type=int, default=0, help="first seed of the random baseline")
    ap.add_argument(
        "--random-draws",
        type=int,
        default=RANDOM_DRAWS,
        help="random selections per conversation (seeds seed .. seed+N-1); the mean is shown",
    )
    return ap


def _document(
    args: argparse.Namespace,
    convs: Sequence[Conversation],
    labels: Sequence[_labels.Label],
    runs: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "benchmark": "locomo",
        "data": {
            "path": str(args.data),
            "conversations": len(convs),
            "sessions": sum(len(c.sessions) for c in convs),
            "turns": sum(c.turns for c in convs),
            "transcript_chars": sum(c.transcript_chars for c in convs),
        },
        "roles": args.roles,
        "schedule": args.schedule,
        "match_containment": MATCH_CONTAINMENT,
        "qa_categories": list(QA_CATEGORIES),
        "seed": args.seed,
        "random_draws": args.random_draws,
        "labels": len(labels),
        "runs": runs,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    if args.random_draws < 1:
        ap.error("--random-draws must be at least 1")
    if args.llm and args.config is None:
        ap.error("--llm needs --config (the file defining [llm.profiles.PROFILE])")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if not args.data.is_file():
        log(
            f"locomo: {args.data} not found; LoCoMo (CC BY-NC 4.0) is read from ../shared/data "
            "at run time and never copied into the repository. Nothing to measure: skipped."
        )
        return 0
    limit = QUICK_CONVERSATIONS if args.quick else args.conversations
    if args.keep is not None and args.keep.exists():
        ap.error(f"--keep {args.keep}: already exists")
    root = args.keep or Path(tempfile.mkdtemp(prefix="dreaming-locomo-"))
    runs: list[dict[str, Any]] = []
    labels = _labels.load() if _labels.LABELS.is_file() else []
    try:
        convs = load(args.data, limit)
        modes = [Mode("embedded", root / "embedded", None, None, {})]
        if args.llm:
            modes.append(
                Mode(f"llm:{args.llm}", root / "llm", args.config, args.llm, dict(os.environ))
            )
        log(f"locomo: {len(convs)} conversations, state in {root}")
        for mode in modes:
            for conv in convs:  # each run writes its own transcripts and maps
                conv.line_of.clear()
                conv.dia_of.clear()
            runs.append(
                run_mode(
                    mode,
                    convs,
                    args.roles,
                    args.schedule,
                    log,
                    args.seed,
                    args.random_draws,
                    labels,
                )
            )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    doc = _document(args, convs, labels, runs)
    print(json.dumps(doc, indent=1, default=str) if args.json else render(doc))
    failed = any(not ok(r["overall"]["purge"]) for r in runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
