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
   candidates with the most sessions (then score) are promoted by `lineage.apply` with
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
import cProfile
import json
import math
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import (
    START,
    HelpFormatter,
    codenames,
    dumps,
    fill_codenames,
    human,
    iso,
    repo_on_path,
)
from _profile import top_functions
from _report import table

REPO = repo_on_path()

from sqlalchemy import Engine, and_, event, func, select, text  # noqa: E402

from dreaming import runner  # noqa: E402
from dreaming.app import App  # noqa: E402
from dreaming.forget import Selector  # noqa: E402
from dreaming.llm import CallOutcome, CallRecord  # noqa: E402
from dreaming.llm.calls import record_calls  # noqa: E402
from dreaming.memory import lineage, memory_file, memory_sync  # noqa: E402
from dreaming.memory.decisions import Action, PromptCandidate, PromptEntry, render_prompt  # noqa: E402
from dreaming.memory.sanitize import sanitize_entry_text  # noqa: E402
from dreaming.phases.deep import DeepPhase, DeepSummary  # noqa: E402
from dreaming.progress import Tick  # noqa: E402
from dreaming.runs import Outcome, finish_run, start_run  # noqa: E402
from dreaming.store.tables import CANDIDATES, ORIGINS  # noqa: E402

AGENT = "main"
DEFAULT_SESSIONS, DEFAULT_ENTRIES = 10_000, 20_000
QUICK_SESSIONS, QUICK_ENTRIES = 1_000, 2_000
FACTS_PER_ENTRY = 1.15  # distinct facts per wanted entry: room for the few that fold
MENTIONS = ((1, 0.05), (2, 0.55), (3, 0.30), (4, 0.10))  # sessions per fact, share
BATCH = 8  # candidates per recorded LLM call, as [deep] batch_size
SLOW_SHARE, SLOW_S = 0.10, 5.0  # a purge slower than this is profiled
SPAN_S = 42 * 86400


# -- the transcripts ------------------------------------------------------------------------

# What the owner says. {S}: the fact's subject code name, {v}/{V}: its value code name.
FACTS = [
    "My staging database for project {S} is called {v}.",
    "I deploy the {S} service from the {v} branch.",
    "My teammate {S} owns the {v} dashboards.",
    "I always run the {S} test suite with the {v} profile.",
    "I prefer reviewing {S} pull requests in the {v} channel.",
    "The {S} repository uses {v} as its release codename.",
    "My manager for the {S} migration is {V}.",
    "Our {S} cluster runs in the {v} region.",
    "The invoices for the {S} account go to {V} in accounting.",
    "My cousin {S} moved to {V} last spring.",
]
QUESTIONS = [
    "Can you check the {S} logs for me?",
    "What did we decide about {S} yesterday?",
    "Could you open the last failing {S} test?",
    "Is the {S} deploy finished?",
]
CHITCHAT = [  # said in many sessions: candidates with wide evidence
    "Thanks, that looks good to me.",
    "Sorry for the delay, I was stuck in a meeting.",
    "Coffee first, then we fix the flaky tests.",
    "Let's keep going with the plan from this morning.",
    "The weather here is terrible today, perfect for coding.",
]
ACKS = ["Noted.", "Got it.", "Okay, noted.", "Understood, thanks.", "Will do."]
CLOSING = "I updated the {S} notes so the {v} details live in one place."


def _paraphrase(fact: str, rng: random.Random) -> str:
    """Rewordings that fold into the same claim (same content words, or one more)."""
    r = rng.random()
    if r < 0.15:
        return "Just so you know, " + fact[0].lower() + fact[1:]
    if r < 0.3:
        return fact.rstrip(".") + ", please remember that."
    return fact


