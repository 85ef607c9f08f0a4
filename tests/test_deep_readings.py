"""The deterministic consolidator against many held entries: what it reads each entry as is
kept from batch to batch (`Readings`), and the slot test asks only the entries that can
answer (`_Memory.conflicts`, `_Memory.replacing`). Both must decide exactly as reading and
asking every entry afresh would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dreaming.ingest import claims as claims_mod
from dreaming.ingest import slots as slots_mod
from dreaming.ingest.tags import build_registry
from dreaming.memory import memory_file
from dreaming.phases.deep import _deterministic
from dreaming.phases.deep._likeness import bag, owned
from dreaming.phases.deep._selection import Candidate

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

# Slot statements, their changes and corrections, other people's facts, pronouns, small
# facts that fill no slot: each pair of them either replaces or does not.
STATEMENTS = [
    "I live in Leeds with my partner and our two cats.",
    "We moved to Bristol last month, the new place is lovely.",
    "I work at Acme Corp as a backend engineer.",
    "I joined Globex as a staff engineer last week.",
    "Always use pnpm for installing packages.",
    "Use yarn instead of pnpm from now on.",
    "My wife's name is Maria.",
    "Sorry, I misspoke: my wife's name is Marie, not Maria.",
    "Our design team uses Figma for all mockups.",
    "The design team switched from Figma to Penpot, so share mockups as Penpot links.",
    "I work at the county hospital as a night nurse.",
    "I no longer work at the county hospital, I quit in May.",
    "My email is anna@old.example.",
    "My email is now anna@new.example.",
    "My sister moved to Oslo.",
    "My sister lives in Lisbon and works as an architect.",
    "Anna lives in Lisbon.",
    "Ben moved to Porto.",
    "She moved to Oslo.",
    "Actually her name is Marie.",
    "I changed my mind, we deploy on Thursdays now.",
    "We deploy on Fridays.",
    "I love hiking.",
    "I'm allergic to peanuts.",
    "I'm thinking of moving to Berlin.",
    "I lost my job at Acme.",
    "僕は東京に住んでいる。",
    "僕は大阪に引っ越した。",
    "The staging database is called rimazu.",
    "The staging database is now called kopeta.",
]


def _memory(texts: list[str]) -> _deterministic._Memory:
    live = [(memory_file.entry_key(t), t) for t in texts]
    stated = {k: START + timedelta(days=i) for i, (k, _) in enumerate(live)}
    readings = _deterministic.Readings(slots_mod.default_slots())
    return _deterministic._Memory(live, 0.8, readings, stated)


def _every_conflict(memory: _deterministic._Memory, reading: slots_mod.Reading) -> list[int]:
    return [
        i
        for i, old in enumerate(memory.readings)
        if i not in memory.gone and slots_mod.replaces(reading, old) is not None
    ]


def _every_replacing(
    memory: _deterministic._Memory, reading: slots_mod.Reading, when: datetime
) -> list[int]:
    return [
        i
        for i, later in enumerate(memory.readings)
        if i not in memory.gone
        and memory.stated_after(i, when)
        and slots_mod.replaces(later, reading) is not None
    ]


def _check_every_statement(memory: _deterministic._Memory) -> int:
    """Every statement as a candidate: the indexed answers are the full scan's. Returns how
    many pairs replaced (so a test knows it asked something that could answer)."""
    found = 0
    for n, text in enumerate(STATEMENTS):
        reading = memory.slots.read(text)
        when = START + timedelta(days=n, hours=12)
        full = _every_conflict(memory, reading)
        by_slot = [i for i in full if slots_mod.replaces(reading, memory.readings[i]).by_slot]
        expected = by_slot or (
            [
                max(
                    ((i, slots_mod.replaces(reading, memory.readings[i])) for i in full),
                    key=lambda p: (p[1].likeness, memory.when(p[0]), p[0]),
                )[0]
            ]
            if full
            else []
        )
        assert [i for i, _ in memory.conflicts(reading)] == expected, text
        assert [i for i, _ in memory.replacing(reading, when)] == _every_replacing(
            memory, reading, when
        ), text
        found += len(full)
    return found


def test_the_indexed_slot_test_answers_as_asking_every_entry() -> None:
    memory = _memory(STATEMENTS)
    assert _check_every_statement(memory) > 10


def test_the_index_follows_rewrites_additions_and_retirements() -> None:
    memory = _memory(STATEMENTS[::2])
    # An entry rewritten to fill another slot, one added, two superseded in the batch.
    text = "I work at Initech as a designer."
    memory.rewrite(1, text, bag(text), owned(text))
    added = "I live in Manchester now."
    voice = _deterministic.Voice.of(added, ())
    memory.add(added, bag(added), owned(added), START + timedelta(days=90), voice)
    memory.retire([0, 3])
    assert _check_every_statement(memory) > 5
    reading = memory.slots.read("I work at Hooli.")
    assert 1 in [i for i, _ in memory.conflicts(reading)]  # the rewritten entry's slot


def _candidate(n: int, text: str) -> Candidate:
    return Candidate(
        id=n,
        key=f"c{n}",
        text=text,
        tokens=claims_mod.content_tokens(text),
        sessions=2,
        days=2,
        owner_lines=2,
        agent_lines=0,
    )


@pytest.mark.parametrize("batch", [1, 3])
def test_readings_kept_across_batches_decide_as_fresh_ones(batch: int) -> None:
    """Night-like: batch after batch against the entries the batches before left, once
    with one `Readings` for the run and once reading every entry afresh."""
    registry = build_registry(env={})
    slots = slots_mod.default_slots()
    candidates = [_candidate(n, t) for n, t in enumerate(STATEMENTS)]
    said_at = {c.id: START + timedelta(days=c.id) for c in candidates}
    results: list[list[tuple[str, str | None, tuple[str, ...]]]] = []
    for kept in (_deterministic.Readings(slots), None):
        live: dict[str, str] = {}
        stated: dict[str, datetime] = {}
        out = []
        for start in range(0, len(candidates), batch):
            chunk = candidates[start : start + batch]
            decided = _deterministic.decide(
                list(live.items()),
                chunk,
                similarity=0.8,
                max_chars=500,
                registry=registry,
                slots=slots,
                stated=stated,
                said_at=said_at,
                readings=kept,
            )
            for c, d in zip(chunk, decided, strict=True):
                out.append((d.action.value, d.text, d.targets))
                for key in d.targets if d.action.value == "supersede" else ():
                    live.pop(key, None)
                if d.text is not None and d.action.value in ("add", "supersede", "merge"):
                    for key in d.targets if d.action.value == "merge" else ():
                        live.pop(key, None)
                    key = memory_file.entry_key(d.text)
                    live[key] = d.text
                    stated[key] = said_at[c.id]
        results.append(out)
    assert results[0] == results[1]
    assert {a for a, _, _ in results[0]} >= {"add", "supersede"}


def test_readings_refuse_other_slots() -> None:
    readings = _deterministic.Readings(slots_mod.default_slots())
    other = slots_mod.slots_for({"plays_for": ["plays? (?:now )?for"]}, {})
    with pytest.raises(ValueError, match="other slots"):
        _deterministic.decide(
            [],
            [],
            similarity=0.8,
            max_chars=500,
            registry=build_registry(env={}),
            slots=other,
            readings=readings,
        )
