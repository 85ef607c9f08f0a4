"""How the locomo bench matches a fact to an entry and prices a selection (imported from
bench/): content words, containment, evidence coverage, framing and the random baseline."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from _locomo_data import (
    DEFAULT_OVERHEAD,
    RANDOM_MEANS,
    Conversation,
)

_WORD = re.compile(r"\w+", re.UNICODE)
# A fixed list, kept here so the metric does not move when the library's stopwords do.
_STOP = frozenset(
    """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just let me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves s t d ll re ve m don doesn didn isn wasn
    user agent said says really
    """.split()  # noqa: SIM905
)


def _fold(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def words(text: str, drop: Iterable[str] = ()) -> frozenset[str]:
    dropped = set(_STOP) | {d.casefold() for d in drop}
    return frozenset(
        _fold(w)
        for w in (x.casefold() for x in _WORD.findall(text))
        if w not in dropped and not w.isdigit()
    )


def containment(fact: frozenset[str], entry: frozenset[str]) -> float:
    return len(fact & entry) / len(fact) if fact else 0.0


# -- one run --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    key: str
    text: str
    turns: set[str]  # LoCoMo turn ids of its evidence
    words: frozenset[str]


def coverage(covered: set[str] | frozenset[str], conv: Conversation) -> dict[str, int]:
    """QA evidence coverage (any, all) and gold-fact recall (evidence) of a set of LoCoMo
    turns: the evidence of MEMORY.md's entries, or of a random selection of candidates."""
    return {
        "qa_any": sum(1 for q in conv.questions if covered & set(q.evidence)),
        "qa_all": sum(1 for q in conv.questions if set(q.evidence) <= covered),
        "recall_evidence": sum(1 for ob in conv.observations if covered & set(ob.dia_ids)),
    }


@dataclass(frozen=True)
class Pick:
    """A candidate as the random baseline sees it: its text and its evidence turns."""

    id: int
    text: str
    turns: frozenset[str]


# The deterministic path's date and speaker before the statement: framing too, since a
# candidate's text carries none, so a random pick pays it like a real entry. Both forms:
# "2026-03-08 " and "2026-03-08 The agent: " now, "2026-03-08 — the user: " before.
_ATTRIBUTION = re.compile(
    r"^\d{4}-\d{2}-\d{2} — the (?:user|agent): |^(?:\d{4}-\d{2}-\d{2} )?The agent: "
    r"|^\d{4}-\d{2}-\d{2} "
)


def framing_chars(memory_chars: int, entry_texts: Sequence[str]) -> int:
    """MEMORY.md's characters beyond the statements themselves (headings, bullets, key
    comments, newlines, and the date and speaker the deterministic path puts before a
    statement); never below 0."""
    return max(0, memory_chars - sum(len(_ATTRIBUTION.sub("", t, count=1)) for t in entry_texts))


def framing(memory_chars: int, entry_texts: Sequence[str]) -> float:
    """MEMORY.md's mean framing characters per live entry (`framing_chars`);
    DEFAULT_OVERHEAD without entries."""
    if not entry_texts:
        return DEFAULT_OVERHEAD
    return framing_chars(memory_chars, entry_texts) / len(entry_texts)


def cost(pick: Pick, overhead: float) -> float:
    return len(pick.text) + overhead


def random_selection(
    picks: Sequence[Pick], budget: float, overhead: float, seed: int
) -> list[Pick]:
    """The candidates ordered by id, shuffled with `random.Random(seed)`, taken in that order
    until the next one's cost (text + overhead) would take the total past `budget`."""
    order = sorted(picks, key=lambda c: c.id)
    random.Random(seed).shuffle(order)
    taken: list[Pick] = []
    spent = 0.0
    for pick in order:
        if spent + cost(pick, overhead) > budget:
            break
        taken.append(pick)
        spent += cost(pick, overhead)
    return taken


def random_baseline(
    conv: Conversation,
    picks: Sequence[Pick],
    budget: int,
    overhead: float,
    seed: int,
    draws: int,
) -> dict[str, Any]:
    """`draws` random selections (seeds seed .. seed + draws - 1) at `budget`; the mean of
    their coverage, recall (evidence), candidates taken and characters spent."""
    per_draw: list[dict[str, Any]] = []
    for k in range(draws):
        taken = random_selection(picks, budget, overhead, seed + k)
        turns: set[str] = set().union(*(p.turns for p in taken))
        per_draw.append(
            {
                "seed": seed + k,
                "selected": len(taken),
                "cost": round(sum(cost(p, overhead) for p in taken), 1),
                **coverage(turns, conv),
            }
        )
    mean = {k: round(sum(d[k] for d in per_draw) / draws, 3) for k in RANDOM_MEANS}
    return {
        "seed": seed,
        "draws": draws,
        "budget": budget,
        "overhead": round(overhead, 2),
        "candidates": len(picks),
        **mean,
        "per_draw": per_draw,
    }


def small_talk(entries: Iterable[tuple[str, set[str]]], topical: set[str]) -> list[str]:
    """Texts of the entries (text, evidence turns) none of whose turns is in `topical` (the
    evidence turns of every QA question and the turns of every gold observation)."""
    return [text for text, turns in entries if not turns & topical]


def ratio(real: float, rand: float) -> float | None:
    return round(real / rand, 3) if rand else None
