"""What a replaced entry said besides the fact that replaced it.

An entry is often two statements: "We deploy with GitHub Actions to Fly.io, and the staging
app is checkout-staging." When "We now deploy to Render instead of Fly.io" supersedes it,
the staging app's name is still true and said nowhere else. The deterministic path keeps
such a statement in the entry that replaces it, so its lineage stays whole: the new entry
already carries the old entry's origins, and forgetting either source removes it.

A statement is kept only when it stands on its own (its own subject,
`dreaming.ingest.statements`), says a fact, a rule or something about a person
(`salience`), and is not itself replaced: "the new place is lovely" (an appraisal of the
old home) and "our two cats" (no statement) go with the rest."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from dreaming.ingest import slots as slots_mod
from dreaming.ingest import statements
from dreaming.ingest.salience import Feature, Salience, assess
from dreaming.phases.deep._wording import dated

# What a statement must say to be kept apart from the one it was said with.
_WORTH = frozenset({Feature.FACT, Feature.DISCLOSURE, Feature.INSTRUCTION, Feature.CONSTRAINT})


Read = Callable[[str], slots_mod.Reading]


def kept(new: slots_mod.Reading, old_text: str, read: Read) -> list[str]:
    """The statements of `old_text` that `new` leaves true and that are worth an entry's
    room; empty when `new` replaces none of them on its own (the entry was replaced as a
    whole) or all of them. `read` reads a statement as its entry's speaker said it."""
    # (What the new statement says again is in it already: "... and still work at Acme".)
    return [
        _dated_if_timely(p)
        for p, r, gone in _parts(new, old_text, read)
        if not gone and not r.tokens <= new.tokens and _worth(assess(p))
    ]


_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}\s+")


def _dated_if_timely(part: str) -> str:
    """`part` with the day its entry was dated by only where the part itself carries time
    (`_wording.dated`): "2026-04-01 We open at 6am and ..., and Mondays we're closed" was
    dated for its Mondays, which "We open at 6am" does not hold. Judged on the statement
    without its day and speaker: the day's own digits are no time the statement tells."""
    day = _DAY.match(part)
    if day is None:
        return part
    found = assess(statements.body(part)).features
    return part if dated(" ".join(f.value for f in found)) else part[day.end() :]


def separable(new: slots_mod.Reading, old_text: str, read: Read) -> bool:
    """Whether `new` replaces some statements of `old_text` and every other statement of
    a slot in it is kept (`kept`): "Our prod cluster runs in eu-west-1 and our staging
    cluster runs in eu-central-1" is replaced by "We migrated the staging cluster to
    us-east-2" with its prod cluster kept, where as one statement it had to stay whole."""
    parts = _parts(new, old_text, read)
    return bool(parts) and all(
        _only_its_value(p) if gone else not r.fills or _worth(assess(p)) for p, r, gone in parts
    )


def replaceable(new: slots_mod.Reading, old_text: str, read: Read) -> bool:
    """Whether `new`, filling every slot of `old_text` anew, may take its place whole: each
    statement it replaces names no more than its value (`_only_its_value`). "I live in
    Manchester with my husband Tom and our son Arjun" stays beside "We moved to Salford", as
    it would beside the other statement of a two-slot entry (`separable`)."""
    parts = statements.split(old_text)
    if len(parts) == 1:
        return _only_its_value(old_text)
    return all(_only_its_value(p) for p in parts if _replaces(new, read(p)))


def _parts(
    new: slots_mod.Reading, old_text: str, read: Read
) -> list[tuple[str, slots_mod.Reading, bool]]:
    """Each statement of `old_text`, read, and whether `new` replaces it; empty unless `new`
    replaces some of them and not all."""
    parts = statements.split(old_text)
    if len(parts) < 2:
        return []
    out = [(p, r, _replaces(new, r)) for p in parts for r in (read(p),)]
    gone = sum(g for _, _, g in out)
    return out if 0 < gone < len(out) else []


# A name, a place, a number or a version: a word written with a capital or a digit.
_NAMED = re.compile(r"\b(?:[A-Z]|[\w.-]*\d)")
# Words after which a name tells more than the value: who else, since when ("in Porto with
# my partner Rui since 2019"); where the value is ("FitLife on Calle Colón") is still it.
_MORE = re.compile(r"\b(?:with|and|since|plus|alongside|for|from|to)\b", re.IGNORECASE)


def _only_its_value(part: str) -> bool:
    """Whether a replaced statement names no more than its value ("our staging cluster
    runs in eu-central-1", "my gym is FitLife on Calle Colón"), nothing that would go with
    it ("I live in Porto with my partner Rui since 2019": the partner and the year are no
    part of the home)."""
    # Its first word has a capital as every sentence's does.
    rest = statements.body(part).partition(" ")[2]
    first = _NAMED.search(rest)
    more = first and _MORE.search(rest, first.end())
    return not (more and _NAMED.search(rest, more.end()))


def _replaces(new: slots_mod.Reading, part: slots_mod.Reading) -> bool:
    # The corrected value named in it ("instead of Fly.io") replaces the part that says it.
    return slots_mod.replaces(new, part) is not None or bool(new.old & part.tokens)


def _worth(found: Salience) -> bool:
    return not found.zero and bool(found.features & _WORTH)


def joined(text: str, parts: Iterable[str], max_chars: int) -> str:
    """`text` followed by `parts`, each as a sentence; `text` as it is when there are none,
    or when they would pass an entry's limit of `max_chars`."""
    parts = list(parts)
    if not parts:
        return text
    out = statements.as_sentence(text.rstrip())
    for part in parts:
        out += " " + statements.as_sentence(part)
    return out if len(out) <= max_chars else text
