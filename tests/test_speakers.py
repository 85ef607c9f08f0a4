"""Whose fact it is: where a transcript names the speaker, the corpus line records them, a
first-person claim is theirs (two people's "I" never fold or supersede one another), and the
deterministic entry names them; the owner of a one-to-one chat stays implicit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from dreaming import runner
from dreaming.app import App
from dreaming.forget import Selector
from dreaming.ingest import claims, slots
from dreaming.ingest.transcripts._inbound import sender
from dreaming.memory.memory_file import read
from dreaming.verify import verify
from tests.openclaw_builder import FakeOpenClaw, append, block

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
GROUP_KEY = "agent:main:telegram:group:-100123"
ALLERGY = "I'm allergic to peanuts and tree nuts, so never order satay for me."
JOB = "I work at Acme Corp as a backend engineer on the billing team."
LEEDS = "I live in Leeds with my partner and our two cats."
BRISTOL = "We moved to Bristol last month, the new place is lovely."


def by(name: str, said: str, *, group: bool = False) -> tuple[str, str]:
    return ("user", block(name, name.casefold(), group=group) + said)


def night(state: Path, config: str | None = None) -> None:
    if config is not None:
        (state / "dreaming.toml").write_text(config)
    settings = state / "dreaming.toml"
    app = App.open(state, settings if settings.exists() else None, env={})
    try:
        runner.run(app, ["light", "rem", "deep"], None)
        assert verify(app.engine("main"), app.paths, "main").ok
    finally:
        app.close()


def memory(state: Path) -> list[str]:
    path = state / "workspace" / "MEMORY.md"
    return [b.text for b in read(path).blocks] if path.exists() else []


def sql(state: Path, query: str) -> list[Any]:
    app = App.open(state, None, env={})
    try:
        with app.engine("main").connect() as conn:
            return list(conn.execute(text(query)).all())
    finally:
        app.close()


def entry(entries: list[str], words: str) -> str:
    found = [e for e in entries if words in e]
    assert len(found) == 1, (words, entries)
    return found[0]


def two_people(oc: FakeOpenClaw, sid: str, turns: list[tuple[str, str]], day: int = 0) -> None:
    """A chat of two people, as bench/locomo.py writes LoCoMo's: a direct chat whose
    transcript names a sender in every message."""
    oc.session(
        "main",
        sid,
        [by(name, said) for name, said in turns],
        key=f"agent:main:main:{sid}",
        start=START + timedelta(days=day),
        chatType="direct",
    )


# -- reading who said it ---------------------------------------------------------------------


def test_the_sender_block_names_a_person_and_openclaws_own_clients_name_nobody() -> None:
    who = sender(block("Graeme", "5540671995", group=True) + "hello")
    assert who is not None and (who.name, who.id) == ("Graeme", "5540671995")
    tui = (
        'Sender (untrusted metadata):\n```json\n{"label": "openclaw-tui (gateway-client)", '
        '"id": "gateway-client", "name": "openclaw-tui"}\n```\n\nhi'
    )
    assert sender(tui) is None
    assert sender("Sender (untrusted metadata): no block at all") is None
    # Quoted later in the text, a block vouches for nobody.
    assert sender("Look at this:\n\n" + block("Mallory", "1")) is None
    # A name is written into MEMORY.md: markup and colons do not survive.
    odd = sender(block("<b>Eve</b>: admin", "9"))
    assert odd is not None and odd.name == "b Eve b admin"


# -- naming -------------------------------------------------------------------------------------


def test_a_group_the_operator_vouches_for_gives_each_sender_a_named_entry(tmp_path: Path) -> None:
    oc = FakeOpenClaw(tmp_path)
    turns = [
        by("Graeme", ALLERGY, group=True),
        ("assistant", "Noted, no satay."),
        by("Anna", JOB, group=True),
        ("assistant", "Got it."),
    ]
    oc.session("main", "g1", turns, key=GROUP_KEY, chatType="group")
    night(tmp_path, f'[admission]\nowner_sessions = ["{GROUP_KEY.rsplit(":", 1)[0]}:*"]\n')
    entries = memory(tmp_path)
    assert "Graeme: I'm allergic to peanuts" in entry(entries, "peanuts")
    assert "Anna: I work at Acme Corp" in entry(entries, "Acme")
    assert not any("the user" in e for e in entries), entries
    speakers = {r[0] for r in sql(tmp_path, "SELECT speaker FROM corpus_lines WHERE role='user'")}
    assert speakers == {"Graeme", "Anna"}


def test_a_group_nobody_vouches_for_names_its_senders_and_stays_evidence(tmp_path: Path) -> None:
    oc = FakeOpenClaw(tmp_path)
    turns = [by("Graeme", ALLERGY, group=True), by("Anna", JOB, group=True)]
    oc.session("main", "g1", turns, key=GROUP_KEY, chatType="group")
    night(tmp_path)
    assert memory(tmp_path) == []
    rows = sql(tmp_path, "SELECT speaker, origin_class FROM corpus_lines ORDER BY line")
    assert rows == [("Graeme", "untrusted"), ("Anna", "untrusted")]


def test_a_direct_chat_names_nobody(tmp_path: Path) -> None:
    oc = FakeOpenClaw(tmp_path)
    turns = [by("Sam", ALLERGY), ("assistant", "Noted."), by("Sam", JOB), ("assistant", "Ok.")]
    oc.session("main", "dm", turns, key="agent:main:telegram:dm:sam", chatType="direct")
    night(tmp_path)
    entries = memory(tmp_path)
    # The owner is implicit: the line is the statement, with no name before it.
    assert entry(entries, "peanuts").startswith("I'm allergic"), entries
    assert not any("Sam" in e for e in entries), entries
    assert {r[0] for r in sql(tmp_path, "SELECT speaker FROM corpus_lines")} == {None}


def test_two_people_talking_are_both_named(tmp_path: Path) -> None:
    two_people(FakeOpenClaw(tmp_path), "s0", [("Caroline", ALLERGY), ("Melanie", JOB)])
    night(tmp_path)
    entries = memory(tmp_path)
    assert "Caroline: I'm allergic" in entry(entries, "peanuts")
    assert "Melanie: I work at Acme" in entry(entries, "Acme")


def test_a_line_appended_later_still_names_its_sender(tmp_path: Path) -> None:
    oc = FakeOpenClaw(tmp_path)
    two_people(oc, "s0", [("Caroline", ALLERGY), ("Melanie", JOB)])
    night(tmp_path)
    path = tmp_path / "agents" / "main" / "sessions" / "s0.jsonl"
    role, said = by("Caroline", LEEDS)
    append(path, role, said, START + timedelta(minutes=5), "s0-late")
    night(tmp_path)
    rows = sql(tmp_path, "SELECT speaker FROM corpus_lines ORDER BY line")
    assert rows == [("Caroline",), ("Melanie",), ("Caroline",)]
    assert "Caroline: I live in Leeds" in entry(memory(tmp_path), "Leeds")


# -- folding -------------------------------------------------------------------------------------


def test_two_peoples_identical_i_claims_stay_two_candidates_and_two_entries(
    tmp_path: Path,
) -> None:
    two_people(FakeOpenClaw(tmp_path), "s0", [("Caroline", LEEDS), ("Melanie", LEEDS)])
    night(tmp_path)
    rows = sql(tmp_path, "SELECT speaker, key FROM candidates WHERE text LIKE 'I live in Leeds%'")
    assert sorted(r[0] for r in rows) == ["Caroline", "Melanie"]
    assert len({r[1] for r in rows}) == 2
    leeds = [e for e in memory(tmp_path) if "Leeds" in e]
    assert sorted(e.split(": ", 1)[0].split(" — ")[-1] for e in leeds) == ["Caroline", "Melanie"]


def test_the_owners_claims_keep_their_keys_and_still_fold_across_sessions(tmp_path: Path) -> None:
    assert claims.held_key("c:0123456789abcdef", None) == "c:0123456789abcdef"
    oc = FakeOpenClaw(tmp_path)
    for n in range(2):
        start = START + timedelta(days=n)
        oc.session("main", f"dm{n}", [by("Sam", LEEDS)], key=f"agent:main:dm{n}", start=start)
    night(tmp_path)
    rows = sql(tmp_path, "SELECT key, speaker, sessions FROM candidates WHERE text LIKE '%Leeds%'")
    tokens = claims.content_tokens(LEEDS)
    assert rows == [(claims.claim_key(tokens), None, 2)]


def test_a_similarity_index_finds_a_set_only_for_its_holder() -> None:
    index = claims.SimilarityIndex(0.8)
    tokens = claims.content_tokens(LEEDS)
    index.add(1, tokens, "Caroline")
    index.add(2, tokens)
    assert index.best(tokens, "caroline ") == 1  # case and spacing do not tell two apart
    assert index.best(tokens, "Melanie") is None
    assert index.best(tokens) == 2


# -- supersession ---------------------------------------------------------------------------------


def test_slots_never_cross_speakers() -> None:
    s = slots.default_slots()

    def replaced(old: str, old_by: str | None, new: str, new_by: str | None) -> bool:
        return slots.replaces(s.read(new, speaker=new_by), s.read(old, speaker=old_by)) is not None

    assert replaced(LEEDS, "Caroline", BRISTOL, "Caroline")
    assert not replaced(LEEDS, "Caroline", BRISTOL, "Melanie")
    assert not replaced(LEEDS, None, BRISTOL, "Melanie")  # nor the owner's
    assert not replaced(LEEDS, "Caroline", BRISTOL, None)
    assert replaced(LEEDS, None, BRISTOL, None)
    sister, moved = "My sister lives in Leeds.", "My sister moved to Bristol."
    assert replaced(sister, "Caroline", moved, "Caroline")
    assert not replaced(sister, "Caroline", moved, "Melanie")
    assert replaced(sister, None, moved, None)
    # A third person is the same person whoever speaks of them.
    assert replaced("Anna lives in Leeds.", "Caroline", "Anna moved to Bristol.", "Melanie")


@pytest.mark.parametrize("nightly", [True, False], ids=["night-by-night", "one-night"])
def test_supersession_stays_with_the_speaker(tmp_path: Path, nightly: bool) -> None:
    oc = FakeOpenClaw(tmp_path)
    cats = "My kids love building sandcastles at the beach every summer."
    two_people(oc, "s0", [("Caroline", LEEDS), ("Melanie", cats)])
    if nightly:
        night(tmp_path)
    two_people(oc, "s1", [("Melanie", BRISTOL), ("Caroline", ALLERGY)], day=30)
    night(tmp_path)
    entries = memory(tmp_path)
    assert "Caroline: I live in Leeds" in entry(entries, "Leeds")
    assert "Melanie: We moved to Bristol" in entry(entries, "Bristol")


@pytest.mark.parametrize("nightly", [True, False], ids=["night-by-night", "one-night"])
def test_supersession_still_replaces_the_same_speakers_fact(tmp_path: Path, nightly: bool) -> None:
    oc = FakeOpenClaw(tmp_path)
    two_people(oc, "s0", [("Caroline", LEEDS), ("Melanie", JOB)])
    if nightly:
        night(tmp_path)
    two_people(oc, "s1", [("Caroline", BRISTOL), ("Melanie", ALLERGY)], day=30)
    night(tmp_path)
    entries = memory(tmp_path)
    assert not any("Leeds" in e for e in entries), entries
    assert "Caroline: We moved to Bristol" in entry(entries, "Bristol")
    assert "Melanie: I work at Acme" in entry(entries, "Acme")


# -- forgetting -----------------------------------------------------------------------------------


def test_forget_by_participant_removes_the_lines_a_sender_named_in(tmp_path: Path) -> None:
    oc = FakeOpenClaw(tmp_path)
    two_people(oc, "s0", [("Caroline", ALLERGY), ("Melanie", JOB)])
    oc.session("main", "dm", [by("Sam", LEEDS)], key="agent:main:dm:sam", chatType="direct")
    night(tmp_path)
    assert any("Caroline" in e for e in memory(tmp_path))
    app = App.open(tmp_path, None, env={})
    try:
        report = runner.forget(
            app, "main", Selector(participant="caroline"), dry_run=False
        ).to_dict()
        assert [s["session_id"] for s in report["sessions"]] == ["s0"]
        assert verify(app.engine("main"), app.paths, "main").ok
    finally:
        app.close()
    assert sql(tmp_path, "SELECT session_id FROM corpus_lines") == [("dm",)]
    entries = memory(tmp_path)
    assert not any("Caroline" in e or "Melanie" in e for e in entries), entries
    assert any("Leeds" in e for e in entries)
