"""Cue lists matched fast: the machinery salience reads a claim's text with. A cue that is a
finite set of phrases is looked up among the claim's words; the rest stay one regex."""

from __future__ import annotations

import re
import re._constants as _c  # type: ignore[import-not-found]
import re._parser as _sre  # type: ignore[import-not-found]
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from dreaming.ingest import claims as claims_mod

_PLAIN = re.compile(r"[\w' ]+")
MAX_GRAM = 5  # literal cues of up to this many words are looked up, not searched for
MAX_EXPANSION = 512  # literal forms one cue may expand to before it stays a regex


def _expand(pattern: str) -> tuple[bool, list[str]] | None:
    """The finite set of strings a simple cue matches ("don'?t (?:touch|edit)" -> four), and
    whether it is anchored at the start; None when it is not that simple (\\w+, \\d, ...)."""
    if _PLAIN.fullmatch(pattern):
        return False, [pattern]  # most cues: a plain word or phrase, no parsing needed
    if _never_expands(pattern):
        return None  # as the parse would find, for a fraction of its cost
    return _parsed_forms(pattern)


def _parsed_forms(pattern: str) -> tuple[bool, list[str]] | None:
    """`_expand` by Python's own parse of the pattern."""
    try:
        tree = list(_sre.parse(pattern))
    except re.error:
        return None
    anchored = bool(tree) and tree[0] == (_c.AT, _c.AT_BEGINNING)
    found = _forms(tree[1:] if anchored else tree)
    return None if found is None else (anchored, found)


# Escapes that match a class or a place, never one character: outside a class, and inside.
_NOT_A_CHARACTER = frozenset("bBwWdDsSAZ")
_CLASS_ESCAPES = frozenset("wWdDsS")
_ASSERTIONS = ("(?<", "(?=", "(?!")


def _never_expands(pattern: str) -> bool:
    """Whether a cue holds what `_forms` never expands: an unescaped `.`, `*`, `+` or `$`, a
    class escape (\\w, \\d, \\s, ...) or a boundary (\\b), or a lookaround. Half the
    lexicon's regex cues are such; parsing each (Python's parser is Python) only to find so
    was a third of building the lexicon, which a light run pays at start. False says
    nothing: the parse decides. So does any other `(?` construct (flags, which may make
    the rest verbose; a comment; a named group), and a `^` past the start, which the parser
    may lift to the front ("^foo|^bar" is anchored)."""
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            escaped = pattern[i + 1 : i + 2]
            if escaped in (_CLASS_ESCAPES if in_class else _NOT_A_CHARACTER):
                return True
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 2 if pattern.startswith("[^", i) else 1
            if pattern.startswith("]", i):
                i += 1  # a "]" first in a class is one of its characters
            continue
        elif c == "(" and pattern.startswith("(?", i):
            if pattern.startswith(_ASSERTIONS, i):
                return True
            if not pattern.startswith("(?:", i):
                return False  # flags, a comment, a named group: the parse decides
        elif c in ".*+$":
            return True
        i += 1
    return False


def _forms(items: Sequence[Any]) -> list[str] | None:
    out = [""]
    for op, arg in items:
        if op is _c.LITERAL:
            alts = [chr(arg)]
        elif op is _c.IN and all(o is _c.LITERAL for o, _ in arg):
            alts = [chr(v) for _, v in arg]
        elif op is _c.SUBPATTERN:
            sub = _forms(arg[-1])
            if sub is None:
                return None
            alts = sub
        elif op is _c.BRANCH:
            branches = [_forms(b) for b in arg[1]]
            if any(b is None for b in branches):
                return None
            alts = [x for b in branches if b is not None for x in b]
        elif op is _c.MAX_REPEAT and arg[0] == 0 and arg[1] == 1:
            sub = _forms(arg[2])
            if sub is None:
                return None
            alts = ["", *sub]
        else:
            return None
        out = [o + a for o in out for a in alts]
        if len(out) > MAX_EXPANSION:
            return None
    return out


_ESCAPE_OR_TEXT = re.compile(r"\\.|[^\\]+", re.DOTALL)


def _fold(pattern: str) -> str:
    """A cue lower-cased as claims are, its escapes kept as written: casefolding `\\S`
    would make it `\\s`, the opposite class."""
    return _ESCAPE_OR_TEXT.sub(lambda m: m[0] if m[0][0] == "\\" else m[0].casefold(), pattern)


def _words_of(text: str) -> tuple[str, ...]:
    # The same words claims.words finds ("don't" is "don", "t"), lower-cased, so a cue and a
    # claim are cut into words the same way.
    return tuple(w.casefold() for w in claims_mod.words(text.replace("’", "'")))


class Cues:
    """One cue list, matched fast (`_Matcher`), made the first time it is asked: building the
    lexicon's lists is ~40 ms of a process's start, and a process builds only the lists it
    reads (a light run never reads the headings' lists, which place entries in MEMORY.md; a
    short run seldom reaches every list). A lexicon with the settings' own cues builds every
    list at once (`salience.Lexicon.build`), so a cue that compiles alone but not beside the
    others fails there, as it always did."""

    def __init__(self, words: Sequence[str], cjk: Sequence[str] = ()) -> None:
        self._words, self._cjk = tuple(words), tuple(cjk)

    def hit(self, text: Text) -> bool:
        return self.build()(text)

    def build(self) -> Callable[[Text], bool]:
        """Expand and compile the list now (a `re.error` of a pattern that compiles alone but
        not beside the others is raised here). The matcher's own method then stands in for
        `hit` on the instance (an attribute of the instance is found before the class's
        function), so every later call goes straight to it."""
        matcher = _Matcher(self._words, self._cjk)
        self.hit = matcher.hit  # type: ignore[method-assign]
        return matcher.hit

    @property
    def built(self) -> bool:
        return "hit" in vars(self)