def _session_lines(
    rng: random.Random, session_id: str, statements: list[str], names: Iterator[str]
) -> tuple[list[str], int]:
    """One session's JSONL lines and its last timestamp (ms)."""
    ms = int((START + rng.random() * SPAN_S) * 1000)
    out = [
        dumps(
            {
                "type": "session",
                "version": 3,
                "id": session_id,
                "timestamp": iso(ms),
                "cwd": "/home/dev/projects/bench",
            }
        )
    ]
    parent: str | None = None

    def message(role: str, body: str) -> None:
        nonlocal parent, ms
        ms += rng.randrange(20_000, 600_000)
        line_id = f"{rng.getrandbits(32):08x}"
        msg: dict[str, Any] = {
            "role": role,
            "content": [{"type": "text", "text": body}],
            "timestamp": ms,
        }
        if role == "assistant":
            msg |= {"api": "anthropic-messages", "provider": "anthropic", "stopReason": "stop"}
        out.append(
            dumps(
                {
                    "type": "message",
                    "id": line_id,
                    "parentId": parent,
                    "timestamp": iso(ms),
                    "message": msg,
                }
            )
        )
        parent = line_id

    for fact in statements or ["Let's look at the open tickets today."]:
        parts = []
        if rng.random() < 0.05:
            parts.append(rng.choice(CHITCHAT))
        parts.append(_paraphrase(fact, rng))
        if rng.random() < 0.4:
            parts.append(fill_codenames(rng.choice(QUESTIONS), next(names), ""))
        message("user", " ".join(parts))
        message("assistant", rng.choice(ACKS))
    message("assistant", fill_codenames(CLOSING, next(names), next(names)))
    return out, ms


def write_transcripts(root: Path, sessions: int, entries: int, seed: int) -> dict[str, Any]:
    rng = random.Random(f"{seed}/facts")
    names = iter(codenames(rng))
    n_facts = math.ceil(entries * FACTS_PER_ENTRY)
    per_session: list[list[str]] = [[] for _ in range(sessions)]
    mentions = 0
    counts = [c for c, _ in MENTIONS]
    shares = [w for _, w in MENTIONS]
    for i in range(n_facts):
        fact = fill_codenames(FACTS[i % len(FACTS)], next(names), next(names))
        r = min(rng.choices(counts, shares)[0], sessions)
        for s in rng.sample(range(sessions), r):
            per_session[s].append(fact)
        mentions += r
    folder = root / "agents" / AGENT / "sessions"
    folder.mkdir(parents=True)
    index: dict[str, Any] = {}
    lines = size = 0
    for i, statements in enumerate(per_session):
        srng = random.Random(f"{seed}/session/{i}")
        srng.shuffle(statements)
        session_id = str(uuid.UUID(int=srng.getrandbits(128), version=4))
        body, last_ms = _session_lines(srng, session_id, statements, names)
        path = folder / f"{session_id}.jsonl"
        data = ("\n".join(body) + "\n").encode()
        path.write_bytes(data)
        lines += len(body)
        size += len(data)
        index[f"agent:{AGENT}:telegram:dm:{4000 + i}"] = {
            "sessionId": session_id,
            "sessionFile": str(path),
            "updatedAt": last_ms,
            "chatType": "direct",
            "channel": "telegram",
        }
    (folder / "sessions.json").write_text(json.dumps(index, indent=1), encoding="utf-8")
    return {
        "sessions": sessions,
        "facts": n_facts,
        "fact_mentions": mentions,
        "transcript_lines": lines,
        "transcript_bytes": size,
    }


# -- the entries ----------------------------------------------------------------------------


def _attributed(cand_text: str, owner_lines: int, agent_lines: int) -> str:
    """The deterministic consolidator's entry text (as `phases.deep._attributed`)."""
    speaker = "The user" if owner_lines >= agent_lines else "The agent"
    body = cand_text.strip().strip('"')
    if body and body[-1] not in ".!?。！？":
        body += "."
    return f'{speaker} said: "{body}"'


