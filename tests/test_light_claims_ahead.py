"""The reading child extracts claims for light while light is the slower half
(dreaming.phases.light._claims_ahead): a claim crosses the pipe whole, the child leaves to
light what light's cache most likely holds, and the night light folds from them is the
night it folds from its own."""

from __future__ import annotations

import functools
import os
import pickle
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dreaming.config import Settings
from dreaming.ingest import claims as claims_mod
from dreaming.memory.memory_file import entry_key
from dreaming.phases.light import _ahead, _claims_ahead
from tests.openclaw_builder import FakeOpenClaw, block
from tests.test_light import light
from tests.test_light_read_ahead import _corpus_files, _tables, _without_timing
from tests.test_light_read_ahead import _night as _read_ahead_night
from tests.test_light_read_ahead_agents import AGENTS, _install

DAY = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def forks(test: Callable[..., None]) -> Callable[..., None]:
    """A test of a night with a reading child."""
    test = pytest.mark.usefixtures("fork_allowed")(test)
    return pytest.mark.skipif(not hasattr(os, "fork"), reason="reading ahead forks")(test)


@pytest.mark.parametrize(
    "text",
    [
        "I always keep the spare key under the blue flower pot.",
        "The build server Node7 runs in the Frankfurt region since May.",
        "My manager for the billing migration is Priya Raman.",
        "僕の名前はボブで、毎朝コーヒーを二杯飲みます。",
    ],
)
def test_a_claim_crosses_a_pipe_with_all_it_worked_out(text: str) -> None:
    (claim,) = claims_mod.extract(text, min_words=3, max_words=60)
    again = pickle.loads(pickle.dumps(claim))
    told = (claim.text, claim.tokens, claim.key, claim.durable_cue, claim.first_person)
    assert (again.text, again.tokens, again.key, again.durable_cue, again.first_person) == told
    assert again == claim and hash(again) == hash(claim)


def test_recent_follows_lights_claim_cache() -> None:
    """`Recent` holds what a least-recently-used cache of the same size holds, over texts
    light extracts itself (misses go in, hits become the most recent); a text whose claims
    were sent never reaches light's cache."""
    hits: list[bool] = []

    @functools.lru_cache(maxsize=3)
    def cached(text: str) -> str:
        hits[-1] = False
        return text

    recent = _claims_ahead.Recent(size=3)
    for text in "a b a c d a b e a c c b d a".split():
        hits.append(True)
        cached(text)
        held = recent.holds(text)
        assert held == hits[-1], text
        if not held:
            recent.add(text)
    assert hits.count(True) >= 3  # the sequence has hits and misses
    recent.holds("d")  # light found it: the most recent
    for sent in "x y z".split():  # sent: light never looks them up
        assert not recent.holds(sent)
    assert recent.holds("d") and recent.holds("a") and recent.holds("b")


def test_claims_are_extracted_only_where_light_would_miss_them() -> None:
    settings = Settings()
    said = "The backup host Vault9 moved to Oslo last week."
    quoting = "The user likes tea. <!-- m:0011223344556677 -->"
    noted = "Noted, Vault9 is in Oslo now."
    recent = _claims_ahead.Recent()
    # Behind light: nothing extracted, but the texts light will extract are followed.
    assert _claims_ahead.claims_of([{"text": noted}], settings, recent, False) is None
    rows = [{"text": t} for t in (said, noted, said, quoting)]
    found = _claims_ahead.claims_of(rows, settings, recent, True)
    assert found is not None
    want = claims_mod.extract(said, min_words=3, max_words=60)
    assert found[0] == tuple(want) and len(found[0]) == 1
    assert found[1] is None  # light extracted it a moment ago: its cache holds it
    assert found[2] == found[0]  # sent, not extracted by light: sent again
    assert found[3] is None  # light takes the quoted block out first


def _night(root: Path) -> Path:
    """The read-ahead tests' night, and a session quoting a MEMORY.md entry back."""
    _read_ahead_night(root)
    quoting = (
        "See: - The user likes tea. <!-- m:0011223344556677 --> "
        "I drink green tea at noon every day."
    )
    turns = [("user", quoting), ("assistant", "Noted: green tea at noon.")]
    FakeOpenClaw(root).session("main", "tea", turns, key="agent:main:main:tea", start=DAY)
    return root


