"""How the deterministic path words an entry: the speaker's own sentences, tidied, with the
day they were said where that day carries time, and who said them where it was not the
owner (the agent, or a person a transcript of several people names)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from dreaming.ingest import claims as claims_mod
from dreaming.ingest.salience import Feature
from dreaming.phases.deep._selection import Candidate, day

# Scripts whose sentences need no full stop added (a Japanese instruction often has none).
_NO_STOP = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af.!?。！？…)）」』\"']$")


_CJK_END = re.compile(r"[\u3040-\u30ff\u3400-\u9fff。！？」』]$")


# Words that open a sentence without adding to what it says ("Yeah, I painted ...", "Heads
# up: ..."): every character of an entry is paid on every turn, so the deterministic path
# leaves them out.
_INTERJECTION = re.compile(
    r"^(?:(?:(?:yeah|yes|yep|yup|wow|whoa|oh|ah|aw+|hey|haha+|lol|omg|ok|okay|well|so|sure|"
    r"by the way|totally|absolutely|definitely|honestly|actually|anyway|btw|and|also|hmm+|"
    r"um+|uh+)\b|(?:(?:quick|small|big|good|great|important|one more|another)\s+)?"
    r"(?:update|heads[- ]up|fyi|news|note|reminder|change of plans?)\s*:)[\s,!.…-]*)+",
    re.IGNORECASE,
)


# What makes the day a statement was said part of what it says: it tells of an event, or
# it has a time word ("yesterday", "next month", "on Fridays"). A standing instruction holds
# whenever it was given.
_DATED = frozenset({Feature.EVENT, Feature.TIME})
_TIMELESS = frozenset({Feature.INSTRUCTION})


def dated(features: str) -> bool:
    """Whether a statement with these salience features (a candidate's `features`) carries
    time, so its entry keeps the day it was said."""
    found = set(features.split())
    return bool(found & _DATED) and not found & _TIMELESS


def named(speakers: Sequence[str]) -> str:
    """The people who said something, as an entry names them ("Caroline and Melanie")."""
    if len(speakers) <= 1:
        return "".join(speakers)
    return f"{', '.join(speakers[:-1])} and {speakers[-1]}"


def attributed(c: Candidate, also: Sequence[Candidate] = ()) -> str:
    """The deterministic path does not rephrase: it keeps the statements (the sentences of one
    utterance together, so each keeps the context its words need). The owner is implicit, as
    in a person's own notes: MEMORY.md is the agent's memory of what its owner said, and
    every character of it is paid on every turn. Where the statements carry time the day
    they were said comes first ("2026-03-08 I moved to Bristol last week."), so "yesterday"
    keeps its date; an agent-only statement says so ("The agent: ..."), so the agent never
    mistakes its own words for its owner's. Where the transcript names who said it (several
    people talk in its session), the entry names them ("Caroline: ...")."""
    parts = []
    for one in sorted((c, *also), key=lambda x: x.id):  # ids follow the order they were said
        body = _INTERJECTION.sub("", claims_mod.clean(one.text).strip()).strip().strip('"“”')
        body = body[:1].upper() + body[1:]
        if body and not _NO_STOP.search(body):
            body += "."
        if body:
            parts.append(body)
    # Sentences of languages written without spaces join without one.
    text = "".join(
        p if i == 0 or _CJK_END.search(parts[i - 1]) else f" {p}" for i, p in enumerate(parts)
    )
    if c.speakers:
        text = f"{named(c.speakers)}: {text}"
    elif not c.owner_lines:
        text = f"The agent: {text}"
    first = day(c.first_seen)
    return f"{first} {text}" if first and any(dated(x.features) for x in (c, *also)) else text
