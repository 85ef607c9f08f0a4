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
import math
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import HelpFormatter, codenames, fill_codenames, iso, repo_on_path
from _profile import top_functions
from _report import table

repo_on_path()

from dreaming import runner  # noqa: E402
from dreaming.app import App  # noqa: E402
from dreaming.phases.deep import DeepPhase  # noqa: E402
from tests.fake_openai import DEFAULT_KEY, DEFAULT_MODEL, FakeOpenAI, Reply  # noqa: E402

AGENT = "main"
QUICK_CANDIDATES = 200
DEFAULT_CANDIDATES = 1000
DEFAULT_SWEEP = "1,8,16"
SLOW_MS_PER_CANDIDATE = 50.0  # client-side time above this is worth a profile
BASE_DAY = datetime(2026, 2, 2, tzinfo=UTC)
SEED_DAYS = (0, 13)  # night one: days 0-13
MAIN_DAYS = (14, 41)  # night two: days 14-41
RECENT_FROM = 29  # every fact's last mention is on or after this day (<= 13 days old)
STATEMENTS_PER_SESSION = 6
PRICE_IN, PRICE_OUT = 0.15, 0.60  # USD per million tokens, only to show a cost

# -- the facts ------------------------------------------------------------------------------

# (what the owner says, the third-person entry a good model writes). {S}: the subject's
# code name (unique per fact), {v}: a value code name (unique per fact).
DURABLE = [
    (
        "My staging database for project {S} is called {v}.",
        "The user's staging database for project {S} is called {v}.",
    ),
    (
        "I deploy the {S} service from the {v} branch.",
        "The user deploys the {S} service from the {v} branch.",
    ),
    (
        "My teammate {S} owns the {v} dashboards.",
        "The user's teammate {S} owns the {v} dashboards.",
    ),
    (
        "I always run the {S} test suite with the {v} profile.",
        "The user always runs the {S} test suite with the {v} profile.",
    ),
    (
        "I prefer reviewing {S} pull requests in the {v} channel.",
        "The user prefers reviewing {S} pull requests in the {v} channel.",
    ),
    (
        "The {S} repository uses {v} as its release codename.",
        "The user's {S} repository uses {v} as its release codename.",
    ),
    (
        "My manager for the {S} migration is {V}.",
        "The user's manager for the {S} migration is {V}.",
    ),
    (
        "Our {S} cluster runs in the {v} region.",
        "The user's {S} cluster runs in the {v} region.",
    ),
]
EPHEMERAL = [
    "The {S} build was slow this morning because of {v}.",
    "I'm debugging the {S} importer against the {v} fixture today.",
    "The {S} standup moved to the {v} room this time.",
]
EXTENSION = " and the {w} team relies on it"  # merge: said before the final period
REQUESTS = [
    "Can you check the logs for me?",
    "What did we decide yesterday?",
    "Could you open the last failing test?",
    "Is the deploy finished?",
]
ACKS = ["Noted.", "Got it.", "Okay, noted.", "Understood, thanks.", "Will do."]


@dataclass(frozen=True)
class Fact:
    kind: str  # seed | durable | ephemeral | merge | supersede
    subject: str  # lower-case code name, unique per fact (merge/supersede: the seed's)
    said: str  # what the owner says
    entry: str | None  # the third-person text the model writes (None: skip)


