"""Deep's gate is stable: whether a clear statement is kept depends on the statement (its text
and who said it), not on how much else the agent heard, nor on the schedule it was read on.

Real state folders, the real runner, real SQLite; no mocks."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dreaming import runner
from dreaming.app import App
from dreaming.config import DeepSettings
from dreaming.ingest import claims as claims_mod
from dreaming.ingest.salience import WEIGHTS, Feature, assess
from dreaming.ingest.scoring import DETAILS, KINDS, RULES, clarity, clear, telling_words
from dreaming.memory import gates
from dreaming.memory.memory_file import read
from tests.openclaw_builder import FakeOpenClaw

# Clear statements of every shape: standing instructions, constraints, disclosures with a
# name, a number or a date, a new employer, a child's class, a fact about the owner's world.
CLEAR = [
    "My son Teodor begins judo classes at the Ridgeview dojo in February.",
    "Always cc Priya Natarajan on every invoice you send to the Hartwell account.",
    "Always copy Marcus on every contract draft before it goes out.",
    "I started at Northwind as a data engineer this week.",
    "I am allergic to peanuts and sesame.",
    "Never book me on a flight that leaves before 8 am.",
    "My sister Anna lives in Lisbon.",
    "Our wedding anniversary is on 14 June.",
    "We moved to Bristol in March.",
    "The staging database is called bluebird.",
    "My daughter Mia has her piano recital on May 3 at the Elm Street hall.",
    "Please never touch files outside the docs folder.",
    "I work as a nurse at the county hospital.",
]
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _words(text: str) -> list[str]:
    return [w.casefold() for w in claims_mod.words(text) if len(w) > 3]


# The statements' own words, so that on the big agent they are common, not rare.
VOCABULARY = sorted({w for s in CLEAR for w in _words(s)})


def other_talk(rng: random.Random, n: int = 4) -> str:
    """A line of talk that is a candidate but no clear statement, in `n` of the statements'
    words."""
    first, *rest = rng.sample(VOCABULARY, n)
    return f"The {first} thing came up again, then {', '.join(rest)} with everyone."


def open_app(root: Path) -> App:
    return App.open(root, None, env={})


def verdicts(app: App, agent: str) -> dict[str, str]:
    """After light and REM: each clear statement the agent has heard -> its gate."""
    runner.run(app, ["light", "rem"], [agent])
    with app.engine(agent).connect() as conn:
        listed = gates.list_candidates(conn, agent, app.settings.deep, include_decided=False)
    return {c["text"]: c["gate"] for c in listed if c["text"] in CLEAR}


def memory(root: Path, agent: str) -> str:
    workspace = "workspace" if agent == "main" else f"workspace-{agent}"
    return "\n".join(b.text for b in read(root / workspace / "MEMORY.md").blocks)


def test_clear_statements_pass_on_a_new_agent_and_on_one_that_heard_a_thousand_sessions(
    tmp_path: Path,
) -> None:
    oc = FakeOpenClaw(tmp_path)
    rng = random.Random(21)
    # One new agent per statement: its only session, its only candidate (no rarity at all).
    for n, statement in enumerate(CLEAR):
        oc.session(
            f"new{n}", "s0", [("user", statement)], key=f"agent:new{n}:s0", chatType="direct"
        )
    # One agent that heard a thousand sessions of other talk in the statements' words first.
    for n in range(1000):
        oc.session(
            "big",
            f"o{n:04d}",
            [("user", other_talk(rng))],
            key=f"agent:big:o{n:04d}",
            start=START + timedelta(hours=n),
            chatType="direct",
        )
    oc.session(
        "big",
        "s",
        [("user", s) for s in CLEAR],
        key="agent:big:s",
        start=START + timedelta(hours=1001),
        chatType="direct",
    )
    app = open_app(tmp_path)
    try:
        new = {}
        for n in range(len(CLEAR)):
            new |= verdicts(app, f"new{n}")
        big = verdicts(app, "big")
        with app.engine("big").connect() as conn:
            heard = gates.list_candidates(conn, "big", app.settings.deep, include_decided=True)
        runner.run(app, ["deep"], None)
    finally:
        app.close()
    assert len(heard) > 900  # the other talk is candidates too: the statements' words are common
    assert new == big == dict.fromkeys(CLEAR, gates.PASSES)
    for n, statement in enumerate(CLEAR):
        assert statement in memory(tmp_path, f"new{n}")
        assert statement in memory(tmp_path, "big")


def six_weeks() -> list[tuple[datetime, list[tuple[str, str]]]]:
    """Six weeks of sessions, one every third day: the clear statements told in the first
    three weeks, two a session; then three weeks of talk in their words. Read in one night,
    the statements are weeks old and their words common; read night by night, neither."""
    rng = random.Random(42)
    statements = iter(CLEAR)
    plan = []
    for day in range(0, 42, 3):
        told = [("user", s) for s in itertools.islice(statements, 2)]
        talk = [("user", other_talk(rng, 8)) for _ in range(1 if told else 40)]
        plan.append((START + timedelta(days=day), [*talk, *told, ("assistant", "Noted.")]))
    return plan


def write(oc: FakeOpenClaw, n: int, when: datetime, turns: list[tuple[str, str]]) -> None:
    oc.session(
        "main", f"w{n:02d}", turns, key=f"agent:main:w{n:02d}", start=when, chatType="direct"
    )


def test_six_weeks_read_in_one_night_or_night_by_night_keep_the_same_statements(
    tmp_path: Path,
) -> None:
    plan = six_weeks()
    once, nightly = tmp_path / "once", tmp_path / "nightly"

    oc = FakeOpenClaw(once)
    for n, (when, turns) in enumerate(plan):
        write(oc, n, when, turns)
    app = open_app(once)
    try:
        in_one_night = verdicts(app, "main")
        runner.run(app, ["deep"], ["main"])
    finally:
        app.close()

    oc = FakeOpenClaw(nightly)
    by_night: dict[str, str] = {}
    app = open_app(nightly)
    try:
        for n, (when, turns) in enumerate(plan):
            write(oc, n, when, turns)
            # The night read the statement it was told: its verdict then.
            by_night |= {t: g for t, g in verdicts(app, "main").items() if t not in by_night}
            runner.run(app, ["deep"], ["main"])
    finally:
        app.close()

    assert in_one_night == by_night == dict.fromkeys(CLEAR, gates.PASSES)
    for statement in CLEAR:
        assert statement in memory(once, "main")
        assert statement in memory(nightly, "main")


def test_the_verdict_is_the_statements_own() -> None:
    deep = DeepSettings()
    for statement in CLEAR:
        found = assess(statement)
        words = telling_words(claims_mod.content_tokens(statement))
        assert clear(found.features, words), (statement, found)
        # Said by the owner it clears deep's default gate; the agent alone, half of it.
        owner = clarity(found.value, found.features, words, 1, 0)
        assert owner >= deep.min_score, (statement, found)
        alone = 0.0 if Feature.NARRATION in found.features else owner / 2  # narration: none
        assert clarity(found.value, found.features, words, 0, 1) == pytest.approx(alone)
        assert clarity(found.value, found.features, words, 0, 0) == 0.0


def _combinations() -> list[frozenset[Feature]]:
    """Every set of features a clear statement can have at its least salient: each rule
    alone, each kind with each detail, a fact alone, a disclosure that is an event or a
    preference."""
    # In a fixed order: the test ids must be the same in every process (pytest -n).
    sets = [frozenset({r}) for r in sorted(RULES)]
    # A disclosure is always in the first person (salience requires it).
    kinds = [
        frozenset({k, Feature.FIRST_PERSON}) if k is Feature.DISCLOSURE else frozenset({k})
        for k in sorted(KINDS)
    ]
    sets += [k | {d} for k in kinds for d in sorted(DETAILS)]
    sets += [frozenset({Feature.FACT})]
    sets += [frozenset({Feature.DISCLOSURE, Feature.EVENT, Feature.FIRST_PERSON})]
    # ... or what they like, in enough telling words
    sets += [frozenset({Feature.DISCLOSURE, Feature.PREFERENCE, Feature.FIRST_PERSON})]
    sets += [frozenset({Feature.EVENT, Feature.PREFERENCE})]
    return sets


@pytest.mark.parametrize("features", _combinations(), ids=lambda f: "+".join(sorted(f)))
def test_every_shape_of_clear_statement_clears_the_default_gate(features: frozenset[Feature]):
    """The contract between salience's weights and the gate: however the weights move, the
    least salient clear statement still clears deep's default min_score."""
    salience = sum(WEIGHTS.get(f, 0.0) for f in features)
    assert clear(features, 99)
    assert clarity(salience, features, 99, 1, 0) >= DeepSettings().min_score