_T = TypeVar("_T")


def build_all(holder: _T) -> _T:
    """`holder` (a lexicon) with every cue list it holds built now (`Cues.build`), those in
    tuples too (its groups): a lexicon with the settings' own cues is, so that one which
    compiles alone but not beside the built-in ones fails before any claim is read, as it
    did when every list was built with the lexicon."""
    pending: list[object] = list(vars(holder).values())
    while pending:
        value = pending.pop()
        if isinstance(value, Cues):
            value.build()
        elif isinstance(value, tuple):
            pending.extend(value)
    return holder


class _Matcher:
    """Python's regex engine tries every alternative at every position, so a list of a
    hundred phrases costs ~100 us a claim as one pattern. Here each cue that is a finite set
    of phrases becomes those phrases, looked up by the claim's words (anchored ones: its
    first words); the rest stay one regex (few of them)."""

    __slots__ = (
        "anchor_starts",
        "anchored",
        "cjk",
        "head",
        "longest_anchor",
        "phrases",
        "regex",
        "singles",
        "starts",
    )

    def __init__(self, words: Sequence[str], cjk: Sequence[str] = ()) -> None:
        literal: set[tuple[str, ...]] = set()
        anchored: set[tuple[str, ...]] = set()
        patterns: list[str] = []
        for raw in words:
            p = _fold(raw).strip()
            expanded = _expand(p) if p else None
            if expanded is None:
                if p:
                    patterns.append(p)
                continue
            start, forms = expanded
            phrases = {_words_of(f) for f in forms}
            # A cue whose punctuation matters ("sure, ") only keeps its words: a claim's
            # words are compared, and "sure" leading a claim is what it means anyway.
            if any(not ws or len(ws) > MAX_GRAM for ws in phrases):
                patterns.append(p)
                continue
            if start:
                anchored |= phrases
            else:
                literal |= phrases
        # A one-word cue is looked up among the claim's words, a longer one only where the
        # claim holds its first two words in a row: no claim's n-grams are built (that cost
        # a fifth of an assessment), and most claims hold no longer cue's first word.
        self.singles = frozenset(ws[0] for ws in literal if len(ws) == 1)
        longer: dict[str, dict[str, list[tuple[str, ...]]]] = {}
        for ws in sorted(literal):
            if len(ws) > 1:
                longer.setdefault(ws[0], {}).setdefault(ws[1], []).append(ws)
        # first word -> second word -> the phrases they start
        self.phrases = {
            first: {second: tuple(found) for second, found in seconds.items()}
            for first, seconds in longer.items()
        }
        self.starts = frozenset(longer)
        self.anchored = frozenset(anchored)
        self.anchor_starts = frozenset(ws[0] for ws in anchored)
        self.longest_anchor = max((len(a) for a in anchored), default=0)
        # Patterns anchored at the start are tried there only (`match`), the rest everywhere.
        self.head = _compile([p for p in patterns if p.startswith("^")])
        self.regex = _compile([p for p in patterns if not p.startswith("^")])
        self.cjk = re.compile("|".join(f"(?:{c})" for c in cjk)) if cjk else None

    def hit(self, text: Text) -> bool:
        words = text.words
        if self.singles and not self.singles.isdisjoint(words):
            return True
        if self.starts and not self.starts.isdisjoint(words):
            phrases = self.phrases
            for i, word in enumerate(words[:-1]):  # a phrase's second word follows its first
                second = phrases.get(word)
                if second is not None:
                    for phrase in second.get(words[i + 1], ()):
                        if words[i : i + len(phrase)] == phrase:
                            return True
        if words and words[0] in self.anchor_starts:
            anchored = self.anchored
            for k in range(1, min(self.longest_anchor, len(words)) + 1):
                if words[:k] in anchored:
                    return True
        if self.head is not None and self.head.match(text.lower):
            return True
        if self.regex is not None and self.regex.search(text.lower):
            return True
        return self.cjk is not None and not text.ascii and self.cjk.search(text.raw) is not None


def _compile(patterns: Sequence[str]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    anchored = [p[1:] for p in patterns if p.startswith("^")]
    rest = [p for p in patterns if not p.startswith("^")]
    parts = []
    if anchored:
        parts.append(f"^(?:{'|'.join(anchored)})")
    if rest:
        # A cue is a whole word or phrase ("cat" never inside "category"); a cue that ends
        # in punctuation or space ("sure, ") needs no boundary after it.
        parts.append(rf"(?<![\w'])(?:{'|'.join(rest)})(?:(?<=[^\w'])|(?![\w']))")
    return re.compile("|".join(parts))


@dataclass(frozen=True, slots=True)
class Text:
    """A claim prepared once for every cue list: lower-cased, and its words."""

    raw: str
    lower: str
    ascii: bool
    words: tuple[str, ...]

    @classmethod
    def of(cls, raw: str, words: Sequence[str] | None = None) -> Text:
        found = tuple(w.casefold() for w in words) if words is not None else _words_of(raw)
        # Curly apostrophes as straight ones, as the words are: cues are written with "'".
        lower = raw.casefold().replace("’", "'")
        return cls(raw, lower, raw.isascii(), found)
