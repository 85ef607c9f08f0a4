"""A compact MEMORY.md line (issue #22): the owner implicit, the date only where it carries
time, a short key; our own lines still recognised wherever they come back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dreaming import syntax
from dreaming.ingest import claims
from dreaming.ingest import slots as slots_mod
from dreaming.memory import memory_file as mf
from dreaming.memory.sanitize import entry_text_problems, sanitize_entry_text
from dreaming.phases.deep._likeness import bag, statement
from dreaming.phases.deep._selection import Candidate
from dreaming.phases.deep._wording import attributed, dated

SAID = datetime(2026, 3, 8, 21, 30, tzinfo=UTC)


def candidate(
    text: str, features: str, *, owner: int = 1, agent: int = 0, cid: int = 1
) -> Candidate:
    return Candidate(
        cid, f"c:{cid}", text, frozenset(), 1, 1, owner, agent, SAID, SAID, features, cid
    )


@pytest.mark.parametrize(
    ("text", "features", "entry"),
    [
        # An event, a time word: the day it was said comes first.
        ("I moved to Bristol last week", "event time", "2026-03-08 I moved to Bristol last week."),
        ("we adopted a cat", "event first-person", "2026-03-08 We adopted a cat."),
        # A standing fact, a preference, an instruction: no date, no speaker.
        ("I'm allergic to peanuts", "constraint disclosure", "I'm allergic to peanuts."),
        ("I love green tea", "preference", "I love green tea."),
        # a word that only joins it to what was said before goes
        ("Also my gym is now BasicFit", "fact", "My gym is now BasicFit."),
        ("And I'm now on the payments team", "fact", "I'm now on the payments team."),
        ("Andrea is my sister", "fact", "Andrea is my sister."),
        # and so does a label that only announces it
        ("Heads up: we switched from poetry to uv", "fact", "We switched from poetry to uv."),
        ("Quick update: my manager is now Sofía", "fact", "My manager is now Sofía."),
        ("Update: pickup is now at 3:30", "fact", "Pickup is now at 3:30."),
        ("Big news: I got promoted", "event", "2026-03-08 I got promoted."),
        ("Note: the API key lives in 1Password", "fact", "The API key lives in 1Password."),
        # a label that says what follows is not one of those
        ("Allergies: peanuts and shellfish", "constraint", "Allergies: peanuts and shellfish."),
        (
            "By the way, please use snake_case for function names",
            "instruction",
            "Please use snake_case for function names.",
        ),
        (
            "always run the linter before committing, every morning",
            "instruction time",
            "Always run the linter before committing, every morning.",
        ),
    ],
)
def test_the_owner_is_implicit_and_the_date_stays_where_it_carries_time(
    text: str, features: str, entry: str
) -> None:
    assert attributed(candidate(text, features)) == entry
    assert "the user" not in entry.casefold()


def test_an_agent_only_statement_still_says_so() -> None:
    said = candidate("Your server was moved to Frankfurt last week", "event", owner=0, agent=1)
    assert attributed(said) == "2026-03-08 The agent: Your server was moved to Frankfurt last week."
    undated = candidate("The staging host is called rimazu", "fact", owner=0, agent=1)
    assert attributed(undated) == "The agent: The staging host is called rimazu."
    assert entry_text_problems(attributed(said)) == []


def test_one_utterance_is_dated_when_any_of_its_sentences_carries_time() -> None:
    first = candidate("I got a new job", "disclosure", cid=1)
    second = candidate("I start there next month", "time", cid=2)
    assert attributed(first, [second]) == "2026-03-08 I got a new job. I start there next month."
    assert dated("event") and dated("time names") and not dated("instruction event")
    assert not dated("") and not dated("preference")


@pytest.mark.parametrize(
    "entry",
    [
        "2026-03-08 We moved to Bristol.",
        "2026-03-08 The agent: We moved to Bristol.",
        "The agent: We moved to Bristol.",
        "2026-03-08 — the user: We moved to Bristol.",  # written before
        "The user: We moved to Bristol.",  # written before, undated
        "We moved to Bristol.",
    ],
)
def test_what_an_entry_says_is_read_from_either_form(entry: str) -> None:
    assert statement(entry) == "We moved to Bristol."
    assert bag(entry) == bag("We moved to Bristol.")
    reading = slots_mod.default_slots().read(statement(entry))
    assert reading == slots_mod.default_slots().read("We moved to Bristol.")


def test_a_line_is_about_thirty_characters_of_framing_at_most() -> None:
    text = attributed(candidate("I moved to Bristol last week", "event time"))
    line = mf.render_line(mf.shortest(mf.entry_key(text)), text)
    assert line == f"- {text} <!--{mf.entry_key(text)[:8]}-->\n"
    assert len(line) - len("I moved to Bristol last week.") == 30
    undated = attributed(candidate("I'm allergic to peanuts", "constraint"))
    assert len(mf.render_line(mf.shortest(mf.entry_key(undated)), undated)) - len(undated) == 19


def test_our_new_line_echoed_back_is_recognised() -> None:
    """Invariant 6: a line of MEMORY.md quoted back (its line break a space in the corpus)
    is found with its key, and its key comment is never part of a claim or an entry."""
    text = "2026-03-08 I moved to Bristol last week."
    key = mf.entry_key(text)
    quoted = "Here is what you know: " + mf.render_line(mf.shortest(key), text).strip()
    quoted += " - I'm allergic to peanuts. <!--m:0123456789-->"
    found = [(m["key"], m.group()) for m in syntax.QUOTED_ENTRY_RE.finditer(quoted)]
    assert found == [
        (key[:8], f"- {text} <!--{key[:8]}-->"),
        ("m:0123456789", "- I'm allergic to peanuts. <!--m:0123456789-->"),
    ]
    assert syntax.KeyIndex([key]).find(found[0][0]) == [key]
    for comment in (f"<!--{key[:8]}-->", f"<!-- {key[:10]} -->", f"<!-- {key} -->"):
        assert "m:" not in claims.clean(f"I moved to Bristol {comment} last week")
        assert "m:" not in sanitize_entry_text(f"I moved to Bristol {comment} last week")
        assert entry_text_problems(f"I moved {comment}")
