"""claims.sentences() undoes a split after an abbreviation by looking at the tail of the text
before it only; these pin its results on tricky abbreviations (as they were when the whole
text was searched), and check the tail search against the whole-text one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dreaming.ingest.claims import _ABBREVIATION, _ends_in_abbreviation, sentences

PINNED = [
    ("Use a tool, e.g. ripgrep. It is fast.", ["Use a tool, e.g. ripgrep.", "It is fast."]),
    ("I met Dr. Smith. He was kind.", ["I met Dr. Smith.", "He was kind."]),
    ("See approx. 5 items. Then stop.", ["See approx. 5 items.", "Then stop."]),
    ("The U.S. team won. Great.", ["The U.S. team won.", "Great."]),
    ("I live in the U.S. Next year too.", ["I live in the U.S. Next year too."]),
    ("I like cats etc. Dogs too.", ["I like cats etc. Dogs too."]),
    (
        "Mr. Mrs. Ms. Smith went home. Then slept.",
        ["Mr. Mrs. Ms. Smith went home.", "Then slept."],
    ),
    ("Visit St. Louis. It is nice.", ["Visit St. Louis.", "It is nice."]),
    ("No. 5 is mine. Yours is 6.", ["No. 5 is mine.", "Yours is 6."]),
    ("I said no. Then I left.", ["I said no. Then I left."]),
    # a word character before the abbreviation: no word boundary, so a sentence ends there
    ("Bigdr. Test it. Done.", ["Bigdr.", "Test it.", "Done."]),
    ("xapprox. next one. last.", ["xapprox.", "next one.", "last."]),
    ("5Dr. Who is here. Yes.", ["5Dr.", "Who is here.", "Yes."]),
    ("éDr. Who is here. Yes.", ["éDr.", "Who is here.", "Yes."]),
    ("A.Dr. b. c.", ["A.Dr. b.", "c."]),
    ("(Dr. Smith) said hi. Bye.", ["(Dr. Smith) said hi.", "Bye."]),
    (
        "Ask Prof. Lee, i.e. the chair. She decides.",
        ["Ask Prof. Lee, i.e. the chair.", "She decides."],
    ),
    (
        "Acme Inc. Their office is in Leeds. We go there.",
        ["Acme Inc. Their office is in Leeds.", "We go there."],
    ),
    ("Acme Ltd.   Then more text.  And more.", ["Acme Ltd. Then more text.", "And more."]),
    ("It is ſt. Here it is. Fine.", ["It is ſt. Here it is.", "Fine."]),  # ſ folds to s
    ("Cats vs. dogs. Dogs win.", ["Cats vs. dogs.", "Dogs win."]),
    ("E.G. this one. And I.E. that one.", ["E.G. this one.", "And I.E. that one."]),
    ("He is Sr. Now he is old. Ok.", ["He is Sr. Now he is old.", "Ok."]),
    ("Dr. X. Then Y.", ["Dr. X.", "Then Y."]),
    ("etc.. Next one. Ok.", ["etc..", "Next one.", "Ok."]),
    ("We moved approx.\nTo Bristol. Nice.", ["We moved approx. To Bristol.", "Nice."]),
    (
        "Call Dr. Smith! He knows. Also Dr. Jones? Maybe.",
        ["Call Dr. Smith!", "He knows.", "Also Dr. Jones?", "Maybe."],
    ),
    ("1. Ask Dr. Smith 2. Book approx. 3 rooms", ["", "Ask Dr. Smith", "Book approx. 3 rooms"]),
    ("The co. Ltd. inc. all merged. Really.", ["The co. Ltd. inc. all merged.", "Really."]),
]


@pytest.mark.parametrize(("text", "expected"), PINNED, ids=[t for t, _ in PINNED])
def test_sentences_after_abbreviations_are_pinned(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


_PIECES = st.sampled_from(
    [
        "approx",
        "e.g",
        "i.e",
        "U.S",
        "etc",
        "Dr",
        "mrs",
        "ſt",
        "No",
        "x",
        "5",
        "é",
        " ",
        ".",
        "(",
        "-",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=8).map("".join))
def test_the_tail_search_finds_what_a_whole_search_finds(text: str) -> None:
    assert _ends_in_abbreviation(text) == (_ABBREVIATION.search(text) is not None)


# -- the cheap checks before the regexes find what the regexes alone find ----------------------

_SPLIT_PIECES = st.sampled_from(
    [
        "a", "b c", " ", "  ", "\n", "\t", "\u00a0", "\u3000", ".", "!", "?", ";", "；", "。",
        "！", "？", "•", "*", "-", '"', "'", "”", "’", ")", "]", "」", "』", "）", "`", "1",
        "2", "1. ", "2. ", "1) ", "2) ", " - ", "e.g.", "Dr.", "; ask ", "; then ", "`x; y`",
        "漢字", "カナ", "é",
    ]
)  # fmt: skip


def _reference_split(text: str) -> list[str]:
    """`_split` as it was before its shortcuts: the one regex, code spans aside."""
    from dreaming.ingest.claims import _CODE_SPAN, _SENTENCE_END

    spans = [m.span() for m in _CODE_SPAN.finditer(text)] if "`" in text else []
    if not spans:
        return _SENTENCE_END.split(text)
    parts, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        if not any(a < m.start() < b for a, b in spans):
            parts.append(text[start : m.start()])
            start = m.end()
    return [*parts, text[start:]]


@settings(max_examples=3000, deadline=None)
@given(st.lists(_SPLIT_PIECES, max_size=24).map("".join))
def test_the_split_shortcuts_change_no_split(text: str) -> None:
    from dreaming.ingest.claims import _NUMBERED_LIST, _split

    assert _split(text) == _reference_split(text)
    # a numbered list is looked for only where a "1." or "1)" is: none is missed that way
    if _NUMBERED_LIST.search(text):
        assert "1." in text or "1)" in text