def make_facts(n: int, seed: int) -> tuple[list[Fact], list[Fact]]:
    """(seed facts for night one, N facts for night two)."""
    rng = random.Random(seed)
    names = iter(codenames(rng))
    n_seed = max(n // 5, 1)
    n_merge = round(n * 0.03)
    n_supersede = round(n * 0.015)
    n_ephemeral = round(n * 0.10)
    seeds: list[tuple[Fact, int, str]] = []  # fact, template, value
    for i in range(n_seed):
        s, v = next(names), next(names)
        t = i % len(DURABLE)
        seeds.append((Fact("seed", s, fill_codenames(DURABLE[t][0], s, v), None), t, v))
    main: list[Fact] = []
    related = rng.sample(range(n_seed), min(n_merge + n_supersede, n_seed))
    for j, si in enumerate(related):
        old, t, v = seeds[si]
        s = old.subject
        said, entry = fill_codenames(DURABLE[t][0], s, v), fill_codenames(DURABLE[t][1], s, v)
        if j < n_merge:
            ext = EXTENSION.format(w=next(names))
            main.append(Fact("merge", s, said[:-1] + ext + ".", entry[:-1] + ext + "."))
        else:
            v2 = next(names)
            said2 = fill_codenames(DURABLE[t][0], s, v2)
            main.append(
                Fact(
                    "supersede",
                    s,
                    "Heads up, " + said2[0].lower() + said2[1:-1] + " now.",
                    fill_codenames(DURABLE[t][1], s, v2)[:-1] + " now.",
                )
            )
    for i in range(n_ephemeral):
        s, v = next(names), next(names)
        main.append(Fact("ephemeral", s, fill_codenames(EPHEMERAL[i % len(EPHEMERAL)], s, v), None))
    i = 0
    while len(main) < n:
        s, v = next(names), next(names)
        said, entry = DURABLE[i % len(DURABLE)]
        main.append(Fact("durable", s, fill_codenames(said, s, v), fill_codenames(entry, s, v)))
        i += 1
    rng.shuffle(main)
    return [f for f, _, _ in seeds], main


# -- transcripts ----------------------------------------------------------------------------


def write_night(
    state: Path, facts: list[Fact], days: tuple[int, int], rng: random.Random, tag: str
) -> dict[str, int]:
    """Sessions stating every fact in 2 (a quarter: 3) sessions on different days, the
    last on or after day `days[1] - 12`. Returns counts."""
    first, last = days
    recent_from = last - (MAIN_DAYS[1] - RECENT_FROM)
    by_day: dict[int, list[str]] = {}
    for f in facts:
        mentions = 3 if rng.random() < 0.25 else 2
        latest = rng.randint(recent_from, last)
        earlier = rng.sample([d for d in range(first, last + 1) if d != latest], mentions - 1)
        for k, day in enumerate([*earlier, latest]):
            text = f.said if k == 0 or rng.random() < 0.7 else "Reminder: " + f.said
            by_day.setdefault(day, []).append(text)
    folder = state / "agents" / AGENT / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    index_path = folder / "sessions.json"
    index: dict[str, Any] = json.loads(index_path.read_text()) if index_path.exists() else {}
    sessions = lines = size = 0
    for day in sorted(by_day):
        said = by_day[day]
        rng.shuffle(said)
        for start in range(0, len(said), STATEMENTS_PER_SESSION):
            chunk = said[start : start + STATEMENTS_PER_SESSION]
            sid = f"{tag}-d{day:02d}-{start // STATEMENTS_PER_SESSION:03d}"
            ts = BASE_DAY + timedelta(
                days=day, hours=rng.randint(8, 19), minutes=rng.randint(0, 59)
            )
            out = [{"type": "session", "version": 3, "id": sid, "timestamp": iso(ts)}]
            turns: list[tuple[str, str]] = []
            for text in chunk:
                turns += [("user", text), ("assistant", rng.choice(ACKS))]
            turns.insert(rng.randrange(len(turns) + 1), ("user", rng.choice(REQUESTS)))
            parent = None
            for k, (role, text) in enumerate(turns):
                mid = f"{sid}-m{k:03d}"
                out.append(
                    {
                        "type": "message",
                        "id": mid,
                        "parentId": parent,
                        "timestamp": iso(ts + timedelta(minutes=2 * k, seconds=k)),
                        "message": {"role": role, "content": [{"type": "text", "text": text}]},
                    }
                )
                parent = mid
            body = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in out)
            (folder / f"{sid}.jsonl").write_text(body)
            ms = int(ts.timestamp() * 1000)
            index[f"agent:{AGENT}:telegram:default:dm:owner:{sid}"] = {
                "sessionId": sid,
                "updatedAt": ms,
                "sessionStartedAt": ms,
                "channel": "telegram",
                "chatType": "direct",
            }
            sessions += 1
            lines += len(out)
            size += len(body.encode())
    index_path.write_text(json.dumps(index, indent=1))
    return {"sessions": sessions, "lines": lines, "bytes": size}


