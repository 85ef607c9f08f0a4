from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreaming.ingest import claims as claims_mod
from dreaming.ingest.claims import (
    _CUE,
    SimilarityIndex,
    claim_key,
    content_tokens,
    extract,
    speaks_of_self,
    words,
)


def claims(text: str) -> list[str]:
    return [c.text for c in extract(text, min_words=4, max_words=60)]


def test_variants_share_a_key() -> None:
    a = extract("I'm allergic to peanuts.", min_words=3, max_words=60)[0]
    b = extract("I am allergic to peanuts!", min_words=3, max_words=60)[0]
    assert a.key == b.key
    assert a.durable_cue


def test_questions_code_and_envelopes_are_not_claims() -> None:
    assert claims("Can you run that example for me?") == []
    assert claims("[Sun 2026-03-08 22:03 GMT+9] My sister Anna lives in Lisbon.") == [
        "My sister Anna lives in Lisbon."
    ]
    assert claims("[[reply_to_current]] The staging database is called bluebird.") == [
        "The staging database is called bluebird."
    ]
    assert claims("Run ```rm -rf /tmp/x``` to clean the folder up now.") != []


def test_sentences_split() -> None:
    out = claims("We deploy on Fridays after QA sign-off. The staging database is called bluebird.")
    assert len(out) == 2


def test_similarity_index_finds_near_duplicates() -> None:
    idx = SimilarityIndex(0.75)
    idx.add(1, content_tokens("We deploy on Fridays only after the QA sign-off"))
    idx.add(2, content_tokens("The staging database is called bluebird"))
    assert idx.best(content_tokens("we deploy on fridays only after QA sign off")) == 1
    assert idx.best(content_tokens("completely unrelated sentence about weather today")) is None


def test_content_tokens_match_the_plain_definition() -> None:
    # The cached word -> token path must equal: casefold, drop stopwords and numbers, stem.
    from dreaming.ingest.claims import _WORD, STOPWORDS, stem

    def plain(text: str) -> frozenset[str]:
        words = (w.casefold() for w in _WORD.findall(text))
        return frozenset(stem(w) for w in words if w not in STOPWORDS and not w.isdigit())

    for text in (
        "The user's Cats and DOGS live in İstanbul since 2019; ß-Straße, ＦＵＬＬ width",
        "I am allergic to peanuts, berries and the STUDIES of 42 libraries",
        "",
        "a the 123 ٣٤ is",
    ):
        assert content_tokens(text) == plain(text)


def test_cleaning_without_and_with_markup() -> None:
    # Lines without the patterns' opening characters skip them; lines with them are cleaned.
    assert claims("Plain words with no markup, at all") == ["Plain words with no markup, at all"]
    # A sentence stays whole: a clause cut at a comma means nothing alone.
    assert claims("Plain words with no markup, every part stays here") == [
        "Plain words with no markup, every part stays here"
    ]
    assert claims(
        "[[reply_to_current]] [Mon 2026-03-09 10:00 GMT+1] Our deploy window is Friday "
        "morning. ```x = {1}``` The build server is called hopper"
    ) == ["Our deploy window is Friday morning.", "The build server is called hopper"]
    # A URL is a word of its sentence; a pasted snippet is no sentence.
    assert claims("See https://example.com/a/b for the staging database details here") == [
        "See https://example.com/a/b for the staging database details here"
    ]
    assert claims('then we need this: {"type":"message","role":"assistant","id":"toolu_01"}') == []


def test_similarity_ties_go_to_the_lowest_id() -> None:
    idx = SimilarityIndex(0.5)
    tokens = content_tokens("staging database called bluebird")
    for ident in (7, 3, 5):
        idx.add(ident, tokens)
    assert idx.best(tokens) == 3
    idx.discard(3)
    assert idx.best(tokens) == 5
    idx.rename(5, -1)
    assert idx.best(tokens) == -1
    assert SimilarityIndex(0.5).best(tokens) is None


