"""Light assesses its new candidates ahead in a forked child when it is the slower half
(dreaming.phases.light._assess_ahead): the child's answers are `assess`'s, a child that
fails or was given another lexicon answers nothing and the rescore assesses by itself,
sending never waits for the child, and the night is the night without it."""

from __future__ import annotations

import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from dreaming.ingest import salience
from dreaming.phases.light import _ahead, _assess_ahead
from dreaming.phases.light import _phase as light_phase
from tests.openclaw_builder import FakeOpenClaw, append
from tests.test_light import light
from tests.test_light_read_ahead import DAY, _corpus_files, _night, _tables, _without_timing

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="assessing ahead forks"),
    pytest.mark.usefixtures("fork_allowed"),
]

TEXTS = [
    "My manager for the billing migration is Priya Raman.",
    "Always deploy the Node3 service from the release branch.",
    "Thanks, that looks good to me!",
    "I love hiking in the Alps every summer.",
    "It is called Dorado.",
    "USER.mdも僕の承認のみ変更。",
    "The invoices for the Vadifo account go to Zevune in accounting.",
    "My manager for the billing migration is Priya Raman.",  # said twice: answered twice
]


def _want(texts: list[str], lexicon: salience.Lexicon) -> dict[str, tuple[float, str]]:
    found = {t: salience.assess(t, lexicon) for t in texts}
    return {t: (a.value, a.names()) for t, a in found.items()}


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_child_answers_each_text_as_assess_does_and_is_reaped() -> None:
    lexicon = salience.default_lexicon()
    child = _assess_ahead.AssessAhead(lexicon)
    pid = child._pid
    assert pid is not None
    child.send(TEXTS[:3])
    child.send([])
    child.send(TEXTS[3:])
    found = child.answers(lexicon)
    assert found == _want(TEXTS, lexicon)
    assert child._sock is None and _gone(pid)
    assert child.answers(lexicon) == {}  # asked again: it is gone


def test_a_child_given_another_lexicon_answers_nothing() -> None:
    child = _assess_ahead.AssessAhead(salience.default_lexicon())
    child.send(TEXTS)
    assert child.answers(salience.Lexicon.build({"fact": ["zorbled"]})) == {}
    assert child._sock is None


def test_a_child_that_died_answers_nothing_and_sending_to_it_raises_nothing() -> None:
    lexicon = salience.default_lexicon()
    child = _assess_ahead.AssessAhead(lexicon)
    child.send(TEXTS)
    assert child._pid is not None
    os.kill(child._pid, signal.SIGKILL)
    os.waitpid(child._pid, 0)
    child._pid = None  # reaped here already
    for _ in range(3):
        child.send(["Our cluster runs in the eu-west region."] * 2000)
    assert child.answers(lexicon) == {}