def write_config(state: Path, *, batch_size: int = 8, base_url: str | None = None) -> Path:
    """The benchmark's settings; with `base_url`, `[deep] llm` names the fake's profile.
    (`runner.run_deep(app, llm=...)` alone is not enough: DeepPhase uses the LLM only when
    `[deep] llm` is set, so an override without it silently runs deterministically.)"""
    path = state / "dreaming.toml"
    path.write_text(
        "# Written by bench/deep.py\n"
        "[deep]\n"
        + ('llm = "bench"\n' if base_url is not None else "")
        + f"batch_size = {batch_size}\n"
        "max_candidates = 100000\n"
        "max_memory_chars = 10000000\n"
        "runaway_skip_batches = 1000000\n"
        "\n[llm.profiles.bench]\n"
        f'base_url = "{base_url or "http://127.0.0.1:9/v1"}"\n'
        f'model = "{DEFAULT_MODEL}"\n'
        f"price_input_per_mtok = {PRICE_IN}\nprice_output_per_mtok = {PRICE_OUT}\n"
        "timeout_s = 30\nmax_attempts = 2\ndeadline_s = 120\n"
    )
    return path


def open_app(state: Path) -> App:
    return App.open(state, state / "dreaming.toml", env={"OPENAI_API_KEY": DEFAULT_KEY})


def eligible(app: App) -> tuple[list[str], int]:
    """(the texts of the candidates the deep phase would select now, candidates pending)."""
    engine = app.engine(AGENT)
    phase = DeepPhase(engine, app.paths, app.registry)
    with engine.connect() as conn:
        selected = [c.text for c in phase._select(conn, AGENT)]
        pending = conn.exec_driver_sql(
            "SELECT count(*) FROM candidates WHERE agent = ? AND status = 'pending'", (AGENT,)
        ).scalar_one()
    return selected, int(pending)


def durable_missing(facts: list[Fact], selected: list[str]) -> list[str]:
    """What the owner said of each durable fact that no selected candidate carries (its code
    name is unique to it, whatever words were said around it)."""
    said = " ".join(selected).casefold()
    return [f.said for f in facts if f.kind == "durable" and f.subject.casefold() not in said]


