"""The statements an entry is made of (`dreaming.ingest.statements`), and what deep keeps of
an entry a later statement replaces in part (`dreaming.phases.deep._remainder`)."""

from __future__ import annotations

import pytest

from dreaming.ingest import slots, statements
from dreaming.phases.deep import _remainder


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        (
            "We deploy with GitHub Actions to Fly.io, and the staging app is checkout-staging.",
            ["We deploy with GitHub Actions to Fly.io", "the staging app is checkout-staging."],
        ),
        (
            "The database is Postgres 15 on RDS, and we use sqlc to generate the queries.",
            ["The database is Postgres 15 on RDS", "we use sqlc to generate the queries."],
        ),
        (
            "My name is Ana and I live in Porto with my partner Rui since 2019.",
            ["My name is Ana", "I live in Porto with my partner Rui since 2019."],
        ),
        # a clause without a subject of its own needs the one before it ...
        ("I live in Leeds, near the park.", ["I live in Leeds, near the park."]),
        ("I like tea and coffee.", ["I like tea and coffee."]),
        ("I live in Leeds, and love it.", ["I live in Leeds, and love it."]),
        # ... unless, said of the same "I" or "we", it is a statement of its own
        ("I live in Leeds and work at Acme Corp.", ["I live in Leeds", "I work at Acme Corp."]),
        (
            "We open at 6am and close at 3pm, and on Mondays we're closed.",
            ["We open at 6am", "We close at 3pm", "on Mondays we're closed."],
        ),
        # a pronoun's statement is no statement alone: it stays with what names it
        (
            "We live in Leeds and she works at Acme and lives in York.",
            ["We live in Leeds", "she works at Acme and lives in York."],
        ),
        # a subject without a determiner, and its verb
        (
            "Our supplier for flour is Shipton Mill, and eggs come from Hilltop Farm.",
            ["Our supplier for flour is Shipton Mill", "eggs come from Hilltop Farm."],
        ),
        # ... or with its verb too, where the verb was left out ("and Xero for the accounts")
        (
            "We use Python 3.11 and poetry for dependencies.",
            ["We use Python 3.11", "We use poetry for dependencies."],
        ),
        (
            "I use Square for payments and Xero for the accounts.",
            ["I use Square for payments", "I use Xero for the accounts."],
        ),
        ("I work at Acme and Globex.", ["I work at Acme and Globex."]),
        # the day and the speaker an entry's wording puts first belong to its first statement
        (
            "2026-03-08 Caroline: I went to a support group and it was so powerful.",
            ["2026-03-08 Caroline: I went to a support group", "it was so powerful."],
        ),
        (
            "The agent: We deploy to Render. The staging app is checkout-staging.",
            ["The agent: We deploy to Render.", "The staging app is checkout-staging."],
        ),
        ("", []),
        ("and, ", []),
    ],
)
def test_an_entry_splits_into_statements_that_stand_on_their_own(
    text: str, parts: list[str]
) -> None:
    assert statements.split(text) == parts


def test_a_statement_reads_as_a_sentence() -> None:
    assert statements.as_sentence("the staging app is checkout-staging") == (
        "The staging app is checkout-staging."
    )
    assert statements.as_sentence("Is it?") == "Is it?"
    assert statements.as_sentence("僕は大阪に引っ越した。") == "僕は大阪に引っ越した。"
    assert statements.body("2026-03-08 Caroline: I went") == "I went"


READ = slots.default_slots().read


