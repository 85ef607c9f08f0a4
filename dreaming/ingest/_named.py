"""What a claim names: a person or a thing by its proper name, and a number (in digits or
in words). Both make a claim specific (`salience.Feature.NAMES`, `NUMBERS`); the name of
whom a line is said to ("Hey Gina", "Thanks, Mel!") names nobody's fact."""

from __future__ import annotations

import re
from collections.abc import Sequence

from dreaming.ingest.cues import Text

_KATAKANA = re.compile(r"[\u30a0-\u30ffー]{2,}")
_DIGIT = re.compile(r"\d")
# A number said in words counts as one in digits ("two days ago", "three kids"); "one" is
# mostly a pronoun ("one of my favourites"), so it does not.
_NUMBER_WORDS = re.compile(
    r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    r"fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
    r"eighty|ninety|hundred|thousand|dozen)\b",
    re.IGNORECASE,
)
_NUMBER_NAMES = frozenset(
    _NUMBER_WORDS.pattern.removeprefix(r"\b(?:").removesuffix(r")\b").split("|")
)


def says_a_number(body: str, text: Text) -> bool:
    """A number in digits or in words. An ASCII text's words are its whole \\w runs, which
    is what the regex's word boundaries mark: looked up among them (the regex scans every
    position); other scripts' words are cut finer than \\w runs, so the regex decides."""
    if _DIGIT.search(body):
        return True
    if text.ascii:
        return not _NUMBER_NAMES.isdisjoint(text.words)
    return _NUMBER_WORDS.search(body) is not None


_NOT_NAMES = frozenset(
    [
        "I",
        "I'm",
        "I've",
        "I'd",
        "I'll",
        "OK",
        "Ok",
        "The",
        "A",
        "An",
        "This",
        "That",
        "These",
        "Those",
        "It",
        "It's",
        "My",
        "Our",
        "We",
        "You",
        "Your",
        "He",
        "She",
        "They",
        "Their",
        "His",
        "Her",
        "Its",
        "Hey",
        "Hi",
        "Hello",
        "Thanks",
        "Thank",
        "Wow",
        "Yes",
        "No",
        "Oh",
        "Well",
        "So",
        "But",
        "And",
        "Or",
        "If",
        "When",
        "What",
        "Why",
        "How",
        "Where",
        "Who",
        "Let",
        "Just",
        "Also",
        "Then",
        "Now",
        "Sure",
        "Great",
        "Cool",
        "Nice",
        "Awesome",
        "Love",
        "Please",
        "Here",
        "There",
        "Thankfully",
        "Unfortunately",
        "Luckily",
        "Honestly",
        "Plus",
        "Anyway",
        "Btw",
        "BTW",
        "FYI",
        "OMG",
        "LOL",
        "TBH",
        "IMO",
        "PS",
    ]
)

# Whom a line is said to is no fact in it: a name after a greeting ("Hey Gina, ..."), a name
# opening the line before a comma ("Jolene, since we talked ..."), or closing an exclamation
# or a line to the listener (", Gina!", "Have faith in yourself, Jon.").
_GREETED = re.compile(
    r"^(?:(?:hey|hi|hello|hiya|yo|oh|wow|aw+|thanks|thank you|congrats|dear|sorry|yeah|yes|"
    r"haha|ha|ok|okay|well)[,!.]*\s+)+([A-Z][a-z]+)\b",
    re.IGNORECASE,
)
_OPENING = re.compile(r"^([A-Z][a-z]+)\s*,")
_CLOSING = re.compile(r",\s*([A-Z][a-z]+)\s*([!?.]*)\s*\W*$")
_LISTENER = re.compile(r"\b(?:you|your|yours|yourself)\b", re.IGNORECASE)


def _vocatives(text: str) -> frozenset[str]:
    """The names `text` is said to (see _GREETED, _OPENING, _CLOSING)."""
    found = set()
    for m in (_GREETED.match(text), _OPENING.match(text)):
        if m is not None and m.group(1)[:1].isupper():
            found.add(m.group(1))
    end = _CLOSING.search(text)
    if end is not None and ("!" in end.group(2) or "?" in end.group(2) or _LISTENER.search(text)):
        found.add(end.group(1))
    return frozenset(found)


def says_a_name(text: str, words: Sequence[str]) -> bool:
    """A proper noun: a capitalised word past the first (not a sentence opener such as "The"),
    an acronym (LGBTQ, MCP), or a katakana word (Japanese names and loanwords). The name of
    the listener ("Hey Gina", "Thanks, Mel!") names nobody's fact."""
    called: frozenset[str] | None = None  # looked for once a word could be a name
    for w in words[1:]:
        if w[:1].isupper() and w not in _NOT_NAMES and (w[1:].islower() or w.isupper()):
            if called is None:
                called = _vocatives(text) if text.isascii() else frozenset()
            if w not in called:
                return True
    if words and len(words[0]) > 1 and words[0].isupper() and words[0] not in _NOT_NAMES:
        return True
    return not text.isascii() and _KATAKANA.search(text) is not None