def build_state(
    state: Path, n: int, seed: int, log: Callable[[str], None]
) -> tuple[dict[str, Any], list[Fact]]:
    """Both nights at `state`; returns the data summary and night two's facts."""
    rng = random.Random(seed + 1)
    seeds, facts = make_facts(n, seed)
    state.mkdir(parents=True)
    write_config(state)
    (state / "workspace").mkdir()
    (state / "workspace" / "MEMORY.md").write_text("# MEMORY.md\n\nOperator notes.\n")
    t0 = time.perf_counter()
    night1 = write_night(state, seeds, SEED_DAYS, rng, "n1")
    app = open_app(state)
    try:
        runner.run_light(app, [AGENT])
        seeded = runner.run_deep(app, [AGENT])[0]  # no profile configured: deterministic
        log(f"  night one: {len(seeds)} seed facts -> {seeded['entries']} entries")
        night2 = write_night(state, facts, MAIN_DAYS, rng, "n2")
        light = runner.run_light(app, [AGENT])[0]
        texts, pending = eligible(app)
    finally:
        app.close()
    kinds = Counter(f.kind for f in facts)
    selected, missing = len(texts), durable_missing(facts, texts)
    slack = max(2, n // 50)
    log(
        f"  night two: {n} facts in {night2['sessions']} sessions -> {selected} eligible "
        f"({pending} pending)"
    )
    data = {
        "facts": n,
        "fact_kinds": dict(sorted(kinds.items())),
        "seed_facts": len(seeds),
        "seed_entries": seeded["entries"],
        "sessions": night1["sessions"] + night2["sessions"],
        "transcript_lines": night1["lines"] + night2["lines"],
        "transcript_bytes": night1["bytes"] + night2["bytes"],
        "light_candidates_new": light.get("candidates_new"),
        "pending": pending,
        "eligible": selected,
        # Every durable fact must pass the gates; an ephemeral remark may already stop at
        # the score gate (salience reads "... today" task talk as passing), which only
        # saves the model a skip; merges and supersedes are allowed `slack` misses.
        "eligible_expected": [n - kinds["ephemeral"] - slack, n + slack],
        "durable_missing": len(missing),
        "durable_missing_examples": missing[:5],
        "eligible_ok": not missing and n - kinds["ephemeral"] - slack <= selected <= n + slack,
        "build_s": round(time.perf_counter() - t0, 2),
    }
    return data, facts


# -- the scripted model --------------------------------------------------------------------

_DATA = re.compile(r"JSON data, not instructions:\n")
_WORD = re.compile(r"[A-Za-z]+")


def prompt_data(request: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(candidates, entries) as the user prompt shows them."""
    text = "\n".join(
        m["content"]
        for m in request["messages"]
        if m["role"] == "user" and isinstance(m["content"], str)
    )
    decoder = json.JSONDecoder()
    blocks = [decoder.raw_decode(text, m.end())[0] for m in _DATA.finditer(text)]
    return blocks[0], (blocks[1] if len(blocks) > 1 else [])


class ScriptedModel:
    """Decides a batch the way a careful model would, knowing what each fact is."""

    def __init__(self, facts: list[Fact]) -> None:
        self.by_subject = {f.subject: f for f in facts}
        self.said = Counter[str]()

    def _fact(self, text: str) -> Fact | None:
        for word in _WORD.findall(text):
            fact = self.by_subject.get(word.lower())
            if fact is not None:
                return fact
        return None

    def __call__(self, request: dict[str, Any]) -> Reply:
        candidates, entries = prompt_data(request)
        decisions = []
        for c in candidates:
            fact = self._fact(c["text"])
            action, targets, text, reason = "skip", [], None, "not a lasting fact"
            if fact is None:
                reason = "not recognised"
            elif fact.entry is not None:
                action, text, reason = "add", fact.entry, "durable fact about the user"
                if fact.kind in ("merge", "supersede"):
                    shown = [
                        e["id"]
                        for e in entries
                        if fact.subject in (w.lower() for w in _WORD.findall(e["text"]))
                    ]
                    if shown:
                        action, targets = fact.kind, shown[:1]
                        reason = "extends e" if fact.kind == "merge" else "replaces e"
            self.said[action] += 1
            decisions.append(
                {
                    "candidate": c["id"],
                    "action": action,
                    "targets": targets,
                    "text": text,
                    "reason": reason,
                }
            )
        return Reply({"decisions": decisions})


class ServerClock:
    """Time the fake spends in the scripted model, and in its whole POST handler."""

    def __init__(self) -> None:
        self.reply_s = 0.0
        self.handler_s = 0.0
        self._lock = threading.Lock()

    def wrap_default(self, fake: FakeOpenAI, model: Callable[[dict[str, Any]], Any]) -> None:
        def timed(request: dict[str, Any]) -> Any:
            t0 = time.perf_counter()
            try:
                return model(request)
            finally:
                with self._lock:
                    self.reply_s += time.perf_counter() - t0

        fake.default = timed

    def wrap_handler(self, fake: FakeOpenAI) -> None:
        httpd = fake._httpd
        assert httpd is not None
        base = httpd.RequestHandlerClass
        clock = self

        class Timed(base):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:  # noqa: N802
                t0 = time.perf_counter()
                try:
                    super().do_POST()
                finally:
                    with clock._lock:
                        clock.handler_s += time.perf_counter() - t0

        httpd.RequestHandlerClass = Timed


# -- one measured run ----------------------------------------------------------------------


def run_once(
    base: Path,
    work: Path,
    facts: list[Fact],
    *,
    batch_size: int,
    use_llm: bool,
    profile: cProfile.Profile | None = None,
) -> dict[str, Any]:
    state = work / f"{'llm' if use_llm else 'det'}-b{batch_size}-{time.monotonic_ns()}"
    shutil.copytree(base, state)
    fake: FakeOpenAI | None = None
    clock = ServerClock()
    model = ScriptedModel(facts)
    try:
        if use_llm:
            fake = FakeOpenAI().start()
            clock.wrap_default(fake, model)
            clock.wrap_handler(fake)
            write_config(state, batch_size=batch_size, base_url=fake.base_url)
        else:
            write_config(state, batch_size=batch_size)
        app = open_app(state)
        try:
            app.engine(AGENT)  # open the database outside the timed call
            if profile is not None:
                profile.enable()
            t0 = time.perf_counter()
            summary = runner.run_deep(app, [AGENT], llm="bench" if use_llm else None)[0]
            wall = time.perf_counter() - t0
            if profile is not None:
                profile.disable()
        finally:
            app.close()
        memory_chars = len((state / "workspace" / "MEMORY.md").read_text())
    finally:
        if fake is not None:
            fake.stop()
        shutil.rmtree(state, ignore_errors=True)
    return _metrics(summary, wall, batch_size, use_llm, fake, clock, model, memory_chars)


def _per(value: float, count: int, digits: int = 2) -> float | None:
    return round(value / count, digits) if count else None


def _metrics(
    summary: dict[str, Any],
    wall: float,
    batch_size: int,
    use_llm: bool,
    fake: FakeOpenAI | None,
    clock: ServerClock,
    model: ScriptedModel,
    memory_chars: int,
) -> dict[str, Any]:
    actions = summary["actions"]
    promoted = sum(actions.get(a, 0) for a in ("add", "merge", "supersede"))
    selected = summary["selected"]
    llm = summary["llm"]
    client_s = wall - clock.reply_s
    out: dict[str, Any] = {
        "path": "llm" if use_llm else "deterministic",
        "batch_size": batch_size,
        "candidates": selected,
        "batches": summary["batches"],
        "expected_batches": math.ceil(selected / batch_size),
        "actions": actions,
        "paths": summary["paths"],
        "fallbacks": len(summary["fallbacks"]),
        "deferred": summary["deferred"],
        "promoted": promoted,
        "entries_after": summary["entries"],
        "memory_chars": memory_chars,
        "wall_s": round(wall, 3),
        "server_reply_s": round(clock.reply_s, 3),
        "wall_ex_server_s": round(client_s, 3),
        "server_handler_s": round(clock.handler_s, 3),
        "phase_duration_s": summary["duration_s"],
        "ms_per_candidate": _per(1000 * client_s, selected),
        "candidates_per_s": round(selected / client_s, 1) if client_s > 0 else None,
        "candidates_per_s_raw": round(selected / wall, 1) if wall > 0 else None,
    }
    if fake is not None:
        agree = (
            llm["calls"] == fake.completions_served
            and llm["input_tokens"] == fake.prompt_tokens
            and llm["output_tokens"] == fake.completion_tokens
        )
        out |= {
            "llm_calls": llm["calls"],
            "input_tokens": llm["input_tokens"],
            "output_tokens": llm["output_tokens"],
            "cost_usd": llm["cost_usd"],
            "fake": {
                "completions_served": fake.completions_served,
                "chat_requests": len(fake.chat_requests),
                "prompt_tokens": fake.prompt_tokens,
                "completion_tokens": fake.completion_tokens,
            },
            "counters_agree": agree,
            "model_said": dict(sorted(model.said.items())),
            "calls_per_promoted": _per(llm["calls"], promoted, 4),
            "input_tokens_per_promoted": _per(llm["input_tokens"], promoted, 1),
            "output_tokens_per_promoted": _per(llm["output_tokens"], promoted, 1),
            "input_tokens_per_call": _per(llm["input_tokens"], llm["calls"], 1),
        }
    return out


# -- output ---------------------------------------------------------------------------------


SWEEP_COLUMNS = [
    ("path", "path"),
    ("batch", "batch_size"),
    ("cands", "candidates"),
    ("batches", "batches"),
    ("calls", "llm_calls"),
    ("expected", "expected_batches"),
    ("in tok", "input_tokens"),
    ("out tok", "output_tokens"),
    ("in/promo", "input_tokens_per_promoted"),
    ("out/promo", "output_tokens_per_promoted"),
    ("wall s", "wall_s"),
    ("ex-srv s", "wall_ex_server_s"),
    ("ms/cand", "ms_per_candidate"),
    ("cand/s", "candidates_per_s"),
    ("agree", "counters_agree"),
]


def render(doc: dict[str, Any]) -> str:
    d, m, det = doc["data"], doc["llm"], doc["deterministic"]
    out = [
        f"deep-phase benchmark ({doc['params']['candidates']} candidates, seed "
        f"{doc['params']['seed']})",
        "",
        f"data: {d['facts']} facts {d['fact_kinds']}, {d['sessions']} sessions, "
        f"{d['transcript_lines']:,} lines, {d['transcript_bytes'] / 1e6:.2f} MB; "
        f"MEMORY.md seeded with {d['seed_entries']} entries; "
        f"eligible {d['eligible']} of {d['pending']} pending "
        f"({'ok' if d['eligible_ok'] else 'NOT {}-{}'.format(*d['eligible_expected'])}); "
        f"built in {d['build_s']} s",
        "",
        f"LLM path, batch size {m['batch_size']}:",
        table(
            ["metric", "value"],
            [
                ["candidates", m["candidates"]],
                ["batches", m["batches"]],
                ["decisions (applied)", json.dumps(m["actions"])],
                ["decisions (model said)", json.dumps(m["model_said"])],
                ["fallbacks / deferred", f"{m['fallbacks']} / {json.dumps(m['deferred'])}"],
                [
                    "LLM calls (summary / fake)",
                    f"{m['llm_calls']} / {m['fake']['completions_served']}",
                ],
                [
                    "input tokens (summary / fake)",
                    f"{m['input_tokens']:,} / {m['fake']['prompt_tokens']:,}",
                ],
                [
                    "output tokens (summary / fake)",
                    f"{m['output_tokens']:,} / {m['fake']['completion_tokens']:,}",
                ],
                ["counters agree", m["counters_agree"]],
                ["cost (fake prices)", f"${m['cost_usd']:.4f}"],
                ["promoted (add+merge+supersede)", m["promoted"]],
                ["calls per promoted", m["calls_per_promoted"]],
                ["input tokens per promoted", m["input_tokens_per_promoted"]],
                ["output tokens per promoted", m["output_tokens_per_promoted"]],
                ["input tokens per call", m["input_tokens_per_call"]],
                ["wall time, raw (s)", m["wall_s"]],
                ["server reply time (s, subtracted)", m["server_reply_s"]],
                ["wall time ex-server (s)", m["wall_ex_server_s"]],
                ["server handler time (s, info)", m["server_handler_s"]],
                ["ms per candidate (ex-server)", m["ms_per_candidate"]],
                [
                    "candidates/s (ex-server / raw)",
                    f"{m['candidates_per_s']} / {m['candidates_per_s_raw']}",
                ],
                [
                    "entries after / MEMORY.md chars",
                    f"{m['entries_after']} / {m['memory_chars']:,}",
                ],
            ],
        ),
        "",
        "batch-size sweep (LLM path), and the deterministic path on the same data; "
        "expected calls = ceil(candidates / batch size):",
        table(
            [header for header, _ in SWEEP_COLUMNS],
            [[r.get(key) for _, key in SWEEP_COLUMNS] for r in [*doc["sweep"], det]],
        ),
        "",
        f"LLM path (batch size {m['batch_size']}) ex-server vs deterministic: "
        f"{m['wall_ex_server_s'] / det['wall_s']:.2f}x the time",
    ]
    for prof in doc.get("profiles", []):
        out += ["", f"cProfile of the {prof['run']} run ({prof['wall_s']} s under the profiler):"]
        for view in prof["views"]:
            out.append(f"  by {view['view']}:")
            out.append(
                table(
                    ["ncalls", "own s", "cum s", "function"],
                    [
                        [r["ncalls"], r["tottime_s"], r["cumtime_s"], r["function"]]
                        for r in view["rows"]
                    ],
                )
            )
    if doc["problems"]:
        out += ["", "PROBLEMS:", *(f"  - {p}" for p in doc["problems"])]
    return "\n".join(out)


# -- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
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
    args = parser.parse_args(argv)
    n = QUICK_CANDIDATES if args.quick else args.candidates
    sweep = [int(b) for b in args.sweep.split(",") if b.strip()]
    if n < 10 or args.batch_size < 1 or any(b < 1 or b > 100 for b in sweep):
        parser.error("--candidates must be >= 10 and batch sizes within 1..100")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    started = time.perf_counter()
    tmp = None
    if args.work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="dreaming-bench-deep-")
        work = Path(tmp.name)
    else:
        work = args.work_dir
        work.mkdir(parents=True)
    try:
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
        profiles = []
        if args.profile:
            for use_llm in (True, False):
                label = "LLM" if use_llm else "deterministic"
                log(f"profiling the {label} run")
                prof = cProfile.Profile()
                t0 = time.perf_counter()
                run_once(
                    base, work, facts, batch_size=args.batch_size, use_llm=use_llm, profile=prof
                )
                profiles.append(
                    {
                        "run": f"{label} (batch size {args.batch_size})",
                        "wall_s": round(time.perf_counter() - t0, 2),
                        "views": top_functions(prof, args.profile_rows),
                    }
                )
    finally:
        if tmp is not None:
            tmp.cleanup()
    main_run = runs[args.batch_size]
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
        "profiles": profiles,
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
