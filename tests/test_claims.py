from __future__ import annotations

from dreaming.claims import SimilarityIndex, content_tokens, extract


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
