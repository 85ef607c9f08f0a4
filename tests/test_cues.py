"""Cue lists (`dreaming.ingest.cues`): a cue that is a finite set of phrases is expanded to
them; the quick test that skips parsing the others must never skip one that expands."""

from __future__ import annotations

import re
import tomllib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import dreaming.ingest.cues as cues

LEXICON = Path(cues.__file__).with_name("lexicon.toml")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def lexicon_cues() -> list[str]:
    return [p.casefold().strip() for p in _strings(tomllib.loads(LEXICON.read_text()))]


def test_the_quick_test_skips_only_cues_the_parse_does_not_expand() -> None:
    skipped = expanded = 0
    for cue in lexicon_cues():
        if cues._PLAIN.fullmatch(cue):
            continue
        if cues._never_expands(cue):
            skipped += 1
            assert cues._parsed_forms(cue) is None, cue
        expanded += cues._expand(cue) is not None
        assert cues._expand(cue) == cues._parsed_forms(cue), cue
    # The lexicon holds both kinds: the test is not vacuous.
    assert skipped > 50 and expanded > 50


def test_the_quick_test_reads_escapes_and_classes_as_the_parser_does() -> None:
    never = cues._never_expands
    assert never(r"\bfoo") and never(r"work\w*") and never("a.b") and never("ends$")
    assert never("(?<!it )is") and never(r"(?:^|\s)so") and never("[a-z]+")
    # A character, not a class or a place: these are left to the parse, which expands them.
    for cue in (r"e\.g", "[.]x", r"[\b]", "[]a]b", "[^.]", "don'?t (?:touch|edit)", "^let me"):
        assert not never(cue), cue
    # What the parser may still expand is left to it: a "^" it lifts to the front, global
    # flags (verbose ones hide a "." or "#" in a comment), a comment, a named group.
    for cue in ("^foo|^bar", "(?:^foo|^bar)", "(?i)^remember", "remember (?#note.)that"):
        assert not never(cue) and cues._expand(cue) == cues._parsed_forms(cue) is not None, cue
    assert not never("(?x) call me  # name.") and not never("(?P<n>a)b")
    assert cues._expand(r"e\.g") == (False, ["e.g"])
    assert cues._expand("don'?t (?:touch|edit)") == (
        False,
        ["dont touch", "dont edit", "don't touch", "don't edit"],
    )


_PIECES = st.sampled_from(
    [
        *"ab '-.*+?$^|()[]{}\\,1",
        *(r"\b", r"\w", r"\d", r"\s", r"\.", "(?:", "(?<!", "(?=", "(?!", "[^", "(?P<n>", "{2}"),
        *("(?i)", "(?x)", "(?#", "|^", "(?:^", "#", "\n"),
    ]
)


