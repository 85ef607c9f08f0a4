"""The statements an entry's text is made of, each one that stands on its own: "We deploy
to Fly.io, and the staging app is checkout-staging" is two, "I live in Leeds and work at
Acme" one (its second clause has no subject of its own; it needs the first).

A statement that replaces one of them (`dreaming.ingest.slots`) need not replace the rest:
deep keeps the others (`dreaming.phases.deep._deterministic`)."""

from __future__ import annotations

import re

from dreaming.ingest import claims as claims_mod
from dreaming.ingest import slots

# What joins two clauses and is no part of either: "and", "but" or "also" opening the
# second ("..., and the staging app is ..."), a comma or semicolon closing the first.
_JOINER = re.compile(r"^(?:(?:and|but|also|plus|then)\b[\s,]*)+", re.IGNORECASE)
_TRAILING = re.compile(r"[\s,;:—–-]+$")
# What deep's wording puts before an entry's statements: the day they were said and who
# said them ("2026-03-08 Caroline: ..."), which belong to the first and split nothing.
_LEAD = re.compile(
    r"(?:\d{4}-\d{2}-\d{2}\s+)?(?:(?:The agent|[A-Z][\w'-]*(?:(?:,| and) [A-Z][\w'-]*)*):\s+)?"
)


def split(text: str) -> list[str]:
    """The statements of `text`, in order, as written (less the words that joined them).
    A clause starts a statement when it names its own subject ("the staging app is ...",
    "my sister lives in ..."); one without ("... and work at Acme") continues the one
    before it."""
    out: list[str] = []
    lead = _LEAD.match(text)
    head, text = (lead[0], text[lead.end() :]) if lead else ("", text)
    for sentence in claims_mod.sentences(text):
        start = 0
        for m in slots.CLAUSE.finditer(sentence):
            rest = _JOINER.sub("", sentence[m.end() :])
            if rest and slots.opens_subject(rest):
                out.append(sentence[start : m.start()])
                start = m.end()
        out.append(sentence[start:])
    parts = [s for s in (_tidy(p) for p in out) if s]
    if head and parts:
        parts[0] = head + parts[0]
    return parts


def body(part: str) -> str:
    """`part` without the day and the speaker an entry's wording put before it."""
    lead = _LEAD.match(part)
    return part[lead.end() :] if lead else part


def _tidy(part: str) -> str:
    return _TRAILING.sub("", _JOINER.sub("", part.strip()))


def as_sentence(part: str) -> str:
    """A statement written as a sentence of its own: a capital first, a full stop last."""
    part = part[:1].upper() + part[1:]
    return part if part[-1:] in ".!?" else part + "."
