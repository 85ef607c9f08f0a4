"""A purge searches every call record, run summary, undo image and proposal for its needles
as one pattern (`_scrub.searcher`): it must answer as `carries` does, a needle at a time,
whatever the needles hold."""

from __future__ import annotations

import json
import random

import pytest

from dreaming.forget import _scrub

# Characters a pattern would read as syntax, beside text and JSON escapes.
ALPHABET = [*"abc xyz.*+?()[]{}|^$\\\"'\n\t", "\u00e9", "\u2028", "日本"]


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def test_one_pattern_answers_as_each_needle_does() -> None:
    rng = random.Random(7)
    hits = 0
    for _ in range(1000):
        texts = [_text(rng, rng.randint(0, 80)) for _ in range(5)]
        picked = [t[i : i + rng.randint(1, 8)] for t in texts if t for i in [rng.randrange(len(t))]]
        snippets = {s for s in [*picked, _text(rng, 4)] if s}
        needles = _scrub.needles_of(snippets)
        holds = _scrub.searcher(needles)
        for text in [*texts, json.dumps(texts), None, ""]:
            want = _scrub.carries(text, needles)
            assert holds(text) == want, (text, needles)
            hits += want
    assert hits > 500  # most texts hold one of their own pieces


def test_no_needle_holds_nothing() -> None:
    holds = _scrub.searcher([])
    assert not holds("anything") and not holds("") and not holds(None)


def test_many_needles_are_searched_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_scrub, "_PATTERN_MAX", 3)
    compiled: list[object] = []
    monkeypatch.setattr(_scrub, "literals", compiled.append)
    holds = _scrub.searcher(["alpha one", "beta two", "gamma three", "delta four"])
    assert holds("x delta four y") and not holds("alpha two")
    assert compiled == []


def test_an_empty_text_holds_nothing_even_of_an_empty_needle() -> None:
    assert _scrub.carries("", ["", "abc"]) is False
    assert _scrub.searcher(["", "abc"])("") is False and _scrub.searcher(["abc"])(None) is False


def test_a_plan_searches_for_the_needles_it_holds_now() -> None:
    from dreaming.forget._purge import Plan

    plan = Plan([], [], [], [])
    assert not plan.holds_purged("the user works at ACME")
    plan.needles = ("works at ACME",)
    assert plan.holds_purged("the user works at ACME")
    plan.needles = ("lives in Tokyo",)
    assert not plan.holds_purged("the user works at ACME")