@pytest.mark.parametrize(
    "text",
    [
        "I got it because it reminded me of something I love.",  # says not what
        "We had so much fun rehearsing!",  # an event, no detail
        "Yoga is great for your body and mind.",  # no kind
        "I feel like a different person now.",
        "We had a great time last weekend.",  # a time word, but nothing said of what
        "I took it at the pier last month.",  # took what?
    ],
)
def test_what_the_text_does_not_make_clear_is_held_back_however_rare(text: str) -> None:
    found = assess(text)
    words = telling_words(claims_mod.content_tokens(text))
    assert not clear(found.features, words), found
    assert clarity(found.value, found.features, words, 1, 0) < DeepSettings().min_score


def test_a_named_fact_with_an_identifier_is_clear() -> None:
    """ "The staging bucket is called acme_stage_assets": the underscore is no task talk."""
    from dreaming.ingest import salience
    from dreaming.ingest.claims import content_tokens
    from dreaming.ingest.scoring import clarity, telling_words

    for text in (
        "The staging bucket is called acme_stage_assets.",
        "The staging bucket is called acme-stage-assets.",
    ):
        found = salience.assess(text)
        value = clarity(found.value, found.features, telling_words(content_tokens(text)), 1, 0)
        assert value >= 1.15, (text, found.names(), value)
