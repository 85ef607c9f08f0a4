"""The statements an entry's text is made of, each one that stands on its own: "We deploy
to Fly.io, and the staging app is checkout-staging" is two, "I live in Leeds, near the
park" one (its second clause has no subject of its own and says nothing alone), "I live in
Leeds and work at Acme" two ("I work at Acme" is a statement of the same "I"). English
only: text in other scripts is one statement.

A statement that replaces one of them (`dreaming.ingest.slots`) need not replace the rest:
deep keeps the others (`dreaming.phases.deep._deterministic`)."""

from __future__ import annotations

import itertools
import re

from dreaming.ingest import claims as claims_mod
from dreaming.ingest import salience, slots

# What joins two clauses and is no part of either: "and", "but" or "also" opening the
# second ("..., and the staging app is ..."), a comma or semicolon closing the first.
_JOINER = re.compile(r"^(?:(?:and|but|also|plus|then)\b[\s,]*)+", re.IGNORECASE)
_TRAILING = re.compile(r"[\s,;:—–-]+$")
# A time before a clause's subject ("..., and on Mondays we're closed").
_WHEN = re.compile(
    r"^(?:(?:on|every|each|in the|at)\s+)?(?:(?:mon|tues|wednes|thurs|fri|satur|sun)days?|weekends?"
    r"|weekdays?|mornings?|evenings?|nights?|winter|summer|spring|autumn)\b[\s,]*",
    re.IGNORECASE,
)
# A subject of one to three words and a verb that tells a fact of it ("eggs come from",
# "the kids go to", "payments run through"): a clause that starts with a verb has none.
_NOUN_VERB = re.compile(
    r"(?:[a-z][\w'-]* ){1,3}(?:is|are|was|were|has|have|had|come|comes|came|go|goes|went|run|"
    r"runs|ran|live|lives|lived|work|works|worked|get|gets|got|stay|stays|belong|belongs)\b"
)
# What deep's wording puts before an entry's statements: the day they were said and who
# said them ("2026-03-08 Caroline: ..."), which belong to the first and split nothing.
_LEAD = re.compile(
    r"(?:\d{4}-\d{2}-\d{2}\s+)?(?:(?:The agent|[A-Z][\w'-]*(?:(?:,| and) [A-Z][\w'-]*)*):\s+)?"
)


def split(text: str) -> list[str]:
    """The statements of `text`, in order, as written (less the words that joined them).
    A clause starts a statement when it names its own subject ("the staging app is ...",
    "my sister lives in ..."). One without continues the statement before it ("I live in
    Leeds, near the park"), unless it is a statement of that one's "I", "we", "they", "he"
    or "she" said again, which it then names: "We open at 6am and close at 3pm" is "We open
    at 6am" and "We close at 3pm"; "I like tea and coffee" stays one."""
    out: list[str] = []
    lead = _LEAD.match(text)
    head, text = (lead[0], text[lead.end() :]) if lead else ("", text)
    for sentence in claims_mod.sentences(text):
        ends = [*slots.CLAUSE.finditer(sentence), None]
        start, named, subject = 0, "", _subject(sentence)
        for m, after in itertools.pairwise(ends):
            assert m is not None  # only the last is None
            tail = sentence[m.end() : None if after is None else after.start()]
            joiner = _JOINER.match(tail)
            clause = tail[joiner.end() :] if joiner else tail
            if clause and _opens_statement(_WHEN.sub("", clause)):
                said_again = ""
            elif clause and (said_again := _said_again(subject, clause)):
                pass
            else:
                continue
            out.append(named + sentence[start : m.start()])
            named, start = said_again, m.end() + (joiner.end() if joiner else 0)
            subject = subject if said_again else _subject(clause)
        out.append(named + sentence[start:])
    parts = [s for s in (_tidy(p) for p in out) if s]
    if head and parts:
        parts[0] = head + parts[0]
    return parts


# The subjects a clause without one may be read with: a pronoun, said again, and its verb.
_PRONOUN = re.compile(
    r"^(?:(?:so|well|oh|yeah|and|but|also)[\s,]+)*((?:i|we|they|he|she)\b(?: [a-z]+)?)", re.I
)


def _subject(clause: str) -> str:
    m = _PRONOUN.match(clause.strip())
    return "" if m is None else m[1]


def _said_again(subject: str, clause: str) -> str:
    """What a clause without a subject is said with, when it is a statement of its own so:
    the subject before it ("... and close at 3pm": "we close at 3pm"), or the subject and
    its verb ("I use Square for payments and Xero for the accounts": "I use Xero for the
    accounts"). Empty when neither tells anything alone ("I like tea and coffee")."""
    who, _, verb = subject.partition(" ")
    for said in (f"{who} ", f"{subject} " if verb else ""):
        if said and _says_alone(said + clause):
            return said
    return ""


def _says_alone(statement: str) -> bool:
    """Whether a statement, read on its own, fills a slot or tells a fact, a rule or a
    constraint (so "we close at 3pm" does, "I like coffee" does not)."""
    if slots.default_slots().read(statement).fills:
        return True
    found = salience.assess(statement)
    return not found.zero and bool(found.features & _TELLS)


# (Not a disclosure: "I like coffee", "I work Globex" are one, and tell nothing alone.)
_TELLS = frozenset(
    {salience.Feature.FACT, salience.Feature.INSTRUCTION, salience.Feature.CONSTRAINT}
)


def _opens_statement(clause: str) -> bool:
    """Whether a clause starts with its subject: one `slots` knows ("the staging app",
    "my sister", "we"), or a bare noun with its verb ("eggs come from ...")."""
    return slots.opens_subject(clause) or _NOUN_VERB.match(clause) is not None


def body(part: str) -> str:
    """`part` without the day and the speaker an entry's wording put before it."""
    lead = _LEAD.match(part)
    return part[lead.end() :] if lead else part


def _tidy(part: str) -> str:
    return _TRAILING.sub("", _JOINER.sub("", part.strip()))


def as_sentence(part: str) -> str:
    """A statement written as a sentence of its own: a capital first, a full stop last."""
    part = part[:1].upper() + part[1:]
    return part if _ENDED.search(part) else part + "."


# An end that needs no full stop: one already, or a script written without them.
_ENDED = re.compile(r"[.!?。！？…\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]$")