def test_sending_never_waits_for_a_child_that_does_not_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stopped child: what does not fit in the socket's buffers waits here; once it runs
    again, it answers what it took, and the texts it never began go back to the rescore."""
    # Small buffers: the child then has a few thousand texts to assess, not the 70,000 the
    # real ones hold (12 s of the suite); what is tested does not depend on their size.
    monkeypatch.setattr(_assess_ahead, "_BUFFER", 64 << 10)
    lexicon = salience.default_lexicon()
    child = _assess_ahead.AssessAhead(lexicon)
    assert child._pid is not None and child._sock is not None
    # More than the buffers between the two hold, whatever this kernel makes of them.
    held = sum(
        child._sock.getsockopt(socket.SOL_SOCKET, opt)
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF)
    )
    texts: list[str] = []

    def send(n: int) -> None:
        batch = [f"The staging host Box{k} is in rack {k} at Leeds." for k in range(n, n + 5000)]
        texts.extend(batch)
        child.send(batch)

    def send_all() -> None:
        while len(child._queued) < 3 and len(texts) * 60 < 4 * held + 1_000_000:
            send(len(texts))

    os.kill(child._pid, signal.SIGSTOP)
    try:
        sender = threading.Thread(target=send_all)
        sender.start()
        sender.join(timeout=20)
        assert not sender.is_alive(), "send waited for a child that does not read"
        assert len(child._queued) == 3, "more than the buffers hold was sent: some waits here"
    finally:
        os.kill(child._pid, signal.SIGCONT)
    # The first frame waiting may be partly sent (the child gets it whole); the others not.
    never_begun = sum(count for _, count in list(child._queued)[1 if child._sent else 0 :])
    assert never_begun >= 5000
    kept = texts[: len(texts) - never_begun]
    found = child.answers(lexicon)
    assert set(found) == set(kept)
    assert found[texts[7]] == _want([texts[7]], lexicon)[texts[7]]


def test_a_lagging_child_is_handed_no_more_than_max_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_assess_ahead, "MAX_HELD", 1)
    monkeypatch.setattr(_assess_ahead, "_BUFFER", 64 << 10)  # fewer texts for the child
    lexicon = salience.default_lexicon()
    child = _assess_ahead.AssessAhead(lexicon)
    assert child._pid is not None
    os.kill(child._pid, signal.SIGSTOP)
    try:
        for n in range(0, 400_000, 5000):
            child.send([f"The build host Node{k} sits in Oslo." for k in range(n, n + 5000)])
            if child._queued:
                break
        handed = len(child._texts)
        child.send(["The backup host Vault9 moved to Oslo."])  # held back: not handed over
        assert len(child._texts) == handed
    finally:
        os.kill(child._pid, signal.SIGCONT)
    assert "The backup host Vault9 moved to Oslo." not in child.answers(lexicon)


# ----------------------------------------------------------------------- the night itself


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The texts each assessing child of a night was sent (one list a child)."""
    sent: list[list[str]] = []
    real_init, real_send = _assess_ahead.AssessAhead.__init__, _assess_ahead.AssessAhead.send

    def init(self: _assess_ahead.AssessAhead, lexicon: salience.Lexicon) -> None:
        real_init(self, lexicon)
        sent.append([])

    def send(self: _assess_ahead.AssessAhead, texts: Any) -> None:
        sent[-1].extend(texts)
        real_send(self, texts)

    monkeypatch.setattr(_assess_ahead.AssessAhead, "__init__", init)
    monkeypatch.setattr(_assess_ahead.AssessAhead, "send", send)
    return sent