@settings(max_examples=5000, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_the_quick_test_never_skips_a_pattern_that_expands(pattern: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "[[": a possible nested set
        try:
            re.compile(pattern)
        except re.error:
            return  # the parse gives None too, and so does the quick test or the parse after it
        if cues._never_expands(pattern):
            assert cues._parsed_forms(pattern) is None, pattern
        assert cues._expand(pattern) == (
            (False, [pattern]) if cues._PLAIN.fullmatch(pattern) else cues._parsed_forms(pattern)
        )


def test_a_cue_is_lower_cased_but_its_escapes_are_not() -> None:
    # casefold would turn \S into \s (the opposite class) and \W into \w
    listed = cues.Cues([r"host is (?=\S*\d)", r"Code\W+Red"])
    assert listed.hit(cues.Text.of("The host is db-3"))
    assert not listed.hit(cues.Text.of("The host is  nice 3"))
    assert listed.hit(cues.Text.of("CODE - red alert")) and not listed.hit(cues.Text.of("codered"))


def test_a_list_is_built_the_first_time_it_is_read() -> None:
    listed = cues.Cues(["sure thing", r"\bbaz\w*", "^let me"], ["承知"])
    assert "hit" not in vars(listed)  # nothing expanded or compiled yet
    assert listed.hit(cues.Text.of("That is a sure thing."))
    assert "hit" in vars(listed)  # the matcher answers from now on
    assert listed.hit(cues.Text.of("Bazooka time")) and listed.hit(cues.Text.of("Let me see"))
    assert listed.hit(cues.Text.of("承知しました")) and not listed.hit(cues.Text.of("nothing"))


def test_assessing_a_claim_builds_none_of_the_heading_lists() -> None:
    from dreaming.ingest import salience

    lexicon = salience.Lexicon.build()
    salience.assess("I moved to Lisbon in 2019 and I am allergic to peanuts.", lexicon)
    assert lexicon.groups and all("hit" not in vars(c) for _, c in lexicon.groups)
    assert salience.group_of("I am allergic to peanuts.", lexicon)  # built when placed
    assert any("hit" in vars(c) for _, c in lexicon.groups)


def test_preparing_a_lexicon_builds_the_lists_an_assessment_reads_once() -> None:
    from dreaming.ingest import salience

    lexicon = salience.Lexicon.build()
    salience.assess("Remember that I moved to Lisbon in 2019.", lexicon)
    kept = {name: c.hit for name, c in vars(lexicon).items() if getattr(c, "built", False)}
    assert kept  # the assessment built some lists, not all of them
    assert not all(c.built for c in vars(lexicon).values() if isinstance(c, cues.Cues))
    assert lexicon.prepare() is lexicon
    lists = [c for c in vars(lexicon).values() if isinstance(c, cues.Cues)]
    assert all(c.built for c in lists)
    # A list built before keeps its matcher; the headings' lists are left for placing.
    assert all(getattr(lexicon, name).hit == hit for name, hit in kept.items())
    assert lexicon.groups and not any(c.built for _, c in lexicon.groups)
    assert salience.assess("Never page me after nine.", lexicon).features


def test_a_lexicon_with_the_settings_cues_builds_every_list_at_once() -> None:
    """A cue that compiles alone but not beside the built-in ones (global flags, not at the
    start once joined) fails when the lexicon is built, before any claim is read."""
    import pytest

    from dreaming.ingest import salience

    with pytest.raises(re.error, match="global flags"):
        salience.Lexicon.build({"instruction": [r"(?i)\bfoo\w*"]})
    lexicon = salience.Lexicon.build({"instruction": ["never page me"]})
    assert all("hit" in vars(c) for c in vars(lexicon).values() if isinstance(c, cues.Cues))
    assert lexicon.groups and all("hit" in vars(c) for _, c in lexicon.groups)
    assert salience.assess("Never page me after nine.", lexicon).features


# A small vocabulary, so phrases and claims share words and overlap often.
_VOCAB = [
    "i",
    "my",
    "me",
    "we",
    "the",
    "a",
    "call",
    "never",
    "page",
    "dog",
    "s",
    "t",
    "don",
    "café",
    "日本",
]
_PHRASE = st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=cues.MAX_GRAM)


def _said(phrases: list[list[str]], claim: list[str], anchored: bool) -> bool:
    """What a list of plain phrases means: one of them is a run of the claim's words (at its
    start, for an anchored list)."""
    runs = {
        tuple(claim[i : i + n])
        for i in range(1 if anchored else len(claim))
        for n in range(1, len(claim) - i + 1)
    }
    return any(tuple(p) in runs for p in phrases)


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(_PHRASE, min_size=1, max_size=8),
    st.lists(st.sampled_from(_VOCAB), max_size=12),
    st.booleans(),
)
def test_a_phrase_cue_hits_exactly_the_claims_holding_its_words_in_a_row(
    phrases: list[list[str]], claim: list[str], anchored: bool
) -> None:
    listed = cues.Cues([("^" if anchored else "") + " ".join(p) for p in phrases])
    text = " ".join(w.capitalize() if i % 3 == 0 else w for i, w in enumerate(claim))
    assert listed.hit(cues.Text.of(text)) == _said(phrases, claim, anchored), (phrases, text)
