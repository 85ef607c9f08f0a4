"""The deep bench's scripted model and the fake server's clock (imported from bench/)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from _deep_data import (
    Fact,
)

from tests.fake_openai import FakeOpenAI, Reply

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
