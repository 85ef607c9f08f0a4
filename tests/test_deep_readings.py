"""The deterministic consolidator against many held entries: what it reads each entry as,
and its indexes, are kept from batch to batch (`Memory.sync`), and the slot test asks only
the entries that can answer (`Memory.conflicts`, `Memory.replacing`). Both must decide
exactly as reading and asking every entry afresh would."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection
from sqlalchemy import text as sql

from dreaming import runner
from dreaming.app import App
from dreaming.ingest import claims as claims_mod
from dreaming.ingest import slots as slots_mod
from dreaming.ingest.tags import build_registry
from dreaming.memory import lineage, memory_file
from dreaming.memory.decisions import Action
from dreaming.memory.memory_sync import SyncReport
from dreaming.phases.deep import _deterministic, _phase, _remainder
from dreaming.phases.deep._likeness import bag, owned
from dreaming.phases.deep._selection import Candidate
from dreaming.phases.deep._summary import DeepSummary
from tests.openclaw_builder import FakeOpenClaw

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
    # Two slots in one statement: a later value of one leaves it standing, unless the other
    # is a statement of its own (kept in the replacing entry).
    "Our prod cluster runs in eu-west-1 and our staging cluster runs in eu-central-1.",
    "We migrated the staging cluster to us-east-2 yesterday.",
    "My name is Ana and I live in Porto with my partner Rui since 2019.",
    "My dentist is Dr. Ortega, and my gym is FitLife on Calle Colón.",
    "My gym is now BasicFit.",
    "We deploy with GitHub Actions to Fly.io, and the staging app is checkout-staging.",
    "We now deploy to Render instead of Fly.io.",
]


def said(oc: FakeOpenClaw, name: str, statement: str, *, day: float) -> None:
    """`statement`, the owner's, in a direct session `name` of its own, `day` days after START."""
    oc.session(
        "main",
        name,
        [("user", statement), ("assistant", "Noted, thanks.")],
        key=f"agent:main:{name}",
        start=START + timedelta(days=day),
        chatType="direct",
    )


def _memory(texts: list[str]) -> _deterministic.Memory:
    live = [(memory_file.entry_key(t), t) for t in texts]
    stated = {k: START + timedelta(days=i) for i, (k, _) in enumerate(live)}
    memory = _deterministic.Memory(0.8, _deterministic.Readings(slots_mod.default_slots()))
    memory.sync(live, stated)
    return memory


def _every_conflict(memory: _deterministic.Memory, reading: slots_mod.Reading) -> list[int]:
    return [
        i
        for i in memory.order
        if i not in memory.gone and slots_mod.replaces(reading, memory.readings[i]) is not None
    ]


def _every_replacing(
    memory: _deterministic.Memory, reading: slots_mod.Reading, when: datetime, text: str
) -> list[int]:
    return [
        i
        for i in memory.order
        if i not in memory.gone
        and memory.stated_after(i, when)
        and (r := slots_mod.replaces(memory.readings[i], reading)) is not None
        and (
            not r.by_slot
            or slots_mod.covers(memory.readings[i], reading)
            or _remainder.separable(memory.readings[i], text, memory.slots.read)
        )
    ]


