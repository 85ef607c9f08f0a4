"""REM's diary worth reading: themes ranked by how they recur (sessions and days, the owner's
word over the agent's, how specific the word is), never by the alphabet; small talk is never a
theme; quotes are whole, clean sentences a person said, never a question, and forget still
finds them."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dreaming import runner
from dreaming.cli import cli
from dreaming.forget import MIN_SNIPPET_CHARS
from dreaming.ingest import salience
from dreaming.memory import diary
from tests import backends
from tests.deep_helpers import open_app
from tests.openclaw_builder import FakeOpenClaw

pytestmark = pytest.mark.usefixtures("backend")

START = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
Turns = Sequence[tuple[str, str]]


def state(root: Path, sessions: Sequence[Turns]) -> Path:
    """An OpenClaw folder with one owner session a day, each with the turns given."""
    fake = FakeOpenClaw(root)
    for i, turns in enumerate(sessions):
        sid = f"s-{i:02d}"
        fake.session("main", sid, list(turns), key=f"agent:main:main:{sid}",
                     start=START + dt.timedelta(days=i))  # fmt: skip
    (root / "dreaming.toml").write_text("")
    backends.CURRENT.configure(root)
    return root


def night(root: Path) -> tuple[dict[str, Any], str]:
    """REM's summary after light and REM, and tonight's diary entry."""
    app = open_app(root)
    try:
        results = runner.run(app, ["light", "rem"])
    finally:
        app.close()
    rem = results[0].phase_dicts()["rem"]
    entries = diary.entries((root / "workspace" / "DREAMS.md").read_text())
    return rem, entries[-1].body if entries else ""


def labels(rem: dict[str, Any]) -> list[str]:
    return [t["concept"] for t in rem["themes"]]


def quotes(body: str) -> list[str]:
    """The sentences the entry quotes, one per theme line that has one."""
    found = (re.split(r"; (?:for instance|in my words): ", x) for x in body.splitlines())
    return [parts[1].strip("“”") for parts in found if len(parts) == 2]


def line_of(body: str, label: str) -> str:
    return next(x for x in body.splitlines() if x.startswith(f"- {label}"))


def test_a_concept_of_five_sessions_beats_small_talk_and_a_rarer_one(tmp_path: Path) -> None:
    days: list[Turns] = []
    for i in range(6):
        turns = [("user", "Wow, that's awesome, thanks so much!"), ("assistant", "Amazing!")]
        if i < 5:
            turns.append(("user", f"The zucchini harvest took {i + 2} hours this morning."))
        if i < 2:
            turns.append(("user", "My apricot tree needs pruning before the frost."))
        days.append(turns)
    rem, body = night(state(tmp_path / "s", days))
    found = labels(rem)
    assert found and "zucchini" in found[0], found
    assert any("apricot" in x for x in found[1:]), found
    top = rem["themes"][0]
    assert top["sessions"] == 5 and top["owner_sessions"] == 5 and top["weight"] > 0
    assert "across 5 conversations on 5 days" in line_of(body, found[0])


def test_small_talk_and_dull_words_are_never_themes(tmp_path: Path) -> None:
    chatter = [
        ("user", "Hey! Thanks, that's awesome, I really appreciate it."),
        ("assistant", "Wow, amazing! Happy to help, let me know if you need anything."),
        ("user", "Haha great, sounds good, talk soon!"),
        ("user", "I had an awesome time, thanks for the support."),
        ("assistant", "Let me check the file and get back to you."),
    ]
    days: list[Turns] = [[*chatter, ("user", "Our kayak club paddles the estuary.")]] * 2
    days += [chatter] * 4
    rem, _ = night(state(tmp_path / "s", days))
    small = salience.default_lexicon().smalltalk_words
    for label in labels(rem):
        for word in label.split():
            assert word.casefold() not in small, label
            assert word not in {"let", "check", "file", "get", "back", "time", "really"}, label
    assert any("kayak" in x or "estuary" in x for x in labels(rem)), labels(rem)


def test_ties_go_to_the_measure_then_to_what_was_said_first(tmp_path: Path) -> None:
    # Three concepts, each in the same three sessions on the same three days. The owner said
    # "zeppelin"; the agent alone said "aardvark"; "yodel" and "banjo" the owner too, later.
    days: list[Turns] = [
        [
            ("assistant", "The aardvark exhibit reopens at the museum."),
            ("user", "Our zeppelin model hangs in the hallway."),
            ("user", "Grandpa plays the banjo while we yodel."),
        ]
    ] * 3
    rem, _ = night(state(tmp_path / "s", days))
    found = labels(rem)
    # The owner's before the agent's, though "aardvark" is first in the alphabet and in the
    # transcript; of the owner's, the one said first ("zeppelin" before "banjo").
    assert "zeppelin" in found[0], found
    assert not any("aardvark" in x for x in found[:2]), found
    weights = [t["weight"] for t in rem["themes"]]
    assert weights == sorted(weights, reverse=True)


def test_quotes_are_whole_clean_sentences(tmp_path: Path) -> None:
    raw = (
        "### Epic: Greenhouse **Description:** > ## Problem > The greenhouse heater failed "
        "again on **Monday**. - See [the manual](https://example.com/manual) | a | b | |---|---|"
    )
    days: list[Turns] = [[("user", raw)], [("user", raw)], [("user", raw)]]
    rem, body = night(state(tmp_path / "s", days))
    quote = next(q for q in quotes(body) if "greenhouse" in q.casefold())
    assert quote == "The greenhouse heater failed again on Monday."
    for mark in ("#", "**", ">", "](", "|", "Description", "Epic", "http"):
        assert mark not in quote, (mark, quote)
    assert rem["themes"][0]["related"]


def test_a_question_is_never_quoted(tmp_path: Path) -> None:
    days: list[Turns] = [
        [
            ("user", "**Why does the sourdough starter keep dying?** It smells of vinegar."),
            ("user", "Should I feed the sourdough starter twice a day..."),
        ]
    ] * 2 + [[("user", "I keep my sourdough starter in the fridge over the weekend.")]]
    _, body = night(state(tmp_path / "s", days))
    quoted = quotes(body)
    assert quoted
    for q in quoted:
        assert "?" not in q and not q.startswith("Should"), q
    assert any("sourdough starter in the fridge" in q for q in quoted), quoted


def test_only_the_owner_and_the_agent_are_quoted(tmp_path: Path) -> None:
    sentence = "The quarterly invoice for the lighthouse repairs is attached here."
    fake = FakeOpenClaw(tmp_path / "s")
    for i in range(3):
        fake.session(
            "main",
            f"mail-{i}",
            [("user", sentence)],
            key=f"agent:main:hook:gmail:mail-{i}",
            hookExternalContentSource="gmail",
            start=START + dt.timedelta(days=i),
        )
    (tmp_path / "s" / "dreaming.toml").write_text("")
    backends.CURRENT.configure(tmp_path / "s")
    rem, body = night(tmp_path / "s")
    assert "lighthouse" not in body and not rem["themes"]


def cli_json(root: Path, *args: str) -> Any:
    from dreaming.cli import _forget, _run  # noqa: F401

    result = CliRunner().invoke(
        cli, ["--state-dir", str(root), *args, "--json"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_forget_removes_a_diary_line_quoting_a_cleaned_sentence(tmp_path: Path) -> None:
    # The quote is the sentence without its markdown: no claim of the line spells it so, and
    # forget still finds the diary line that quotes it.
    said = "The **walnut** orchard needs netting before the crows arrive."
    days: list[Turns] = [[("user", said)]] * 3
    root = state(tmp_path / "s", days)
    _, body = night(root)
    cleaned = "The walnut orchard needs netting before the crows arrive."
    assert cleaned in body, body
    report = cli_json(root, "forget", "--agent", "main", "--session", "s-00")
    assert report["counts"]["tombstones"] == 1
    assert cleaned not in (root / "workspace" / "DREAMS.md").read_text()


LINES = [
    "**Why?** It broke the deploy. The staging database is called bluebird and runs in Frankfurt.",
    "- Always run the linter before committing - it catches the import cycles early.",
    "## Plan\nMove the billing cron to Thursday nights. Ask Priya before touching the ledger.",
    'He said "we moved to Bristol last month" and that the office is on Queen Square.',
    "`make test` fails on CI; the fix is to pin the `psycopg` version to 3.2 in pyproject.",
    "私の名前はボブです。毎朝七時にジョギングをしています。MEMORY.md以外の変更を禁ずる。",
    "Thanks, that means a lot! I will call the clinic in Leeds on Monday about the results.",
]


@pytest.mark.parametrize("line", LINES)
def test_every_sentence_a_diary_may_quote_is_one_forget_hunts_for(line: str) -> None:
    """REM quotes only what forget, purging the line, would find in DREAMS.md again: each
    quotable sentence is among the line's snippets (clean sentences of at least
    MIN_SNIPPET_CHARS), so REM need not work the snippets out to check."""
    from dreaming.config import Settings
    from dreaming.forget import needles_of, snippets_of

    assert diary.MIN_QUOTE_CHARS >= MIN_SNIPPET_CHARS
    needles = needles_of(snippets_of([line], Settings()))
    quoted = diary.quotable(line, salience.default_lexicon())
    assert set(quoted) <= set(diary.clean_sentences(line))
    for sentence in quoted:
        assert any(n in sentence for n in needles), sentence


# Markdown marks, numerals, bullets and every kind of space, so the cut-outs below are
# exercised where they decide (line marks, "1. ... 2." lists, runs of whitespace).
_MARKDOWN_ALPHABET = "ab .:)12#>-*•_=|`[]()!<\t\n\r\x0b\x0c\x1c\u00a0\u2003\u3000"


def test_the_shortcuts_of_sentence_splitting_change_nothing() -> None:
    """`diary._blocks` skips a pattern when the text holds no character every match of it
    holds, and `_unmark` folds whitespace with `str.split` rather than `\\s+`: the same
    pieces, on any text."""
    import random

    rnd = random.Random(11)
    for _ in range(30000):
        text = "".join(rnd.choice(_MARKDOWN_ALPHABET) for _ in range(rnd.randint(0, 18)))
        if diary._LINE_MARK.search(text):
            assert diary._MARK_CHARS.search(text), repr(text)
        if diary._NUMBERED.search(text):
            assert "1." in text or "1)" in text, repr(text)
        assert " ".join(text.split()) == re.sub(r"\s+", " ", text).strip(), repr(text)
