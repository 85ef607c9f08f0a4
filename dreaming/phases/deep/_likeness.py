"""When two statements say one fact: the deterministic path's near-duplicate test, on bags
of content words with inflections folded, said of one person."""

from __future__ import annotations

import re

from dreaming.ingest import claims as claims_mod

# Bags of words this alike are looked at as possible statements of one fact (then checked by
# containment): low enough to find "My sister Anna lives in Lisbon and works as an architect"
# for "My sister Anna lives in Lisbon".
LOOSE_SIMILARITY = 0.5
SELF = "\x00self"  # stands for the speaker's "I" in a bag of words
Bag = frozenset[str]


def statement(text: str, names: str = "") -> str:
    """What an entry says: the date and attribution prefix of a deterministic entry is not
    part of it: written now, "2026-03-08 The agent: ...", "2026-03-08 Caroline: ..." (the
    people `names` says said it) or a bare "2026-03-08 ...", or before, "2026-03-08 — the
    user: ..." and "2026-03-08 — Caroline: ..."."""
    text = _PREFIX.sub("", text, count=1)
    if names and text.startswith(f"{names}: "):
        return text[len(names) + 2 :]
    return text


def bag(text: str) -> frozenset[str]:
    """An entry's content words with their inflections folded (`_lemma`), and whether its
    speaker talks about themselves."""
    body = statement(text)
    tokens = frozenset(_lemma(t) for t in claims_mod.content_tokens(body))
    if _SPEAKER_SUBJECT.search(body):
        tokens |= {SELF}
    return tokens


def owned(text: str) -> frozenset[str]:
    """The content words the speaker calls theirs ("our deploys", "my morning runs"): up to
    two words after each "my" or "our", folded as in `bag`."""
    return frozenset(
        _lemma(t)
        for m in _SPEAKER_POSSESSIVE.finditer(statement(text))
        for t in claims_mod.content_tokens(m[1])
    )


def _lemma(token: str) -> str:
    """A content token (plurals already folded) with its verb endings and final "e" off, so
    deploy/deployed/deploying, move/moved/moves and teach/teaches meet. Only deep's
    near-duplicate test uses it: claim keys keep the plain tokens. A holder ("wife") and the
    negation mark stay as they are, so the similarity index's guard still sees them."""
    if token in claims_mod.GUARDED:
        return token
    word = token
    for suffix in ("ing", "ed"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) >= 3 and not word.endswith("eed"):
            word = stem
            # running -> run, stopped -> stop; but call(ed), miss(ed) keep their pair.
            if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            break
    word = word[:-1] if len(word) >= 4 and word.endswith("e") else word
    # "kidding" and "parenting" name no holder: a lemma never turns into one.
    return token if word in claims_mod.GUARDED else word


def one_speaker(a: Bag, owned_a: Bag, b: Bag, owned_b: Bag) -> tuple[Bag, Bag] | None:
    """The two bags to compare as statements about one person, or None when they are about
    two. Where only one has the speaker as subject ("We deploy ..."), the other is the
    speaker's too if it calls theirs what that one speaks of ("Our deploys happen ..."), and
    someone else's if it calls theirs anything else ("My son is allergic to peanuts and tree
    nuts" is not "I'm allergic to peanuts and tree nuts"); without "my" or "our" it is
    compared as it is (the speaker's "I" a word it lacks)."""
    if (SELF in a) == (SELF in b):
        return a, b
    if SELF in a:
        other = _as_speaker(b, owned_b, a)
        return None if other is None else (a, other)
    other = _as_speaker(a, owned_a, b)
    return None if other is None else (other, b)


def _as_speaker(bag: Bag, owned: Bag, speaker_said: Bag) -> Bag | None:
    if owned & speaker_said:
        return bag | {SELF}
    return None if owned else bag


# The speaker as the subject ("I'm allergic"), not as an owner ("My son is allergic").
_SPEAKER_SUBJECT = re.compile(
    r"(?<![\w'])(?:i|i'm|im|i've|i'd|i'll|we|we're|we've)(?![\w'])|[僕私俺][はが]|我(?!的)",
    re.IGNORECASE,
)


# The speaker as an owner, with the two words that follow ("our deploys happen").
_SPEAKER_POSSESSIVE = re.compile(r"(?<![\w'])(?:my|our)\s+([\w-]+(?:\s+[\w-]+)?)", re.IGNORECASE)


# Older entries: "2026-03-08 — the user: ", "2026-03-08 — Caroline: "; newer ones: a bare
# date, "The agent: " (the name a speaker is given is stripped by `statement` itself).
_PREFIX = re.compile(
    r"^(?:\d{4}-\d{2}-\d{2} — )?the (?:user|agent): "
    r"|^\d{4}-\d{2}-\d{2} — [^\W\d_][\w .',-]{0,120}?: "
    r"|^(?:\d{4}-\d{2}-\d{2} )?the agent: |^\d{4}-\d{2}-\d{2} ",
    re.IGNORECASE,
)


def contains(a: frozenset[str], b: frozenset[str]) -> bool:
    """One bag holds the other: wholly for short ones (three or four words, where one word
    can be the whole fact: "called" bluebird vs "runs" Postgres), 80% for longer ones."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if len(small) < 3:
        return False
    if len(small) <= 4:
        return small <= large
    return len(small & large) >= 0.8 * len(small)
