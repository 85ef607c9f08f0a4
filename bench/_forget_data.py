"""The forget bench's fixed figures and synthetic transcripts (imported from bench/): sessions
in which the owner states generated facts, each said in 1 to 4 sessions."""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import (
    START,
    codenames,
    dumps,
    fill_codenames,
    iso,
)

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


def write_transcripts(
    root: Path, sessions: int, entries: int, seed: int | str, agent: str = AGENT
) -> dict[str, Any]:
    """`sessions` transcripts of `agent` under `root` (an OpenClaw root), stating facts
    enough for about `entries` entries; also bench/ingest.py's chat-dense set."""
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
    folder = root / "agents" / agent / "sessions"
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
        index[f"agent:{agent}:telegram:dm:{4000 + i}"] = {
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
