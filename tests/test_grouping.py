"""MEMORY.md's groups are data (`lexicon.toml`'s `[[groups]]`): order, cues and headings."""

from __future__ import annotations

import pytest

from dreaming.config_cues import SalienceSettings
from dreaming.ingest import grouping, salience
from dreaming.memory import memory_file as mf
from dreaming.memory import memory_sync


# An entry states a preference of someone named: "likes" is a heading cue, not a scoring one.
@pytest.mark.parametrize(
    ("text", "group"),
    [
        ("2026-03-08 — the user: never change files other than MEMORY.md.", "instructions"),
        ("Call me Sam from now on.", "instructions"),
        ("The user: don't push to main before you run the tests.", "instructions"),
        ("日本語で答えること", "instructions"),
        ("The user likes green tea.", "preferences"),
        ("Anna hates flying.", "preferences"),
        ("The user's favourite band is Muse.", "preferences"),
        ("ユーザーは猫が好き", "preferences"),
        ("The user works at ACME.", "work"),
        ("The staging server is called rimazu.", "work"),
        ("2026-02-10 We migrated the staging cluster to us-east-2 yesterday.", "work"),
        ("Our prod cluster runs in eu-west-1.", "work"),
        ("I'm Ana, a backend engineer at Acme.", "work"),
        ("2026-02-03 We switched from poetry to uv for dependencies.", "work"),
        ("ユーザーの会社は東京にある", "work"),
        ("2023-05-08 — the user: I went to a LGBTQ support group yesterday.", "people"),
        ("The user's sister Anna lives in Lisbon.", "people"),
        # an alternative alone is a change, not a taste; with a taste it is one
        ("We now deploy to Render instead of Fly.io.", "work"),
        ("Eggs now come from Meadow Farm instead of Hilltop.", "people"),
        ("I prefer tea instead of coffee.", "preferences"),
        ("My favourite is tea rather than coffee.", "preferences"),
    ],
)
def test_group_of(text: str, group: str) -> None:
    assert salience.group_of(text) == group


def test_a_user_cue_in_settings_changes_the_heading(tmp_path: object) -> None:
    text = "The user is vegetarian."
    assert salience.group_of(text) == "people"
    extra = SalienceSettings(preference=("vegetarian",)).extra()
    lexicon = salience.lexicon_for(extra)
    assert salience.group_of(text, lexicon) == "preferences"
    # The memory files lay entries out by the agent's effective lexicon.
    files = memory_sync.Files(
        memory=tmp_path / "M.md",  # type: ignore[operator]
        archive=tmp_path / "A.md",  # type: ignore[operator]
        salience_extra=extra,
    )
    assert files.lexicon is lexicon
    out = mf.apply_entries(mf.parse(""), [(mf.entry_key(text), text)], files.group_of).render()
    assert out.startswith(mf.render_heading("preferences"))


def test_group_order_comes_from_the_data() -> None:
    data = grouping.default_groups()
    assert mf.GROUPS == grouping.GROUPS == tuple(g.name for g in data)
    assert mf.GROUPS == ("instructions", "people", "work", "preferences")
    # Tried by rank, the fallback last; rendered in the tables' order.
    assert [g.name for g in grouping.by_rank(data)] == [
        "instructions",
        "preferences",
        "work",
        "people",
    ]
    entries = [(mf.entry_key(t), t) for t in ("Anna is my friend.", "Never push to main.")]
    out = mf.apply_entries(mf.parse(""), entries).render()
    assert out.index("## Instructions") < out.index("## People")


def test_adding_a_group_is_one_lexicon_entry() -> None:
    tables = [
        *(
            {
                "name": g.name,
                "rank": g.rank,
                "cues": list(g.cues),
                "checks": list(g.checks),
                "unless": list(g.unless),
            }
            if not g.fallback
            else {"name": g.name}
            for g in grouping.default_groups()
        ),
        {"name": "health", "rank": 0, "cues": ["health"]},
    ]
    groups = grouping.parse(tables)
    lexicon = salience.Lexicon.build({"health": ["allergic to", "doctor"]}, groups)
    assert salience.group_of("The user is allergic to peanuts.", lexicon) == "health"
    assert salience.group_of("Never push to main.", lexicon) == "instructions"
    assert [g.name for g in groups][-1] == "health"


def test_the_group_data_is_checked() -> None:
    with pytest.raises(ValueError, match="exactly one group"):
        grouping.parse([{"name": "a", "cues": ["x"]}])
    with pytest.raises(ValueError, match="unknown checks"):
        grouping.parse([{"name": "a"}, {"name": "b", "checks": ["nope"]}])
    with pytest.raises(ValueError, match="twice"):
        grouping.parse([{"name": "a"}, {"name": "a", "cues": ["x"]}])