def test_durable_cues_any_case_and_only_whole_words() -> None:
    def cue(text: str) -> bool:
        found = extract(text, min_words=3, max_words=60)
        assert len(found) == 1, found
        return found[0].durable_cue

    assert cue("I LIVE in Lisbon near the river.")
    assert cue("My Dog is called Rex and he is old.")
    assert cue("From now on use tabs in the Makefile.")
    assert not cue("The preferred staging host is bluebird.")
    assert not cue("The dogma of tabs lives on in Makefiles.")


def test_a_repeated_line_gives_the_same_claims_and_a_list_of_its_own() -> None:
    line = "We deploy on Fridays after QA sign-off. The staging database is called bluebird."
    first = extract(line, min_words=4, max_words=60)
    first.clear()  # the caller's list: changing it changes nothing for the next caller
    again = extract(line, min_words=4, max_words=60)
    assert [c.text for c in again] == [
        "We deploy on Fridays after QA sign-off.",
        "The staging database is called bluebird.",
    ]
    assert extract(line, min_words=7, max_words=60) == again[:1]


def test_similarity_index_equals_a_full_scan() -> None:
    """Below the probe cap, best() is exact: the best Jaccard >= threshold over every set
    (ties to the lowest id), however much the probe and its filters rule out unscored."""
    import random

    from dreaming.ingest.claims import jaccard

    rnd = random.Random(7)
    for threshold in (0.5, 0.75, 0.8, 1.0):
        vocab = [f"w{i}" for i in range(40)]
        idx = SimilarityIndex(threshold)
        sets: dict[int, frozenset[str]] = {}
        for step in range(300):
            tokens = frozenset(rnd.sample(vocab, rnd.randint(1, 9)))
            scored = [(jaccard(tokens, s), -i) for i, s in sets.items()]
            good = [x for x in scored if x[0] >= threshold]
            assert idx.best(tokens) == (-max(good)[1] if good else None)
            if step % 3:
                idx.add(step, tokens)
                sets[step] = tokens


def test_could_match_is_never_false_where_a_set_matches() -> None:
    """The agent's claims skip the lookups when could_match says no set can match: it must
    say yes whenever best() finds one or the same set is there, at every threshold, and no
    for most claims of unknown words (or the test would not tell the filter does anything)."""
    import random

    rnd = random.Random(11)
    for threshold in (0.3, 0.5, 0.75, 0.8, 0.9, 1.0):
        vocab = [f"w{i}" for i in range(60)]
        idx = SimilarityIndex(threshold)
        sets: list[frozenset[str]] = []
        said_no = 0
        for step in range(400):
            tokens = frozenset(rnd.sample(vocab, rnd.randint(1, 12)))
            if idx.best(tokens) is not None or tokens in sets:
                assert idx.could_match(tokens), (threshold, sorted(tokens))
            said_no += not idx.could_match(tokens)
            if step % 4 == 0 and len(sets) < 12:  # a small index: most words unknown to it
                idx.add(step, tokens)
                sets.append(tokens)
        if threshold >= 0.75:  # the default is 0.8
            assert said_no > 100, (threshold, said_no)
    assert not SimilarityIndex(0.8).could_match(frozenset({"a", "b"}))


def test_similarity_index_past_the_probe_cap_scores_the_lowest_ids_found() -> None:
    """With more than MAX_PROBE sets found, best() scores the MAX_PROBE lowest ids of them
    (bounded, deterministic): the filters that skip sets unscored must not change the pick."""
    import random

    from dreaming.ingest.claims import MAX_PROBE, jaccard

    def reference(idx: SimilarityIndex, tokens: frozenset[str]) -> int | None:
        postings, n, t = idx._postings, len(tokens), idx.threshold
        need = max(n - int(t * n + 0.999999) + 1, 1)
        seen: set[int] = set()
        for w in sorted(tokens, key=lambda w: (len(postings.get(w, ())), w))[:need]:
            seen.update(postings.get(w, ()))
            if len(seen) >= MAX_PROBE:
                break
        best, best_score = None, t
        for i in sorted(seen)[:MAX_PROBE]:
            score = jaccard(tokens, idx._sets[i])
            if t * n <= len(idx._sets[i]) <= n / t and score >= best_score:
                if best is None or score > best_score:
                    best, best_score = i, score
        return best

    rnd = random.Random(3)
    vocab = [f"w{i}" for i in range(14)]
    for threshold in (0.5, 0.8):
        idx = SimilarityIndex(threshold)
        for i in rnd.sample(range(10**6), 1500):
            idx.add(i, frozenset(rnd.sample(vocab, rnd.randint(2, 8))))
        for _ in range(300):
            tokens = frozenset(rnd.sample(vocab, rnd.randint(2, 9)))
            assert idx.best(tokens) == reference(idx, tokens)


