"""REM's tally works out phrases, co-occurring concepts and surface forms only for the
concepts asked about (the themes): each answer must be what counting every claim's up
front gives, ties included. The reference below is that up-front count, as REM did it."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dreaming.ingest import claims as claims_mod
from dreaming.ingest import salience
from dreaming.phases._rem_themes import _NEGATING, Evidence, Recurrence, Specificity, Tally

_WORDS = (
    "Peanuts peanuts allergic allergy to not no the a Lisbon lisbon moved move code quality "
    "review reviews tui renderer renderers Kabeto kabeto staging bucket I my we never and"
).split()

_sentence = st.lists(st.sampled_from(_WORDS), min_size=2, max_size=9).map(
    lambda ws: " ".join(ws) + "."
)
_claim = st.tuples(
    st.lists(_sentence, min_size=1, max_size=3).map(" ".join),
    st.lists(st.sampled_from(["s1", "s2", "s3", "s4"]), min_size=1, max_size=3),
    st.sampled_from(["owner", "agent"]),
)


class Eager:
    """Phrases, co-occurrence and surface forms counted over every claim, as they came."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.phrases: dict[tuple[str, str], Recurrence] = defaultdict(Recurrence)
        self.cooccur: dict[str, Counter[str]] = defaultdict(Counter)
        self.forms: dict[str, Counter[str]] = defaultdict(Counter)
        self.phrase_forms: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for claim in tally._claims:
            words = [t for t in dict.fromkeys(t for ts in claim.tokens for t in ts)]
            words = [w for w in words if w in claim.concepts]
            for w in words:
                self.cooccur[w].update({x: len(claim.sessions) for x in words if x != w})
            for said, tokens in zip(claim.said, claim.tokens, strict=True):
                self._surface(said, tokens, claim)

    def _surface(self, said: list[str], tokens: list[str], claim: Any) -> None:
        for i, (w, t) in enumerate(zip(said, tokens, strict=True)):
            if t:
                self.forms[t][w if i else w.casefold()] += 1
        themable = self.tally.themable
        for i, a in enumerate(tokens):
            if not (a and themable(a)):
                continue
            for j in range(i + 1, min(i + 3, len(tokens))):
                b = tokens[j]
                if j == i + 2 and (tokens[i + 1] or said[i + 1].casefold() in _NEGATING):
                    break
                if b and b != a and themable(b):
                    self.phrases[(a, b)].add(claim.sessions, claim.days, (claim.line, i))
                    self.phrase_forms[(a, b)][" ".join(said[i : j + 1]).casefold()] += 1
                    break

    def label(self, token: str) -> str:
        common = self.forms[token].most_common(1)
        return common[0][0] if common else token

    def phrase(self, word: str, min_sessions: int) -> tuple[str, str]:
        need = max(min_sessions, math.ceil(0.6 * len(self.tally.words[word].sessions)))
        found = [
            (p, r)
            for p, r in self.phrases.items()
            if word in p and len(r.sessions) >= need and len(r.days) >= 1
        ]
        if not found:
            return self.label(word), ""
        pair, _ = min(found, key=lambda x: (*x[1].order(), x[0]))
        form = self.phrase_forms[pair].most_common(1)[0][0]
        return form, pair[1] if pair[0] == word else pair[0]

    def related(self, word: str, partner: str, specificity: Specificity) -> list[str]:
        scored = [
            (-n * specificity.of_word(x), self.tally.words[x].first, x)
            for x, n in self.cooccur[word].items()
            if x != partner and x in self.tally.words
        ]
        return [x for *_, x in sorted(scored)[:3]]


@settings(max_examples=200, deadline=None)
@given(st.lists(_claim, min_size=1, max_size=12), st.integers(1, 3))
def test_what_the_themes_ask_is_what_counting_everything_gives(
    said: list[tuple[str, list[str], str]], min_sessions: int
) -> None:
    tally = Tally(salience.default_lexicon())
    for n, (text, sessions, origin) in enumerate(said, 1):
        tokens = {t for c in claims_mod.extract(text, min_words=1, max_words=40) for t in c.tokens}
        row = SimpleNamespace(
            id=n, text=text, tokens=" ".join(sorted(tokens)), features="", score=n
        )
        evidence = [
            Evidence(s, f"2026-01-0{int(s[1])}", origin, 10 * n + k) for k, s in enumerate(sessions)
        ]
        tally.add(row, evidence)
    eager = Eager(tally)
    specificity = Specificity(Counter({w: 1 + len(w) % 3 for w in tally.words}), 5)
    for word in list(tally.words):
        assert tally.phrase(word, min_sessions) == eager.phrase(word, min_sessions), word
        _, partner = tally.phrase(word, min_sessions)
        assert tally.related(word, partner, specificity) == eager.related(
            word, partner, specificity
        )
        assert tally.related(word, "", specificity) == eager.related(word, "", specificity)
    for token in {t for c in tally._claims for ts in c.tokens for t in ts if t}:
        assert tally.label(token) == eager.label(token), token


def test_a_phrase_said_in_several_sessions_labels_its_theme() -> None:
    tally = Tally(salience.default_lexicon())
    for n, session in enumerate(("s1", "s2", "s3"), 1):
        text = "My son is allergic to peanuts." if n < 3 else "He is allergic to Peanuts, sadly."
        tokens = {t for c in claims_mod.extract(text, min_words=1, max_words=40) for t in c.tokens}
        row = SimpleNamespace(
            id=n, text=text, tokens=" ".join(sorted(tokens)), features="", score=1
        )
        tally.add(row, [Evidence(session, f"2026-01-0{n}", "owner", n)])
    word = claims_mod.stem("allergic")
    assert tally.phrase(word, 2) == ("allergic to peanuts", claims_mod.stem("peanuts"))
    assert tally.label(claims_mod.stem("peanuts")) == "peanuts"  # 2 of 3 in lower case
    assert claims_mod.stem("son") in tally.related(
        word, claims_mod.stem("peanuts"), Specificity({}, 3)
    )