def build_entries(
    app: App, n_entries: int, nights: int, n_calls: int, log: Callable[[str], None]
) -> dict[str, Any]:
    engine = app.engine(AGENT)
    paths, registry = app.paths, app.registry
    max_chars = app.settings.deep.max_entry_chars
    deep = DeepPhase(engine, paths, registry)  # for its evidence snippets only
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                CANDIDATES.c.id,
                CANDIDATES.c.key,
                CANDIDATES.c.text,
                CANDIDATES.c.sessions,
                CANDIDATES.c.days,
                CANDIDATES.c.owner_lines,
                CANDIDATES.c.agent_lines,
            )
            .where(and_(CANDIDATES.c.agent == AGENT, CANDIDATES.c.owner_lines > 0))
            .order_by(CANDIDATES.c.sessions.desc(), CANDIDATES.c.score.desc(), CANDIDATES.c.id)
        ).all()
        total_candidates = conn.execute(
            select(func.count()).select_from(CANDIDATES).where(CANDIDATES.c.agent == AGENT)
        ).scalar_one()
    chosen = []
    seen_keys: set[str] = set()
    for cid, ckey, ctext, sessions, days, own, agt in rows:
        body = sanitize_entry_text(
            _attributed(ctext, own, agt), max_chars=max_chars, registry=registry
        )
        key = memory_file.entry_key(body) if body else None
        if key is None or key in seen_keys:
            continue
        seen_keys.add(key)
        chosen.append((cid, ckey, ctext, sessions, days, body))
        if len(chosen) == n_entries:
            break
    info: dict[str, Any] = {
        "candidates": total_candidates,
        "owner_candidates": len(rows),
        "entries_wanted": n_entries,
        "entries_from_candidates": len(chosen),
        "multi_session_entries": sum(1 for c in chosen if c[3] >= 2),
    }
    if len(chosen) < n_entries:
        log(f"  only {len(chosen)} owner candidates for {n_entries} entries: raise FACTS_PER_ENTRY")
    files = memory_sync.Files.of(paths, AGENT)
    per_night = math.ceil(len(chosen) / nights)
    calls_per_night = math.ceil(n_calls / nights)
    call_no = 0
    info["night_s"] = []
    for night in range(nights):
        batch = chosen[night * per_night : (night + 1) * per_night]
        if not batch:
            break
        t_night = time.perf_counter()
        run_id = start_run(engine, AGENT, ["deep"], "bench-forget")
        summary = DeepSummary(agent=AGENT)
        summary.selected = len(batch)
        summary.batches = math.ceil(len(batch) / BATCH)
        with engine.begin() as conn:
            for cid, ckey, _ctext, _s, _d, body in batch:
                decision = lineage.Applied(cid, ckey, Action.ADD, (), body, "deterministic")
                key = lineage.apply(conn, AGENT, decision, run_id, prune=False)
                summary.actions["add"] += 1
                summary.paths["deterministic"] += 1
                summary.decisions.append(
                    {
                        "candidate": ckey,
                        "action": "add",
                        "targets": [],
                        "entry": key,
                        "text": body,
                        "path": "deterministic",
                    }
                )
            lineage.prune_orphans(conn, AGENT)
            memory_sync.mark_dirty(conn, AGENT)
            calls = []
            done_before = night * per_night
            for _ in range(min(calls_per_night, n_calls - call_no)):
                start = (call_no * BATCH) % len(chosen)
                group = [chosen[(start + j) % len(chosen)] for j in range(BATCH)]
                shown = [chosen[(start - 1 - j) % len(chosen)] for j in range(5)]
                cands = [
                    PromptCandidate(f"c{j}", c[2], c[3], c[4], deep._snippets(conn, c[0]))
                    for j, c in enumerate(group, 1)
                ]
                entries = [PromptEntry(f"e{j}", c[5]) for j, c in enumerate(shown, 1)]
                system, user = render_prompt(cands, entries, max_chars=max_chars)
                request = json.dumps(
                    [{"role": "system", "content": system}, {"role": "user", "content": user}],
                    ensure_ascii=False,
                )
                reply = json.dumps(
                    {
                        "decisions": [
                            {"candidate": f"c{j}", "action": "add", "targets": [], "text": c[5]}
                            for j, c in enumerate(group, 1)
                        ]
                    },
                    ensure_ascii=False,
                )
                calls.append(
                    CallRecord(
                        model="bench-model",
                        mode="json_schema",
                        attempt=1,
                        outcome=CallOutcome.OK,
                        request=request,
                        response=reply,
                        input_tokens=len(request) // 4,
                        output_tokens=len(reply) // 4,
                        usage_estimated=False,
                        cost_usd=len(request) * 4e-8,
                        duration_s=1.5,
                        started_at=datetime.now(UTC),
                        http_status=200,
                    )
                )
                call_no += 1
            record_calls(conn, AGENT, run_id, calls)
            summary.llm_calls = len(calls)
            summary.input_tokens = sum(c.input_tokens for c in calls)
            summary.output_tokens = sum(c.output_tokens for c in calls)
        report = memory_sync.write(engine, AGENT, files, run_id)
        summary.memory_written = report.written
        with engine.connect() as conn:
            summary.entries = len(lineage.live_entries(conn, AGENT))
        result: dict[str, Any] = {
            "agent": AGENT,
            "job": "bench-forget",
            "phases": {"deep": summary.to_dict()},
            "run_id": run_id,
            "outcome": "ok",
        }
        finish_run(engine, run_id, Outcome.OK, result)
        info["night_s"].append(round(time.perf_counter() - t_night, 2))
        log(
            f"  night {night + 1}/{nights}: {done_before + len(batch)} entries, "
            f"{call_no} LLM call records, {info['night_s'][-1]} s"
        )
    return info