def test_a_negation_or_another_holder_keeps_near_identical_claims_apart() -> None:
    # Same content words, opposite statements: the negator is a stopword, the mark is not.
    said, negated = (
        content_tokens("I eat pork on Sundays."),
        content_tokens("I don't eat pork on Sundays."),
    )
    assert said != negated
    assert content_tokens("I can't eat pork on Sundays.") == negated
    apart = [
        (
            "I'm severely allergic to peanuts and tree nuts.",
            "My daughter is severely allergic to peanuts and tree nuts.",
        ),
        (
            "I work as a nurse at the county hospital.",
            "My wife works as a nurse at the county hospital.",
        ),
        (
            "We deploy the billing service on Fridays after the review.",
            "We do not deploy the billing service on Fridays after the review.",
        ),
    ]
    for first, second in apart:
        idx = SimilarityIndex(0.5)
        idx.add(1, content_tokens(first))
        assert idx.best(content_tokens(second)) is None, (first, second)
    # "never" negates too, unless it only insists ("..., never before").
    idx = SimilarityIndex(0.8)
    idx.add(1, content_tokens("I eat pork at the family dinners on Sundays."))
    assert idx.best(content_tokens("I never eat pork at the family dinners on Sundays.")) is None
    # Not every negator negates: "don't forget X" asks to keep X, "No worries, X" opens it.
    for plain, said in [
        (
            "Remember that my sister Anna's birthday is on June 3.",
            "Don't forget that my sister Anna's birthday is on June 3.",
        ),
        (
            "The staging database is called bluebird.",
            "No worries, the staging database is called bluebird.",
        ),
    ]:
        idx = SimilarityIndex(0.8)
        idx.add(1, content_tokens(plain))
        assert idx.best(content_tokens(said)) == 1, said
    # The mark is no word: a negated pleasantry is still too short to be a claim.
    assert extract("I don't know.", min_words=3, max_words=60) == []
    # The same holder still folds.
    idx = SimilarityIndex(0.8)
    idx.add(1, content_tokens("My wife works as a nurse at the county hospital."))
    assert idx.best(content_tokens("My wife works as a nurse at the county hospital now.")) == 1


_SAID = st.sampled_from(
    "I my we Remember ALWAYS never from now on call me wife i'm based don't ever important: "
    "going forward peanuts allergic Favourite the is Dr. e.g. 1. 2. `code` x/y.py ? 私 僕 "
    "and Anna Lisbon".split()
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_SAID, min_size=1, max_size=14), min_size=1, max_size=4))
def test_what_a_claim_works_out_when_asked_is_what_its_sentence_says(
    parts: list[list[str]],
) -> None:
    # A claim's key, durability cue and first person are made lazily (most of the agent's
    # claims are never asked): each must be what the eager definitions give, and the line's
    # claims one per token set, whichever of them are asked first.
    line = ". ".join(" ".join(p) for p in parts) + "."
    found = extract(line, min_words=2, max_words=60)
    for c in reversed(found):  # asked in another order than made
        assert c.first_person == speaks_of_self(c.text)
        assert c.durable_cue == (_CUE.search(c.text) is not None)
        assert c.key == claim_key(c.tokens)
        assert c.tokens == content_tokens(c.text)
    assert len({c.key for c in found}) == len(found)
    assert len({c.tokens for c in found}) == len(found)
    # The same claims as a line taken apart afresh (not the cache's own objects).
    assert list(claims_mod._extract.__wrapped__(line, 2, 60)) == found


