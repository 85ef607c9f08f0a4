"""Shared set-up for deep-phase tests: a demo state folder, an LLM profile on the fake server,
and scripted model replies that read the candidate ids out of the prompt."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dreaming import demo
from dreaming.app import App
from tests import backends
from tests.fake_openai import DEFAULT_KEY, DEFAULT_MODEL, FakeOpenAI, Reply

CANDIDATE_ID = re.compile(r'"id":\s*"(c\d+)"')
ENTRY_ID = re.compile(r'"id":\s*"(e\d+)"')


def build_state(root: Path, *, base_url: str | None = None, extra: str = "") -> Path:
    demo.build(root)
    config = (root / "dreaming.toml").read_text()
    if base_url is not None:
        config += (
            '\n[deep]\nllm = "test"\n'
            "[llm.profiles.test]\n"
            f'base_url = "{base_url}"\nmodel = "{DEFAULT_MODEL}"\n'
            "price_input_per_mtok = 1.0\nprice_output_per_mtok = 2.0\n"
            "max_attempts = 2\ndeadline_s = 5\ntimeout_s = 5\n"
        )
    (root / "dreaming.toml").write_text(config + extra)
    backends.CURRENT.configure(root)
    return root


def open_app(root: Path) -> App:
    return App.open(root, root / "dreaming.toml", env={"OPENAI_API_KEY": DEFAULT_KEY})


def user_prompt(request: dict[str, Any]) -> str:
    return "\n".join(
        m["content"]
        for m in request["messages"]
        if m["role"] == "user" and isinstance(m["content"], str)
    )


def ids_in(request: dict[str, Any]) -> tuple[list[str], list[str]]:
    text = user_prompt(request)
    return list(dict.fromkeys(CANDIDATE_ID.findall(text))), list(
        dict.fromkeys(ENTRY_ID.findall(text))
    )


def candidate_texts(request: dict[str, Any]) -> dict[str, str]:
    """c-id -> candidate text, from the JSON the prompt carries."""
    text = user_prompt(request)
    out: dict[str, str] = {}
    for m in re.finditer(r'\{[^{}]*"id":\s*"(c\d+)"[^{}]*?"text":\s*"((?:[^"\\]|\\.)*)"', text):
        out[m.group(1)] = json.loads('"' + m.group(2) + '"')
    return out


def _schema_name(request: dict[str, Any]) -> str | None:
    fmt = request.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("name")


def decide_all(action: str = "add") -> Callable[[dict[str, Any]], Reply]:
    """A model that decides `action` for every candidate, writing its text in third person."""

    def reply(request: dict[str, Any]) -> Reply:
        if _schema_name(request) == "dream_diary":  # REM asks for its diary: one plain entry
            return Reply({"entry": "A night of recurring themes."})
        cids, _ = ids_in(request)
        texts = candidate_texts(request)
        decisions = []
        for cid in cids:
            if action == "skip":
                decisions.append(
                    {
                        "candidate": cid,
                        "action": "skip",
                        "targets": [],
                        "text": None,
                        "reason": "small talk",
                    }
                )
            else:
                body = texts.get(cid, cid)
                decisions.append(
                    {
                        "candidate": cid,
                        "action": action,
                        "targets": [],
                        "reason": "durable",
                        "text": "The user said: " + body.rstrip(".") + ".",
                    }
                )
        return Reply({"decisions": decisions})

    return reply


def tree_hash(root: Path) -> dict[str, str]:
    """Every file's hash; databases by their logical content (a WAL checkpoint rewrites
    pages without changing a row) and lock files not at all (they name the last holder)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.suffix == ".lock" or p.name.endswith(("-wal", "-shm")):
            continue
        if p.suffix == ".sqlite":
            conn = sqlite3.connect(p)
            try:
                dump = "\n".join(conn.iterdump())
            finally:
                conn.close()
            out[str(p.relative_to(root))] = hashlib.sha256(dump.encode()).hexdigest()
        else:
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    # A fleet's state is in PostgreSQL, not under the state folder: hash it with the folder.
    shared = backends.CURRENT.dump_hash() if (root / "dreaming").is_dir() else None
    if shared is not None:
        out["<database>"] = shared
    return out


def fake_with(default: Callable[[dict[str, Any]], Any]) -> FakeOpenAI:
    fake = FakeOpenAI()
    fake.default = default
    return fake.start()