# -- measuring --------------------------------------------------------------------------------


def _scalar(engine: Engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def state_facts(app: App) -> dict[str, Any]:
    engine = app.engine(AGENT)
    db = app.paths.database(AGENT)
    wal = db.with_name(db.name + "-wal")
    memory = app.paths.memory_file(AGENT)
    facts: dict[str, Any] = {
        table: _scalar(engine, f"SELECT count(*) FROM {table}")
        for table in (
            "sessions",
            "corpus_lines",
            "candidates",
            "candidate_evidence",
            "entries",
            "origins",
            "entry_evidence",
            "llm_calls",
            "memory_backups",
            "runs",
        )
    }
    # Managed entries in either form (compact lines or legacy blocks).
    facts["memory_md_blocks"] = len(memory_file.read(memory).blocks)
    facts["memory_md_bytes"] = memory.stat().st_size
    facts["llm_calls_bytes"] = _scalar(
        engine, "SELECT coalesce(sum(length(request) + length(response)), 0) FROM llm_calls"
    )
    facts["backups_bytes"] = _scalar(
        engine, "SELECT coalesce(sum(length(content)), 0) FROM memory_backups"
    )
    facts["db_bytes"] = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return facts


def pick_sessions(app: App, n: int, seed: int) -> list[tuple[str, int]]:
    """(session id, entries it supports) of `n` sessions supporting entries, seeded."""
    with app.engine(AGENT).connect() as conn:
        rows = conn.execute(
            select(ORIGINS.c.session_id, func.count())
            .where(ORIGINS.c.agent == AGENT)
            .group_by(ORIGINS.c.session_id)
            .order_by(ORIGINS.c.session_id)
        ).all()
    return [(s, int(c)) for s, c in random.Random(f"{seed}/pick").sample(rows, min(n, len(rows)))]


def _purge_row(
    sid: str, supports: int, dry_s: float, real: dict[str, Any], real_s: float
) -> dict[str, Any]:
    counts = real["counts"]
    return {
        "session": sid,
        "supports_entries": supports,
        "dry_s": round(dry_s, 3),
        "real_s": round(real_s, 3),
        "entries_removed": len(real["entries_removed"]),
        "mixed_lineage": len(real["mixed_lineage"]),
        "corpus_lines": counts.get("corpus_lines", 0),
        "candidates": counts.get("candidates", 0),
        "candidate_evidence": counts.get("candidate_evidence", 0),
        "origins": counts.get("origins", 0),
        "llm_calls": counts.get("llm_calls", 0),
        "memory_backups": counts.get("memory_backups", 0),
        "run_summaries": counts.get("run_summaries", 0),
        "file_lines_removed": sum(real["file_lines_removed"].values()),
        "counts": counts,
    }


def purge_once(app: App, sid: str, supports: int) -> dict[str, Any]:
    selector = Selector(sessions=(sid,))
    t0 = time.perf_counter()
    dry = runner.forget(app, AGENT, selector, dry_run=True).to_dict()
    dry_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    real = runner.forget(app, AGENT, selector, dry_run=False).to_dict()
    real_s = time.perf_counter() - t0
    row = _purge_row(sid, supports, dry_s, real, real_s)
    row["dry_matches_real"] = dry["counts"] == real["counts"] and (
        dry["entries_removed"] == real["entries_removed"]
    )
    return row


# -- profiling --------------------------------------------------------------------------------

_IN_LIST = re.compile(r"\((?:\?|__\[POSTCOMPILE_\w+\])(?:, \?)+\)")


class SQLTimer:
    """Wall time of every statement the engine runs, grouped by statement text."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.stats: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])

    def _before(self, conn: Any, cursor: Any, stmt: str, params: Any, ctx: Any, many: bool) -> None:
        conn.info.setdefault("bench_t0", []).append(time.perf_counter())

    def _after(self, conn: Any, cursor: Any, stmt: str, params: Any, ctx: Any, many: bool) -> None:
        elapsed = time.perf_counter() - conn.info["bench_t0"].pop()
        key = _IN_LIST.sub("(?, ...)", " ".join(stmt.split()))
        s = self.stats[("executemany " if many else "") + key]
        s[0] += 1
        s[1] += elapsed
        s[2] += len(params) if many and params else 1

    @contextmanager
    def active(self) -> Iterator[None]:
        event.listen(self.engine, "before_cursor_execute", self._before)
        event.listen(self.engine, "after_cursor_execute", self._after)
        try:
            yield
        finally:
            event.remove(self.engine, "before_cursor_execute", self._before)
            event.remove(self.engine, "after_cursor_execute", self._after)

    def top(self, limit: int) -> list[dict[str, Any]]:
        rows = sorted(self.stats.items(), key=lambda kv: -kv[1][1])[:limit]
        return [
            {"calls": int(n), "total_s": round(t, 3), "rows_bound": int(r), "sql": sql[:160]}
            for sql, (n, t, r) in rows
        ]


def profile_purge(app: App, sid: str, supports: int, limit: int) -> dict[str, Any]:
    timer = SQLTimer(app.engine(AGENT))
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    with timer.active():
        prof.enable()
        real = runner.forget(app, AGENT, Selector(sessions=(sid,)), dry_run=False).to_dict()
        prof.disable()
    wall = time.perf_counter() - t0
    row = _purge_row(sid, supports, 0.0, real, wall)
    sql_total = sum(t for _, t, _ in timer.stats.values())
    return {
        "session": sid,
        "wall_s_under_profiler": round(wall, 3),
        "sql_total_s": round(sql_total, 3),
        "sql_statements": int(sum(n for n, _, _ in timer.stats.values())),
        "entries_removed": row["entries_removed"],
        "functions": top_functions(prof, limit, ("cumulative, dreaming/ only", "own time")),
        "sql": timer.top(limit),
    }


# -- output -----------------------------------------------------------------------------------


PURGE_COLUMNS = [
    ("session", "session"),
    ("supports", "supports_entries"),
    ("dry s", "dry_s"),
    ("real s", "real_s"),
    ("entries", "entries_removed"),
    ("mixed", "mixed_lineage"),
    ("lines", "corpus_lines"),
    ("cands", "candidates"),
    ("evid", "candidate_evidence"),
    ("origins", "origins"),
    ("calls", "llm_calls"),
    ("backups", "memory_backups"),
    ("runs", "run_summaries"),
    ("file lines", "file_lines_removed"),
    ("dry=real", "dry_matches_real"),
]


def render(doc: dict[str, Any]) -> str:
    p, d, s, r = doc["params"], doc["data"], doc["state"], doc["result"]
    out = [
        f"forget benchmark: {p['sessions']:,} sessions, {p['entries']:,} entries "
        f"(seed {p['seed']}; tree {p['tree']}, Python {p['python']})",
        "",
        table(
            ["state", "value"],
            [
                ["sessions (files / rows)", f"{d['sessions']:,} / {s['sessions']:,}"],
                ["transcripts", f"{d['transcript_lines']:,} lines, {human(d['transcript_bytes'])}"],
                ["facts (mentions)", f"{d['facts']:,} ({d['fact_mentions']:,})"],
                ["corpus lines", s["corpus_lines"]],
                [
                    "candidates (evidence rows)",
                    f"{s['candidates']:,} ({s['candidate_evidence']:,})",
                ],
                ["entries (MEMORY.md blocks)", f"{s['entries']:,} ({s['memory_md_blocks']:,})"],
                ["  from multi-session candidates", doc["entries"]["multi_session_entries"]],
                ["origins / entry evidence", f"{s['origins']:,} / {s['entry_evidence']:,}"],
                ["llm_calls", f"{s['llm_calls']:,} ({human(s['llm_calls_bytes'])})"],
                ["memory backups", f"{s['memory_backups']:,} ({human(s['backups_bytes'])})"],
                ["MEMORY.md", human(s["memory_md_bytes"])],
                ["database (+WAL)", human(s["db_bytes"])],
            ],
        ),
        "",
        table(
            ["phase", "seconds"],
            [
                ["write transcripts (untimed setup)", d["write_s"]],
                ["FULL LIGHT PASS (fresh state)", r["light_s"]],
                [
                    "build entries, calls, backups (untimed setup; per night: "
                    + ", ".join(str(x) for x in doc["entries"]["night_s"])
                    + ")",
                    doc["entries"]["build_s"],
                ],
            ],
        ),
        "",
        "purges (one session each, in order; dry run first, then the real purge):",
        table(
            [h for h, _ in PURGE_COLUMNS],
            [
                [row["session"][:8], *(row.get(k) for _, k in PURGE_COLUMNS[1:])]
                for row in doc["purges"]
            ],
        ),
        "",
        table(
            ["result", "min", "median"],
            [
                ["dry run, s", r["dry_min_s"], r["dry_median_s"]],
                ["real purge, s", r["real_min_s"], r["real_median_s"]],
                ["real purge / light pass", f"{r['ratio_min']:.2%}", f"{r['ratio_median']:.2%}"],
            ],
        ),
        f"(for scale: one App.discover() over the {p['sessions']:,} files takes "
        f"{r['discover_s']} s)",
        f"light pass {r['light_s']} s; purge median {r['real_median_s']} s "
        f"= {r['ratio_median']:.2%} of it"
        + ("  -> SLOW (> 10% of light or > 5 s)" if r["slow"] else ""),
    ]
    after = doc["state_after"]
    out.append(
        f"after the purges: {after['entries']:,} entries, {after['llm_calls']:,} llm_calls, "
        f"{after['memory_backups']} backups, database {human(after['db_bytes'])}"
    )
    prof = doc.get("profile")
    if prof:
        out += [
            "",
            f"profiled purge of {prof['session']} ({prof['entries_removed']} entries): "
            f"{prof['wall_s_under_profiler']} s under cProfile; SQL "
            f"{prof['sql_total_s']} s in {prof['sql_statements']:,} statements",
        ]
        for view in prof["functions"]:
            out.append(f"  by {view['view']}:")
            out.append(
                table(
                    ["ncalls", "own s", "cum s", "function"],
                    [
                        [x["ncalls"], x["tottime_s"], x["cumtime_s"], x["function"]]
                        for x in view["rows"]
                    ],
                )
            )
        out.append("  SQL by total time (wall time inside cursor.execute):")
        out.append(
            table(
                ["calls", "rows", "total s", "statement"],
                [[x["calls"], x["rows_bound"], x["total_s"], x["sql"]] for x in prof["sql"]],
            )
        )
    if doc["problems"]:
        out += ["", "PROBLEMS:", *(f"  - {x}" for x in doc["problems"])]
    return "\n".join(out)


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


def main(argv: list[str] | None = None) -> int:
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
    args = parser.parse_args(argv)
    sessions = QUICK_SESSIONS if args.quick else args.sessions
    entries = QUICK_ENTRIES if args.quick else args.entries
    n_calls = args.llm_calls if args.llm_calls is not None else entries // 10
    if sessions < 10 or entries < 10 or args.repeats < 1 or args.nights < 1:
        parser.error("--sessions and --entries must be >= 10, --repeats and --nights >= 1")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    started = time.perf_counter()
    tmp = None
    if args.work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="dreaming-bench-forget-")
        work = Path(tmp.name)
    else:
        work = args.work_dir
        work.mkdir(parents=True)
    problems: list[str] = []
    try:
        state = work / "state"
        log(f"writing {sessions:,} transcripts in {state}")
        t0 = time.perf_counter()
        data = write_transcripts(state, sessions, entries, args.seed)
        data["write_s"] = round(time.perf_counter() - t0, 2)
        log(f"  {data['transcript_lines']:,} lines, {human(data['transcript_bytes'])}")

        # MEMORY.md holds every entry (no capacity budget): the purge is what is measured.
        (state / "dreaming.toml").write_text("[memory]\nmax_chars = 1000000000\n")
        app = App.open(state, env={})
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

        log(f"building {entries:,} entries over {args.nights} nights, {n_calls:,} call records")
        t0 = time.perf_counter()
        built = build_entries(app, entries, args.nights, n_calls, log)
        built["build_s"] = round(time.perf_counter() - t0, 2)
        facts = state_facts(app)
        if facts["entries"] != entries:
            problems.append(f"SELECT count(*) FROM entries = {facts['entries']}, not {entries}")
        if facts["memory_md_blocks"] != entries:
            problems.append(f"MEMORY.md has {facts['memory_md_blocks']} blocks, not {entries}")

        picks = pick_sessions(app, args.repeats + 1, args.seed)
        purges = []
        for sid, supports in picks[: args.repeats]:
            log(f"purging {sid} (supports {supports} entries)")
            row = purge_once(app, sid, supports)
            log(
                f"  dry {row['dry_s']} s, real {row['real_s']} s, {row['entries_removed']} "
                "entries removed"
            )
            if not row["dry_matches_real"]:
                problems.append(f"{sid}: dry-run counts differ from the real purge's")
            purges.append(row)
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
    finally:
        if tmp is not None:
            shutil.rmtree(work, ignore_errors=True)
            tmp.cleanup()
    doc = {
        "params": {
            "sessions": sessions,
            "entries": entries,
            "llm_calls": n_calls,
            "nights": args.nights,
            "repeats": args.repeats,
            "seed": args.seed,
            "python": sys.version.split()[0],
            "tree": _tree(),
        },
        "data": data,
        "light": light,
        "entries": built,
        "state": facts,
        "purges": purges,
        "result": result,
        "state_after": after,
        "profile": profile,
        "problems": problems,
        "total_s": round(time.perf_counter() - started, 2),
    }
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
    else:
        print(render(doc))
        print(f"\n(total {doc['total_s']} s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
