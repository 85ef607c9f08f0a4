"""The locomo bench's purge check (imported from bench/): forget one session and look for
its words everywhere the agent's state keeps text."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterable, Sequence
from typing import Any

from _locomo_data import (
    MIN_NEEDLE_CHARS,
    RAW,
    Conversation,
    Session,
)

from dreaming import runner
from dreaming.app import App
from dreaming.forget import Selector
from dreaming.verify import verify

_WS = re.compile(r"\s+")
_PIECES = re.compile(r"(?<=[.!?])\s+|[;,]\s+")


def _norm(text: str) -> str:
    return _WS.sub(" ", text).strip().casefold()


def needles(forgotten: Session, kept: Sequence[Session]) -> list[str]:
    """The forgotten session's words that must not survive: turn texts, sentences, clauses."""
    kept_text = "\n".join(_norm(t.text) for s in kept for t in s.turns)
    found: set[str] = set()
    for t in forgotten.turns:
        for piece in [t.text, *_PIECES.split(t.text)]:
            n = _norm(piece).strip(" \"'*_#>`")
            if len(n) >= MIN_NEEDLE_CHARS and n not in kept_text:
                found.add(n)
    return sorted(found)


def _variants(needle: str) -> list[str]:
    forms = {needle, json.dumps(needle)[1:-1], json.dumps(needle, ensure_ascii=False)[1:-1]}
    forms |= {f.replace("'", "''") for f in forms}
    return sorted(forms)


def haystacks(app: App, agent: str) -> Iterable[tuple[str, str]]:
    """(name, text) of every artifact that could hold an agent's words."""
    workspace = app.paths.workspace(agent)
    if workspace.is_dir():
        for p in sorted(workspace.rglob("*")):
            if p.is_file():
                yield (
                    str(p.relative_to(app.paths.state_dir)),
                    p.read_bytes().decode("utf-8", "replace"),
                )
    db = app.paths.database(agent)
    if db.exists():
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            yield f"{db.name} (iterdump)", "\n".join(con.iterdump())
        finally:
            con.close()
    for p in sorted(app.paths.home.rglob("*")):
        if p.is_file() and (p.name.startswith(agent + ".") or p.parent.name != "agents"):
            yield (
                f"{p.relative_to(app.paths.state_dir)}{RAW}",
                p.read_bytes().decode("utf-8", "ignore"),
            )


def scan(app: App, agent: str, wanted: Sequence[str]) -> list[dict[str, str]]:
    """Every (artifact, needle) where a needle occurs. Closes the app's engines first, so the
    database files are read as they are on disk."""
    app.close()
    found: list[dict[str, str]] = []
    for name, text in haystacks(app, agent):
        hay = _norm(text)
        for n in wanted:
            if any(v in hay for v in _variants(n)):
                found.append({"artifact": name, "text": n})
    return found


def purge_check(app: App, conv: Conversation) -> dict[str, Any]:
    forgotten, kept = conv.sessions[0], conv.sessions[1:]
    wanted = needles(forgotten, kept)
    # The control: before the purge the same scan must find the session's words (in the
    # corpus files and the database at least), or finding none afterwards proves nothing.
    before = {hit["text"] for hit in scan(app, conv.agent, wanted)}
    t0 = time.perf_counter()
    selector = Selector(sessions=(forgotten.session_id,))
    report = runner.forget(app, conv.agent, selector, dry_run=False).to_dict()
    seconds = time.perf_counter() - t0
    leaks = scan(app, conv.agent, wanted)
    verdict = verify(app.engine(conv.agent), app.paths, conv.agent)
    return {
        "session": forgotten.session_id,
        "entries_removed": len(report.get("entries_removed", [])),
        "needles": len(wanted),
        "needles_found_before": len(before),
        # Text artifacts and the SQL dump: what any reader of the state sees.
        "leaks": sum(1 for x in leaks if not x["artifact"].endswith(RAW)),
        # Raw file bytes only (free space inside pages): what a disk forensic read sees.
        "leaks_raw_bytes": sum(1 for x in leaks if x["artifact"].endswith(RAW)),
        "leak_examples": leaks[:10],
        "verify_ok": verdict.ok,
        "violations": verdict.violations[:10],
        "seconds": seconds,
    }


def ok(purge: dict[str, Any]) -> bool:
    return bool(
        purge["leaks"] == 0
        and purge["leaks_raw_bytes"] == 0
        and purge["verify_ok"]
        and purge["needles_found_before"] > 0
    )