@forks
def test_a_night_folded_from_the_childs_claims_is_the_night_folded_from_lights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extracted: list[str] = []  # in this process only: the child's are its own
    real = claims_mod.extract_cached

    def counted(text: str, *args: Any) -> tuple[claims_mod.Claim, ...]:
        extracted.append(text)
        return real(text, *args)

    def taken_apart() -> int:  # the texts this process extracted, not found in its cache
        return int(claims_mod._extract.cache_info().misses)

    monkeypatch.setattr(claims_mod, "extract_cached", counted)
    monkeypatch.setattr(_ahead, "MB", 10**9)  # no child
    claims_mod._extract.cache_clear()
    here = _night(tmp_path / "here")
    want = _without_timing(light(here))
    in_light = taken_apart()
    claims_mod._extract.cache_clear()
    extracted.clear()
    monkeypatch.setattr(_ahead, "MB", 1)  # a child, which extracts for every read
    monkeypatch.setattr(_claims_ahead, "FROM_HELD", 0)
    ahead = _night(tmp_path / "ahead")
    got = _without_timing(light(ahead))
    assert got == want
    assert _tables(ahead) == _tables(here)
    assert _corpus_files(ahead) == _corpus_files(here)
    # Light took apart only what the child left to it: the line quoting a MEMORY.md entry
    # (light takes the entry out first).
    assert in_light > 50
    assert taken_apart() == 1
    assert any("green tea" in t and "<!--" not in t for t in extracted)


def _recalls(root: Path, agent: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(root / "dreaming" / "agents" / f"{agent}.sqlite") as conn:
        return conn.execute(
            "SELECT entry_key, corpus_line_id, session_id FROM recalls ORDER BY 1, 2"
        ).fetchall()


def _agents_night(root: Path) -> Path:
    """The read-ahead agents tests' three agents, a group chat where two people speak of
    themselves in the second, and a line quoting back an entry of MEMORY.md."""
    _install(root)
    fake = FakeOpenClaw(root)
    said = []
    for n in range(8):
        for name, ident in (("Caroline", "u1"), ("Melanie", "u2")):
            text = f"I moved to Bristol in May and I run the food bank on Tuesday {n}."
            said.append(("user", block(name, ident, group=True) + text))
    fake.session("ops", "family", said, key="agent:ops:telegram:group:7", start=DAY)
    entry = "The user keeps the locker code in the blue notebook."
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "MEMORY.md").write_text(f"# Memory\n\n- {entry} <!--m:{entry_key(entry)[2:]}-->\n")
    quoting = [("user", f"As noted: - {entry} <!--m:{entry_key(entry)[2:]}--> Still true.")]
    fake.session("main", "quoting", quoting * 3, key="agent:main:main:q", start=DAY)
    return root


@forks
def test_a_run_of_agents_and_people_folded_from_the_childs_claims_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ahead, "MB", 10**9)  # no child
    here = _agents_night(tmp_path / "here")
    want = _without_timing(light(here))
    monkeypatch.setattr(_ahead, "MB", 1)  # one child, reading on into the later agents
    monkeypatch.setattr(_claims_ahead, "FROM_HELD", 0)
    sent: list[int] = []
    real = _ahead._received

    def received(job: Any, read: Any, counted: Any, summary: Any) -> Any:
        if read is not None and read.claims is not None:
            sent.append(sum(c is not None for c in read.claims))
        return real(job, read, counted, summary)

    monkeypatch.setattr(_ahead, "_received", received)
    ahead = _agents_night(tmp_path / "ahead")
    assert _without_timing(light(ahead)) == want
    assert sum(sent) > 100
    for agent in AGENTS:
        assert _tables(ahead, agent) == _tables(here, agent)
        assert _recalls(ahead, agent) == _recalls(here, agent)
    speakers = {row[-1] for row in _tables(here, "ops")["corpus_lines"]}
    assert {"Caroline", "Melanie"} <= speakers  # the people's own claims, each held by them
    assert _recalls(here, "main")  # the quoted entry recalled


def test_the_child_counts_as_ahead_only_what_waits_behind_the_result_being_sent() -> None:
    """A big result light is taking is no backlog; the results queued behind it are."""
    r, w = os.pipe()
    outbox = _ahead._Outbox(os.fdopen(w, "wb"))
    sender = threading.Thread(target=outbox.send_all, daemon=True)
    sender.start()
    try:
        big = b"x" * 400_000  # more than the pipe holds: its write waits for the reader
        outbox.put(big)
        deadline = time.monotonic() + 10
        while outbox.holds() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert outbox.holds() == 0  # being sent, nothing behind it
        outbox.put(b"y" * 300_000)
        outbox.put(b"z" * 200_000)
        assert outbox.holds() == 500_000
        outbox.put(None)
        taken = b""
        with os.fdopen(r, "rb") as pipe:
            while chunk := pipe.read(65536):
                taken += chunk
        assert len(taken) == 900_000
    finally:
        sender.join(timeout=10)
    assert outbox.holds() == 0