@pytest.fixture
def assessed_here(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many texts the rescore assessed itself, per night."""
    counts: list[int] = []
    real = _signals().split_map

    def split(fn: Any, items: Any, *, min_items: int) -> Any:
        counts.append(len(items))
        return real(fn, items, min_items=min_items)

    monkeypatch.setattr(_signals(), "split_map", split)
    return counts


def _signals() -> Any:
    import dreaming.ingest.candidates._signals as signals

    return signals


def _many_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dreaming.phases.light._commit.BATCH_ROWS", 40)


def test_a_night_assessed_ahead_is_the_night_assessed_at_the_rescore(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    children: list[list[str]],
    assessed_here: list[int],
) -> None:
    """Read here (the next read always ready): a child from the first batch on."""
    _many_batches(monkeypatch)
    monkeypatch.setattr(light_phase, "START_FROM", 10**9)  # never started
    here = _night(tmp_path / "here")
    want = _without_timing(light(here))
    assert children == []
    monkeypatch.setattr(light_phase, "START_FROM", 1)
    ahead = _night(tmp_path / "ahead")
    got = _without_timing(light(ahead))
    assert len(children) == 1 and len(children[0]) >= 10
    assert got == want
    assert _tables(ahead) == _tables(here)
    assert _corpus_files(ahead) == _corpus_files(here)
    # The rescore assessed only what the child was not given.
    assessed = sum(c[-1] is not None for c in _tables(here)["candidates"])
    assert assessed_here == [assessed, assessed - len(set(children[0]))]


def test_a_night_read_and_assessed_ahead_is_the_night_done_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, children: list[list[str]]
) -> None:
    """Both children at once: the reading child's results and the assessing child's
    answers change nothing (whether a batch's texts go depends on the reads' timing)."""
    _many_batches(monkeypatch)
    monkeypatch.setattr(light_phase, "START_FROM", 10**9)
    here = _night(tmp_path / "here")
    want = _without_timing(light(here))
    monkeypatch.setattr(_ahead, "MB", 1)  # read ahead, as a backlog night does
    monkeypatch.setattr(light_phase, "EARLY_COMMIT_ROWS", 1)
    monkeypatch.setattr(light_phase, "START_FROM", 1)
    ahead = _night(tmp_path / "ahead")
    got = _without_timing(light(ahead))
    assert len(children) <= 1
    assert got == want
    assert _tables(ahead) == _tables(here)
    assert _corpus_files(ahead) == _corpus_files(here)


@pytest.mark.parametrize("when", ["mid-night", "before answering"])
def test_a_child_killed_leaves_the_night_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, children: list[list[str]], when: str
) -> None:
    _many_batches(monkeypatch)
    monkeypatch.setattr(light_phase, "START_FROM", 10**9)
    here = _night(tmp_path / "here")
    want = _without_timing(light(here))
    monkeypatch.setattr(light_phase, "START_FROM", 1)
    killed: list[int] = []
    real_send, real_answers = _assess_ahead.AssessAhead.send, _assess_ahead.AssessAhead.answers

    def kill(child: _assess_ahead.AssessAhead) -> None:
        if child._pid is not None and not killed:
            os.kill(child._pid, signal.SIGKILL)
            killed.append(child._pid)

    def send_then_die(self: _assess_ahead.AssessAhead, texts: Any) -> None:
        real_send(self, texts)
        kill(self)

    def die_then_answer(self: _assess_ahead.AssessAhead, lexicon: salience.Lexicon) -> Any:
        kill(self)
        return real_answers(self, lexicon)

    if when == "mid-night":
        monkeypatch.setattr(_assess_ahead.AssessAhead, "send", send_then_die)
    else:
        monkeypatch.setattr(_assess_ahead.AssessAhead, "answers", die_then_answer)
    ahead = _night(tmp_path / "ahead")
    got = _without_timing(light(ahead))
    assert killed, "a child was started, and killed"
    assert got == want
    assert _tables(ahead) == _tables(here)


def test_a_purge_in_the_night_ends_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, children: list[list[str]]
) -> None:
    """A file edited before its cursor is purged of what it no longer says: the child that
    was given texts before that purge is ended there (none outlives it in memory), and the
    night is the one without a child."""
    events: list[str] = []
    real_close, real_answers = _assess_ahead.AssessAhead.close, _assess_ahead.AssessAhead.answers

    def close(self: _assess_ahead.AssessAhead) -> None:
        if self._pid is not None:
            events.append("ended")
        real_close(self)

    def answers(self: _assess_ahead.AssessAhead, lexicon: salience.Lexicon) -> Any:
        events.append("asked")
        return real_answers(self, lexicon)

    monkeypatch.setattr(_assess_ahead.AssessAhead, "close", close)
    monkeypatch.setattr(_assess_ahead.AssessAhead, "answers", answers)
    _many_batches(monkeypatch)
    monkeypatch.setattr(light_phase, "START_FROM", 10**9)
    roots = [tmp_path / "here", tmp_path / "ahead"]
    reports = []
    for root in roots:
        _night(root)
        light(root)
        # Night two: new sessions (read first: their names sort first) and an edit.
        fake = FakeOpenClaw(root)
        for n in range(3):
            said = [f"The print server P{n}x{k} is in room {k} in Oslo." for k in range(30)]
            turns = [("user", text) for text in said]
            fake.session("main", f"a{n}", turns, key=f"agent:main:main:a{n}", start=DAY)
        edited = root / "agents" / "main" / "sessions" / "s05.jsonl"
        edited.write_text(edited.read_text().replace("Frankfurt", "Madrid"))
        append(edited, "user", "The Node5 build server moved to Oslo.", DAY, "e5")
        if root == roots[1]:
            monkeypatch.setattr(light_phase, "START_FROM", 1)
        reports.append(_without_timing(light(root)))
    assert reports[0]["main"]["sessions"]["rewritten"] == 1
    assert reports[1] == reports[0]
    assert _tables(roots[1]) == _tables(roots[0])
    # The first child was ended before the rescore asked it anything: by the purge.
    assert children and children[0]
    assert events[0] == "ended"


def test_where_no_child_may_be_forked_the_run_asks_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, children: list[list[str]]
) -> None:
    """Another thread running (a scheduler's): no child, and `fork_safe` (which lets
    corpus's idle fsync threads go each time it is asked) is asked once a run, not after
    every batch."""
    from dreaming import forking

    _many_batches(monkeypatch)
    monkeypatch.setattr(light_phase, "START_FROM", 1)
    asked: list[int] = []
    monkeypatch.setattr(forking, "fork_safe", lambda: asked.append(1) is None and False)
    report = light(_night(tmp_path / "here"))
    assert report["main"]["sessions"]["read"] == 12
    assert children == [] and asked == [1]