@pytest.mark.parametrize(
    ("old", "new", "kept"),
    [
        # a correction names what it corrects; the rest of the entry stays
        (
            "We deploy with GitHub Actions to Fly.io, and the staging app is checkout-staging.",
            "We now deploy to Render instead of Fly.io.",
            ["the staging app is checkout-staging."],
        ),
        # a slot filled anew; the other statement of a slot stays
        (
            "Our prod cluster runs in eu-west-1 and our staging cluster runs in eu-central-1.",
            "We migrated the staging cluster to us-east-2.",
            ["Our prod cluster runs in eu-west-1"],
        ),
        # an appraisal of the old value goes with it, and so does what is no statement
        ("We moved to Leeds last year, the new place is lovely.", "We moved to Bristol.", []),
        ("I live in Leeds with my partner and our two cats.", "We moved to Bristol.", []),
        # replaced as a whole, or not at all: nothing to keep apart
        ("I live in Leeds.", "We moved to Bristol.", []),
        ("My name is Ana and I like tea.", "We moved to Bristol.", []),
    ],
)
def test_what_a_replaced_entry_keeps(old: str, new: str, kept: list[str]) -> None:
    assert _remainder.kept(READ(new), old, READ) == kept


def test_a_slot_is_taken_apart_only_when_its_part_names_nothing_more() -> None:
    new = READ("We moved to Bristol last month.")
    assert not _remainder.separable(
        new, "My name is Ana and I live in Porto with my partner Rui since 2019.", READ
    )
    assert _remainder.separable(new, "My name is Ana and I live in Porto.", READ)
    staging = READ("We migrated the staging cluster to us-east-2.")
    assert _remainder.separable(
        staging,
        "Our prod cluster runs in eu-west-1 and our staging cluster runs in eu-central-1.",
        READ,
    )
    assert not _remainder.separable(staging, "Our staging cluster runs in eu-central-1.", READ)


@pytest.mark.parametrize(
    ("old", "whole"),
    [
        ("I live in Leeds.", True),
        ("I live in Leeds with my partner and our two cats.", True),
        ("I live in Manchester with my husband Tom and our son Arjun, who is 7.", False),
        ("I live in Porto with my partner Rui since 2019.", False),
        ("2026-04-30 I live in Porto with my partner Rui since 2019.", False),
        ("I live in Leeds, and I work at Acme.", True),
        ("I live in Leeds with my wife Ann, and I work at Acme.", False),
    ],
)
def test_a_statement_is_replaced_whole_only_when_it_names_nothing_more(
    old: str, whole: bool
) -> None:
    new = READ("We moved to Bristol and I now work at Globex.")
    assert _remainder.replaceable(new, old, READ) is whole


def test_joined_keeps_an_entry_within_its_limit() -> None:
    assert _remainder.joined("We deploy to Render", ["the app is a-b"], 100) == (
        "We deploy to Render. The app is a-b."
    )
    assert _remainder.joined("We deploy to Render", ["the app is a-b"], 20) == (
        "We deploy to Render"
    )
    # nothing kept: the text as it was, not made a sentence
    assert _remainder.joined("僕は大阪に引っ越した", [], 100) == "僕は大阪に引っ越した"
    assert _remainder.joined("we moved to Bristol", [], 100) == "we moved to Bristol"


def test_a_kept_statement_keeps_its_entrys_day_only_where_it_carries_time() -> None:
    hours = "2026-04-01 We open at 6am and close at 3pm, and Mondays we're closed."
    assert _remainder.kept(READ("We now close at 4pm, not 3pm."), hours, READ) == [
        "We open at 6am",
        "Mondays we're closed.",
    ]
    trip = "2026-04-01 We flew to Lisbon yesterday, and our dog Rex is in Porto."
    assert _remainder.kept(READ("Actually our dog Rex is in Faro, not Porto."), trip, READ) == [
        "2026-04-01 We flew to Lisbon yesterday"
    ]


def test_a_kept_statements_time_is_judged_without_its_day_and_speaker() -> None:
    # "Recently left ..." tells an event; read with "2022-08-06 John:" before it, it did not.
    left = "2022-08-06 John: Recently left my IT job after 3 years."
    assert _remainder._dated_if_timely(left) == left
    assert _remainder._dated_if_timely("2026-04-01 We open at 6am.") == "We open at 6am."
