"""How the deterministic path words an entry: the speaker's own sentences, tidied, with who
said them and when."""

from __future__ import annotations

import re
from collections.abc import Sequence

from dreaming.ingest import claims as claims_mod
from dreaming.phases.deep._selection import Candidate, day

# Scripts whose sentences need no full stop added (a Japanese instruction often has none).
_NO_STOP = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af.!?。！？…)）」』\"']$")


_CJK_END = re.compile(r"[\u3040-\u30ff\u3400-\u9fff。！？」』]$")


# Words that open a sentence without adding to what it says ("Yeah, I painted ..."): every
# character of an entry is paid on every turn, so the deterministic path leaves them out.
_INTERJECTION = re.compile(
    r"^(?:(?:yeah|yes|yep|yup|wow|whoa|oh|ah|aw+|hey|haha+|lol|omg|ok|okay|well|so|sure|"
    r"totally|absolutely|definitely|honestly|actually|anyway|btw|hmm+|um+|uh+)\b[\s,!.…-]*)+",
    re.IGNORECASE,
)


def named(speakers: Sequence[str]) -> str:
    """The people who said something, as an entry names them ("Caroline and Melanie")."""
    if len(speakers) <= 1:
        return "".join(speakers)
    return f"{', '.join(speakers[:-1])} and {speakers[-1]}"


def attributed(c: Candidate, also: Sequence[Candidate] = ()) -> str:
    """The deterministic path does not rephrase: it keeps the statements (the sentences of one
    utterance together, so each keeps the context its words need), says briefly who made
    them and when ("2026-03-08 — the user: ..."), so an agent reading MEMORY.md never
    mistakes the user's "I" for its own, and "yesterday" keeps its date. Where the transcript
    names who said it (several people talk in its session), the entry names them instead
    ("Caroline: ..."); the owner stays "the user"."""
    speaker = named(c.speakers) or ("the user" if c.owner_lines else "the agent")
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
    first = day(c.first_seen)
    return f"{first} — {speaker}: {text}" if first else f"{speaker[0].upper()}{speaker[1:]}: {text}"