def _check_every_statement(memory: _deterministic.Memory) -> int:
    """Every statement as a candidate: the indexed answers are the full scan's. Returns how
    many pairs replaced (so a test knows it asked something that could answer)."""
    found = 0
    for n, text in enumerate(STATEMENTS):
        reading = memory.slots.read(text)
        when = START + timedelta(days=n, hours=12)
        full = _every_conflict(memory, reading)
        replaced = {
            i: r for i in full if (r := slots_mod.replaces(reading, memory.readings[i])) is not None
        }
        by_slot = [i for i, r in replaced.items() if r.by_slot]
        # Else the likest correction target; of equally alike ones, the last stated.
        likest = max(
            replaced, key=lambda i: (replaced[i].likeness, memory.when(i), i), default=None
        )
        # An entry stating another slot too is not replaced by a slot (it would go with it),
        # unless that slot is a statement of its own the replacing entry keeps.
        whole = [
            i
            for i in by_slot
            if slots_mod.covers(reading, memory.readings[i])
            or _remainder.separable(reading, memory.live[i][1], memory.reader(i))
        ]
        expected = whole if by_slot else ([] if likest is None else [likest])
        assert [i for i, _ in memory.conflicts(reading)] == expected, text
        said = (text, memory.slots.read)
        assert [i for i, _ in memory.replacing(reading, when, said)] == _every_replacing(
            memory, reading, when, text
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
    for kept in (_deterministic.Memory(0.8, _deterministic.Readings(slots)), None):
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
                memory=kept,
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


def test_a_kept_memory_refuses_other_slots_or_similarity() -> None:
    memory = _deterministic.Memory(0.8, _deterministic.Readings(slots_mod.default_slots()))
    other = slots_mod.slots_for({"plays_for": ["plays? (?:now )?for"]}, {})
    for slots, similarity in ((other, 0.8), (memory.slots, 0.7)):
        with pytest.raises(ValueError, match="other slots or another similarity"):
            _deterministic.decide(
                [],
                [],
                similarity=similarity,
                max_chars=500,
                registry=build_registry(env={}),
                slots=slots,
                memory=memory,
            )


def _answers(memory: _deterministic.Memory) -> list[tuple[object, ...]]:
    """Every statement's near-duplicate, conflicts and replacements, by entry key."""
    out: list[tuple[object, ...]] = []
    for n, text in enumerate(STATEMENTS):
        reading = memory.slots.read(text)
        said, mine = bag(text), owned(text)
        hit = memory.near_duplicate(claims_mod.content_tokens(text), said, mine)
        when = START + timedelta(days=n, hours=12)
        out.append(
            (
                None if hit is None else memory.live[hit][0],
                [(memory.live[i][0], r) for i, r in memory.conflicts(reading)],
                [
                    (memory.live[i][0], r)
                    for i, r in memory.replacing(reading, when, (text, memory.slots.read))
                ],
            )
        )
    return out


def test_a_synced_memory_answers_as_one_built_afresh() -> None:
    """Batch after batch the held list changes as a night changes it (entries gone from the
    middle, new ones at the end or, made in the same instant, among the others, one whose
    speakers changed, a batch's own rewrites, adds and retirements in memory): synced, the
    kept memory answers every question as a memory built from the same list does."""
    rng = random.Random(3)
    pool = [*STATEMENTS, "I work at Initech as a designer.", "I live in Manchester now."]
    held = [(memory_file.entry_key(t), t) for t in pool[::2]]
    stated = {k: START + timedelta(days=i) for i, (k, _) in enumerate(held)}
    slots = slots_mod.default_slots()
    kept = _deterministic.Memory(0.8, _deterministic.Readings(slots))
    spoken: dict[str, frozenset[str]] = {}
    for night in range(8):
        kept.sync(held, stated, spoken)
        fresh = _deterministic.Memory(0.8, _deterministic.Readings(slots))
        fresh.sync(held, stated, spoken)
        assert _answers(kept) == _answers(fresh), night
        # What a batch does in memory before it is applied (or held for review).
        some = rng.sample(kept.order, 3)
        text = rng.choice(pool)
        kept.rewrite(some[0], text, bag(text), owned(text))
        kept.retire(some[1:2])
        added = rng.choice(pool)
        kept.add(added, bag(added), owned(added), START, _deterministic.Voice.of(added, ()))
        # What the database holds next: some gone, some new at the end, a changed speaker.
        for key, _ in rng.sample(held, 2):
            held.remove((key, _))
        for n, text in enumerate(rng.sample(pool, 3)):
            key = memory_file.entry_key(text)
            if all(k != key for k, _ in held):
                # At the end as a batch writes them; once in the middle (two entries made
                # in the same instant are ordered by key).
                where = rng.randrange(len(held)) if n == 0 and night % 2 else len(held)
                held.insert(where, (key, text))
                stated[key] = START + timedelta(days=40 + night)
        key = rng.choice(held)[0]
        spoken[key] = frozenset({"Anna"}) if key not in spoken else frozenset()


def test_lineage_kept_across_batches_is_what_the_database_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A night of one candidate a batch, where later batches merge into and supersede the
    entries earlier ones wrote: at every batch, the kept statement times and speakers of
    the held entries are those a fresh read gives."""
    checked: list[int] = []
    keep = _phase._HeldLineage.of

    def checking(
        self: _phase._HeldLineage, conn: Connection, agent: str, keys: Sequence[str]
    ) -> tuple[dict[str, datetime], dict[str, frozenset[str]]]:
        stated, spoken = keep(self, conn, agent, keys)
        assert {k: stated[k] for k in keys if k in stated} == lineage.stated_at(conn, agent, keys)
        assert {k: spoken[k] for k in keys if k in spoken} == lineage.spoken_by(conn, agent, keys)
        checked.append(len(keys))
        return stated, spoken

    monkeypatch.setattr(_phase._HeldLineage, "of", checking)
    oc = FakeOpenClaw(tmp_path)
    statements = [
        # Said again later in more words, or in fewer: whichever deep reads first, the other
        # merges into its entry and leaves the text as it is (the same key), with one more
        # session, and in one of the two pairs a later one.
        "My sister Anna lives in Lisbon.",
        "My brother Tom works at the harbour office in Porto with his old school friends.",
        "I live in Leeds with my partner and our two cats.",
        "My sister Anna lives in Lisbon with her husband Marco by the river.",
        "My brother Tom works at the harbour office in Porto.",
        "Our design team uses Figma for all mockups.",
        "We moved to Bristol last month, the new place is lovely.",
        "The design team switched from Figma to Penpot, so share mockups as Penpot links.",
        "I work at Acme Corp as a backend engineer.",
        "I joined Globex as a staff engineer last week.",
    ]
    for n, statement in enumerate(statements):
        for repeat in range(2):  # said twice, so each is worth promoting
            said(oc, f"s{n}-{repeat}", statement, day=10 * n + repeat)
    app = App.open(tmp_path, None, env={})
    try:
        results = runner.run(
            app, ["light", "rem", "deep"], None, deep={"batch_size": 1, "min_score": 0.0}
        )
    finally:
        app.close()
    actions = results[0].phase_dicts()["deep"]["actions"]
    assert actions.get("merge", 0) + actions.get("supersede", 0) >= 2, actions
    assert len(checked) >= 6 and checked[-1] > checked[0]


def test_a_merge_applied_between_batches_is_read_again(tmp_path: Path) -> None:
    """An entry a later statement merges into keeps its key and text but gains a later
    session: the next batch sees when it was last stated as the database now says."""
    oc = FakeOpenClaw(tmp_path)
    for day, statement in [(0, "I'm allergic to peanuts."), (60, "We deploy on Fridays.")]:
        said(oc, f"s{day}", statement, day=day)
    app = App.open(tmp_path, None, env={})
    try:
        runner.run(app, ["light"], None)
        engine = app.engine("main")
        phase = _phase.DeepPhase(engine, app.paths, app.registry)
        with engine.connect() as conn:
            rows = conn.execute(sql("SELECT id, key, text FROM candidates ORDER BY id")).all()
        earlier, later = sorted(rows, key=lambda c: "Fridays" in c.text)
        # Batch 1 writes the entry and reads its lineage; batch 2 merges the later statement.
        add = lineage.Applied(
            earlier.id, earlier.key, Action.ADD, (), earlier.text, "deterministic", "test"
        )
        phase.apply_decisions("main", [add], DeepSummary(agent="main"), write=False)
        key = memory_file.entry_key(earlier.text)
        with engine.connect() as conn:
            before = dict(phase._held.of(conn, "main", [key])[0])
        merge = lineage.Applied(
            later.id, later.key, Action.MERGE, (key,), earlier.text, "deterministic", "test"
        )
        phase.apply_decisions("main", [merge], DeepSummary(agent="main"), write=False)
        with engine.connect() as conn:
            stated, _ = phase._held.of(conn, "main", [key])
            fresh = lineage.stated_at(conn, "main", [key])
    finally:
        app.close()
    assert fresh[key] > before[key]  # the merge brought a later session
    assert stated[key] == fresh[key]


def _wrote_as_lists(
    summary: tuple[list[str], list[str], list[str]], report: SyncReport
) -> tuple[list[str], list[str], list[str]]:
    """DeepSummary.wrote's bookkeeping as it was written first, with lists."""
    duplicates, archived_now, restored = (list(x) for x in summary)
    for key in report.duplicates_removed:
        if key not in duplicates:
            duplicates.append(key)
    for key in report.archived_now:
        if key in restored:
            restored.remove(key)
        elif key not in archived_now:
            archived_now.append(key)
    for key in report.restored:
        if key in archived_now:
            archived_now.remove(key)
        elif key not in restored:
            restored.append(key)
    return duplicates, archived_now, restored


def test_a_runs_moves_between_memory_and_archive_add_up_write_by_write() -> None:
    """Several writes in a run (reconcile, the end of deep): an entry archived then restored
    is neither, the order is the first move's, nothing is listed twice."""
    rng = random.Random(7)
    keys = [f"m:{n:016x}" for n in range(40)]
    for _ in range(200):
        summary = DeepSummary(agent="main")
        expected: tuple[list[str], list[str], list[str]] = ([], [], [])
        for _ in range(rng.randint(1, 4)):
            report = SyncReport(
                duplicates_removed=rng.sample(keys, rng.randint(0, 3)),
                archived_now=rng.sample(keys, rng.randint(0, 12)),
                restored=rng.sample(keys, rng.randint(0, 12)),
            )
            summary.wrote(report)
            expected = _wrote_as_lists(expected, report)
        assert (summary.duplicates_removed, summary.archived_now, summary.restored) == expected