_PLAIN_MAY_END = re.compile(r"[.!?][\"'”’)\]]?\s|\s[-•*]\s|[;；。！？]")
_EDGES = st.text(
    alphabet=st.sampled_from(list(".!?\"'”’)]-•* \t\n\u3000\u2028;；。！？ab_9é私")), max_size=16
)


@settings(max_examples=3000, deadline=None)
@given(_EDGES)
def test_the_quick_sentence_end_check_finds_what_its_plain_form_finds(text: str) -> None:
    # `_MAY_END` is written to start with punctuation so the regex engine can skip to it.
    assert (claims_mod._MAY_END.search(text) is None) == (_PLAIN_MAY_END.search(text) is None)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=40))
def test_ascii_words_are_the_unicode_patterns_words(text: str) -> None:
    assert words(text) == re.findall(r"\w+", text)


_VOCAB = st.sampled_from("ant bee cat dog eel fox gnu hen ibis jay kiwi lark mole".split())
_SETS = st.frozensets(_VOCAB, min_size=1, max_size=7)


_IDS = st.lists(st.integers(-(2**40), 2**40), min_size=120, max_size=120, unique=True)


@pytest.mark.parametrize("count_from", [0, 32, 10**9])  # always count first, as shipped, never
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(_SETS, st.sampled_from([None, "Ann", "Bo"])), max_size=120),
    _IDS,
    _SETS,
    st.sampled_from([None, "Ann"]),
    st.sampled_from([0.5, 0.6, 0.75, 0.9]),
)
def test_the_most_similar_set_is_the_one_every_set_scored_would_give(
    count_from: int,
    stored: list[tuple[frozenset[str], str | None]],
    ids: list[int],
    query: frozenset[str],
    holder: str | None,
    threshold: float,
) -> None:
    # Below MAX_PROBE sets, `best` is exact whichever way it narrows (a pool scored whole,
    # or counted first when large): the highest Jaccard at or above the threshold among
    # sets of the same guard, the lowest id of equal scores; None when none reaches it. Ids
    # as the fold makes them (negative while pending, large once stored), so a set of them
    # iterates in no particular order.
    idx = SimilarityIndex(threshold)
    for ident, (tokens, who) in zip(ids, stored, strict=False):
        idx.add(ident, tokens, who)
    want, score = None, threshold
    for ident, (tokens, who) in sorted(zip(ids, stored, strict=False)):
        if claims_mod._guard(tokens, who) != claims_mod._guard(query, holder):
            continue
        s = claims_mod.jaccard(query, tokens)
        if s > score or (s == score and want is None):
            want, score = ident, s
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(claims_mod, "COUNT_FROM", count_from)
        assert idx.best(query, holder) == want


def test_an_id_added_again_without_discard_is_passed_over_not_a_key_error() -> None:
    idx = SimilarityIndex(0.8)
    idx.add(1, frozenset({"b", "c"}))
    idx.add(1, frozenset({"a"}))  # its words "b" and "c" still list 1
    idx.add(5, frozenset({"z", "q"}))
    idx.discard(1)
    assert idx.best(frozenset({"b", "z"})) is None
    assert idx.best(frozenset({"z", "q"})) == 5


def test_a_claim_cannot_be_changed_once_made() -> None:
    # Claims are shared by every line that says the same (`_extract`'s cache).
    claim = extract("My sister Anna lives in Lisbon now.", min_words=3, max_words=60)[0]
    with pytest.raises(AttributeError):
        claim.text = "My sister Anna lives in Porto now."
    with pytest.raises(AttributeError):
        claim.tokens = frozenset({"porto"})
    with pytest.raises(AttributeError):
        claim.key = "c:0"
    assert claim.key == claim_key(claim.tokens) and claim.text.endswith("Lisbon now.")
