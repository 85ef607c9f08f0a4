"""What a night keeps, end to end on the embedded default: facts and standing instructions,
not small talk, narration, banners, envelopes or fragments."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dreaming import runner
from dreaming.app import App
from dreaming.memory.memory_file import read
from tests.openclaw_builder import FakeOpenClaw
from tests.transcript_builders import cc_assistant, cc_tool_result, cc_tool_use, cc_user, text

SMALL_TALK = [
    ("user", "Hey! Good to see you again!"),
    ("assistant", "Hi! Great to hear from you. How have you been?"),
    ("user", "Thanks so much, that really means a lot to me!"),
    ("assistant", "Wow, that's awesome! I'm so happy for you."),
    ("user", "Haha, totally agree. Talk to you soon!"),
]


def memory_lines(state: Path, agent: str = "main") -> list[str]:
    ws = "workspace" if agent == "main" else f"workspace-{agent}"
    return [b.text for b in read(state / ws / "MEMORY.md").blocks]


def night(state: Path, config: str | None = None) -> None:
    if config is not None:
        (state / "dreaming.toml").write_text(config)
    app = App.open(state, state / "dreaming.toml" if config else None, env={})
    try:
        runner.run(app, ["light", "rem", "deep"], None)
    finally:
        app.close()


def said_by_day(state: Path, statements: list[str]) -> list[list[str]]:
    """Each statement the owner's own session on its own day, with a night after each, as a
    deployment dreams. Returns the MEMORY.md keys after each night."""
    oc = FakeOpenClaw(state)
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    keys: list[list[str]] = []
    for day, statement in enumerate(statements):
        oc.session(
            "main",
            f"s{day}",
            [("user", statement)],
            key=f"agent:main:s{day}",
            start=start + timedelta(days=day),
            chatType="direct",
        )
        night(state)
        keys.append([b.key for b in read(state / "workspace" / "MEMORY.md").blocks])
    return keys


def test_a_fact_said_once_in_passing_survives_recurring_small_talk(tmp_path: Path) -> None:
    oc = FakeOpenClaw(tmp_path)
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    for day in range(8):
        turns = list(SMALL_TALK)
        if day == 3:
            turns.insert(2, ("user", "By the way, my daughter Emma is allergic to shellfish."))
        if day == 5:
            turns.insert(2, ("user", "We moved to Porto last month, the new flat is great."))
        oc.session(
            "main",
            f"s{day}",
            turns,
            key=f"agent:main:s{day}",
            start=start + timedelta(days=day),
            chatType="direct",
        )
    night(tmp_path)
    lines = memory_lines(tmp_path)
    joined = "\n".join(lines)
    assert "allergic to shellfish" in joined
    assert "Porto" in joined
    for chatter in ("means a lot", "Good to see you", "Talk to you soon", "awesome"):
        assert chatter not in joined, lines
    # The owner implicit; an event keeps the day it was said, a standing fact needs none.
    assert "My daughter Emma is allergic to shellfish." in lines  # "By the way" goes
    assert "2026-03-06 We moved to Porto last month, the new flat is great." in lines
    assert not any("the user" in line.casefold() for line in lines), lines


def test_coding_sessions_keep_standing_instructions_not_narration(tmp_path: Path) -> None:
    project = tmp_path / "projects" / "-home-dev-app"
    project.mkdir(parents=True)
    lines = [
        cc_user("Fix the failing import in src/parser.py please.", ts="2026-02-01T10:00:00Z"),
        cc_assistant(
            "m1", [text("Let me check the MCP servers status.")], ts="2026-02-01T10:00:05Z"
        ),
        cc_assistant("m2", [cc_tool_use("Bash", command="pytest -q")], ts="2026-02-01T10:00:06Z"),
        cc_tool_result("1 failed"),
        cc_assistant(
            "m3",
            [text("I'll start by reading the parser module. Now I see the bug.")],
            ts="2026-02-01T10:00:09Z",
        ),
        cc_user("Always run the linter before committing.", ts="2026-02-01T10:05:00Z"),
        cc_assistant(
            "m4",
            [text("Understood, I will always run the linter before committing.")],
            ts="2026-02-01T10:05:03Z",
        ),
        cc_user(
            "⚠️ Agent failed before reply: No API key found for provider anthropic.",
            ts="2026-02-01T10:06:00Z",
        ),
        cc_user(
            "Steps: 1. Check its API and what it returns 2. Write tests for it",
            ts="2026-02-01T10:07:00Z",
        ),
        cc_user(
            "Never push directly to the main branch, open a pull request instead.",
            ts="2026-02-01T10:08:00Z",
        ),
        cc_assistant(
            "m5", [text("Done! Let me know if you need anything else.")], ts="2026-02-01T10:08:05Z"
        ),
    ]
    (project / "s1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    night(
        tmp_path,
        f'[[sources]]\nkind = "claude-code"\npath = "{tmp_path / "projects"}"\nagent = "coder"\n',
    )
    # The project's own memory, where Claude Code loads it.
    memory = project / "memory" / "MEMORY.md"
    kept = [b.text for b in read(memory).blocks]
    joined = "\n".join(kept)
    assert "Always run the linter before committing." in joined
    assert "Never push directly to the main branch" in joined
    for junk in (
        "Let me check",
        "I'll start",
        "Agent failed",
        "Let me know",
        "Fix the failing",
        "returns 2",
        "what it returns.",
    ):
        assert junk not in joined, kept
    text_of_file = memory.read_text()
    assert "## Instructions" in text_of_file


def test_japanese_owner_instructions_become_entries(tmp_path: Path) -> None:
    oc = FakeOpenClaw(tmp_path)
    oc.session(
        "main",
        "jp",
        [
            ("user", "[Sun 2026-03-08 22:57 GMT+9] MEMORY.md以外の変更を禁ずる"),
            ("assistant", "[[reply_to_current]] 了解。以後、変更するのは MEMORY.md だけにする。"),
            (
                "user",
                "[Sun 2026-03-08 23:06 GMT+9] USER.mdも僕の承認のみ変更。僕をボブにゃんとよぶこと",
            ),
            ("assistant", "[[reply_to_current]] 了解、ボブにゃん。"),
        ],
        key="agent:main:main",
        chatType="direct",
    )
    night(tmp_path)
    joined = "\n".join(memory_lines(tmp_path))
    assert "MEMORY.md以外の変更を禁ずる" in joined
    assert "僕をボブにゃんとよぶこと" in joined
    assert "[[reply_to_current]]" not in joined and "GMT+9" not in joined
    assert "了解" not in joined  # the agent's paraphrase is not the memory


def test_real_openclaw_excerpt_keeps_the_owners_instructions(
    tmp_path: Path, shared_data: Path
) -> None:
    sessions = tmp_path / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    shutil.copy(
        shared_data / "transcripts" / "openclaw" / "openclaw-v3-real-excerpt.jsonl",
        sessions / "excerpt.jsonl",
    )
    night(tmp_path)
    joined = "\n".join(memory_lines(tmp_path))
    assert "MEMORY.md以外の変更を禁ずる" in joined
    assert "僕をボブにゃんとよぶこと" in joined
    for junk in ("Agent failed", "GMT+9", "[[reply_to_current]]", "auth-profiles"):
        assert junk not in joined


@pytest.mark.parametrize("agent_only", [False, True])
def test_agent_only_claims_wait_unless_the_setting_allows(tmp_path: Path, agent_only: bool) -> None:
    oc = FakeOpenClaw(tmp_path)
    oc.session(
        "main",
        "a",
        [
            ("user", "Hello there, how are you doing today?"),
            ("assistant", "Your server bluebird was moved to the Frankfurt datacenter last week."),
        ],
        key="agent:main:main",
        chatType="direct",
    )
    # The agent's word weighs half the owner's, so taking it alone also means a lower bar.
    config = f"[deep]\npromote_agent_only = {str(agent_only).lower()}\nmin_score = 0.4\n"
    night(tmp_path, config)
    joined = "\n".join(memory_lines(tmp_path))
    assert ("Frankfurt" in joined) is agent_only
    if agent_only:
        assert "The agent: " in joined


def test_restatements_merge_but_another_persons_fact_stays_apart(tmp_path: Path) -> None:
    said_by_day(
        tmp_path,
        [
            "My sister Anna lives in Lisbon.",
            "I'm allergic to peanuts, please remember that.",
            "My sister Anna lives in Lisbon and works as an architect.",
            "I'm still allergic to peanuts, tell the caterer for Friday.",
            "My son Leo is allergic to peanuts too.",
        ],
    )
    lines = memory_lines(tmp_path)
    anna = [line for line in lines if "Anna" in line]
    assert len(anna) == 1 and "architect" in anna[0], lines  # the fuller statement won
    mine = [line for line in lines if "allergic" in line and "Leo" not in line]
    assert len(mine) == 1 and "caterer" not in mine[0], lines  # the first statement stands
    assert any("Leo" in line for line in lines), lines  # the son's allergy is his own entry


# (said first, said again later in other words): the team's practice told as "we ..." and as
# "our ...", with the words inflected differently and a few words of emphasis added.
RESTATED = [
    (
        "We deploy on Fridays only after the QA sign-off.",
        "Our deploys happen on Fridays only after the QA sign-off, never before.",
    ),
    (
        "We release on Mondays after the security review.",
        "Our releases happen on Mondays after the security review, never earlier.",
    ),
    (
        "We deploy to Kubernetes on Fridays.",
        "Our deploys to Kubernetes happen on Fridays.",
    ),
    (
        "We moved the standup meeting to Tuesdays at the Berlin office.",
        "Our standup meetings move to Tuesdays at the Berlin office.",
    ),
]
# (the speaker's own fact, another's said later in nearly the same words): never one entry.
SOMEONE_ELSE = [
    ("I'm allergic to peanuts and tree nuts.", "My son Leo is allergic to peanuts and tree nuts."),
    ("I'm allergic to cats and horses.", "My landlord is allergic to cats and horses."),
    ("I teach chemistry at the school in Porto.", "My brother Tomas teaches chemistry in Porto."),
]


# Nearly the same words, not the same fact: another holder with no name to tell them apart
# by, or the same words negated. Folding either pair would tell memory the wrong thing.
NOT_THE_SAME = [
    (
        "I'm severely allergic to shellfish and sesame seeds.",
        "My daughter is severely allergic to shellfish and sesame seeds.",
    ),
    (
        "I eat pork at the family dinners on Sundays.",
        "I don't eat pork at the family dinners on Sundays.",
    ),
    (
        "My wife works as a nurse at the county hospital.",
        "I work as a nurse at the county hospital.",
    ),
]


def test_paraphrased_restatements_merge_and_others_facts_stay_apart(tmp_path: Path) -> None:
    oc = FakeOpenClaw(tmp_path)
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    pairs = RESTATED + SOMEONE_ELSE + NOT_THE_SAME
    for day in (0, 1):
        for n, pair in enumerate(pairs):
            oc.session(
                "main",
                f"s{day}-{n}",
                [("user", pair[day])],
                key=f"agent:main:s{day}-{n}",
                start=start + timedelta(days=day, minutes=n),
                chatType="direct",
            )
        night(tmp_path)  # the restatement meets the first night's entry
    lines = memory_lines(tmp_path)
    for first, again in RESTATED:
        said = [line for line in lines if line.endswith(first) or line.endswith(again)]
        assert len(said) == 1, (first, lines)
        assert said[0].endswith(first), lines  # the first statement stands
    for mine, theirs in SOMEONE_ELSE + NOT_THE_SAME:
        assert any(line.endswith(mine) for line in lines), (mine, lines)
        assert any(line.endswith(theirs) for line in lines), (theirs, lines)


def test_an_entry_merged_away_names_the_entry_it_went_into(tmp_path: Path) -> None:
    """lineage.successors follows a merge to the live entry: what a repeat of a line that a
    lagging MEMORY.md still shows is a recall of. A live key or a key of no entry has none."""
    from dreaming.memory import lineage

    (old,), (new,) = said_by_day(
        tmp_path,
        [
            "My sister Anna lives in Lisbon.",
            "My sister Anna lives in Lisbon and works as an architect.",
        ],
    )
    assert old != new  # the fuller statement replaced the first
    app = App.open(tmp_path, None, env={})
    try:
        with app.engine("main").connect() as conn:
            found = lineage.successors(conn, "main", [old, new, "m:0123456789abcdef"])
    finally:
        app.close()
    assert found == {old: new}


def test_a_supersede_on_the_way_leaves_no_successor(tmp_path: Path) -> None:
    """What a superseded entry said is no longer so: a key replaced on the way to a live
    entry has none (None), even when merges follow; a merge chain leads to its live end."""
    from sqlalchemy import insert

    from dreaming.memory import lineage
    from dreaming.store.statuses import EntryStatus
    from dreaming.store.tables import DECISIONS, ENTRIES

    now = datetime(2026, 3, 1, tzinfo=UTC)
    a, b, c, d, live = (f"m:{n:016x}" for n in range(1, 6))
    app = App.open(tmp_path, None, env={})
    try:
        with app.engine("main").begin() as conn:
            conn.execute(
                insert(ENTRIES).values(
                    agent="main",
                    key=live,
                    text="x",
                    status=EntryStatus.LIVE,
                    created_at=now,
                    updated_at=now,
                )
            )
            for action, target, into in [
                ("merge", a, b),
                ("merge", b, live),
                ("supersede", c, d),
                ("merge", d, live),
            ]:
                conn.execute(
                    insert(DECISIONS).values(
                        agent="main",
                        candidate_key="c:0",
                        action=action,
                        targets=json.dumps([target]),
                        entry_key=into,
                        path="llm",
                        created_at=now,
                    )
                )
            found = lineage.successors(conn, "main", [a, b, c, d, live, "m:00000000000000ff"])
    finally:
        app.close()
    assert found == {a: live, b: live, c: None, d: live}
