"""The deep bench's fixed figures and its state folder (imported from bench/): synthetic facts,
their transcripts over two nights, and the settings that let every candidate through."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import codenames, fill_codenames, iso

from dreaming import runner
from dreaming.app import App
from dreaming.phases.deep import DeepPhase
from tests.fake_openai import DEFAULT_KEY, DEFAULT_MODEL

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
