"""Admission reads the heads of many sessions at once (`_plan._heads`), half in a forked
child: every session is admitted exactly as when every head is read in this process, and
the heads read beforehand are exactly the ones admission asks for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dreaming.ingest.admission as admission
from dreaming import forking
from dreaming.app import App
from dreaming.messages import SessionFile
from dreaming.phases.light import _plan
from dreaming.phases.light._summary import LightSummary
from tests.openclaw_builder import FakeOpenClaw, block


def _sessions(root: Path, n: int) -> list[SessionFile]:
    """`n` sessions of every kind admission tells apart by its head: group and direct
    chats, cron runs, heartbeats, and sessions that say nothing of themselves; some indexed
    in sessions.json (classified there, no head read)."""
    oc = FakeOpenClaw(root)
    for i in range(n):
        kind = i % 5
        said = "I moved to Leeds last spring with my partner."
        if kind == 0:
            turns = [("user", block("Ann", f"{i}", group=True) + said)]
        elif kind == 1:
            turns = [("user", "hello"), ("assistant", "Hi."), ("user", block("Bo", f"{i}") + said)]
        elif kind == 2:
            turns = [("user", "[cron:nightly digest] summarise the inbox")]
        elif kind == 3:
            turns = [("user", "Read HEARTBEAT.md and reply HEARTBEAT_OK if nothing is due.")]
        else:
            turns = [("user", said), ("assistant", "Noted.")]
        if i % 7 == 0:
            oc.session("main", f"s{i:03d}", turns, key=f"agent:main:telegram:direct:{i}")
        else:
            oc.session("main", f"s{i:03d}", turns)
    app = App.open(root, None, env={})
    try:
        return app.discover(["main"])["main"]
    finally:
        app.close()


def _admitted(files: list[SessionFile], root: Path) -> list[Any]:
    app = App.open(root, None, env={})
    try:
        summary = LightSummary(agent="main")
        planned = _plan.admitted(files, {}, set(), {}, summary, app.settings)
    finally:
        app.close()
    return [(sf, decision, values) for sf, decision, values, _ in planned]


@pytest.mark.skipif(not forking.fork_safe(), reason="reading heads in a child needs a fork")
def test_heads_read_half_in_a_child_admit_every_session_as_read_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _sessions(tmp_path, 80)
    forks: list[int] = []
    real_fork = forking.fork
    monkeypatch.setattr(forking, "fork", lambda: forks.append(1) or real_fork())
    at_once = _admitted(files, tmp_path)
    assert forks, "80 heads are read half in a forked child"
    monkeypatch.setattr(_plan, "HEADS_SPLIT_FROM", 10_000)  # every head read here
    here = _admitted(files, tmp_path)
    assert at_once == here
    kinds = {sf.kind.value for sf, _, _ in at_once}
    chats = {sf.chat_type for sf, _, _ in at_once}
    assert {"cron", "heartbeat", "interactive"} <= kinds and {"group", "direct"} <= chats


def test_the_heads_read_beforehand_are_the_ones_admission_asks_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _sessions(tmp_path, 40)
    asked: list[Path] = []
    real = admission.classify

    def classify(session: SessionFile, *args: Any, **kw: Any) -> SessionFile:
        facts_of = kw["facts_of"]
        kw["facts_of"] = lambda path: asked.append(path) or facts_of(path)
        return real(session, *args, **kw)

    read: list[Path] = []  # the heads read beforehand, all at once

    def split_map(fn: Any, items: list[Path], *, min_items: int) -> list[Any]:
        read.extend(items)
        return [fn(x) for x in items]

    monkeypatch.setattr(admission, "classify", classify)
    monkeypatch.setattr(_plan, "split_map", split_map)
    _admitted(files, tmp_path)
    indexed = {sf.path for sf in files if sf.classified_by is not None}
    assert indexed, "some sessions are classified by sessions.json"
    assert (
        sorted(asked) == sorted(read) == sorted(sf.path for sf in files if sf.path not in indexed)
    )
