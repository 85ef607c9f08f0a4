"""The deterministic consolidator: deep's decider when no model decides a batch.

It adds durable candidates and merges near-duplicates into existing entries; it never
supersedes (telling a changed fact from a new one needs understanding).

A near-duplicate is a near-identical bag of words, or one bag holding nearly all of the
other's (at least three words, inflections folded), said of one person: "My son is allergic
to peanuts" never folds into "I'm allergic to peanuts", while "Our deploys happen on
Fridays" is the speaker's own "We deploy on Fridays" (`_likeness.one_speaker`).
"""

from __future__ import annotations

from collections.abc import Sequence

from dreaming.ingest import claims as claims_mod
from dreaming.ingest.tags import TagRegistry
from dreaming.memory import lineage, memory_file
from dreaming.memory.decisions import Action
from dreaming.memory.sanitize import sanitize_entry_text
from dreaming.phases.deep._likeness import (
    LOOSE_SIMILARITY,
    SELF,
    Bag,
    bag,
    contains,
    one_speaker,
    owned,
)
from dreaming.phases.deep._selection import Candidate, utterances
from dreaming.phases.deep._wording import attributed


class _Memory:
    """The live entries as the batch's decisions leave them, indexed for the near-duplicate
    test: an entry a merge rewrites, or one an add creates, is compared against by the
    candidates after it."""

    def __init__(self, live: list[tuple[str, str]], similarity: float) -> None:
        self.live = live
        self.index = claims_mod.SimilarityIndex(similarity)
        self.loose = claims_mod.SimilarityIndex(LOOSE_SIMILARITY)
        self.bags: list[Bag] = []
        self.owned: list[Bag] = []
        for i, (_, text) in enumerate(live):
            self.bags.append(bag(text))
            self.owned.append(owned(text))
            self.index.add(i, claims_mod.content_tokens(text))
            self.loose.add(i, self.bags[i])

    def near_duplicate(self, tokens: frozenset[str], said: Bag, mine: Bag) -> int | None:
        """The index of the entry that states what a candidate says, if one does."""
        hit = self.index.best(tokens)
        if hit is not None and one_speaker(self.bags[hit], self.owned[hit], said, mine) is None:
            hit = None
        if hit is None:
            # Looked up with and without the speaker: "our deploys" may be "we deploy".
            for query in (said, said ^ {SELF}):
                near = self.loose.best(query)
                pair = (
                    None
                    if near is None
                    else one_speaker(self.bags[near], self.owned[near], said, mine)
                )
                if pair is not None and contains(*pair):
                    return near
        return hit

    def merged_text(self, hit: int, text: str, said: Bag) -> str:
        """The first statement stands, unless the new one says all it said and adds a
        detail or two ("... and works as an architect"); more than that is usually the
        moment's context ("..., so skip the satay tonight")."""
        extra = said - self.bags[hit]
        return text if self.bags[hit] <= said and 0 < len(extra) <= 2 else self.live[hit][1]

    def rewrite(self, hit: int, text: str, said: Bag, mine: Bag) -> None:
        self.live[hit] = (memory_file.entry_key(text), text)
        self.bags[hit] = said
        self.owned[hit] = mine
        self.index.discard(hit)
        self.loose.discard(hit)
        self.index.add(hit, claims_mod.content_tokens(text))
        self.loose.add(hit, said)

    def add(self, text: str, said: Bag, mine: Bag) -> None:
        self.index.add(len(self.live), claims_mod.content_tokens(text))
        self.loose.add(len(self.live), said)
        self.bags.append(said)
        self.owned.append(mine)
        self.live.append((memory_file.entry_key(text), text))


def decide(
    live: list[tuple[str, str]],
    batch: Sequence[Candidate],
    *,
    similarity: float,
    max_chars: int,
    registry: TagRegistry,
) -> list[lineage.Applied]:
    """One decision per utterance of `batch` against the `live` entries (key, text)."""
    memory = _Memory(live, similarity)
    return [
        _decide_one(memory, c, also, max_chars=max_chars, registry=registry)
        for c, also in utterances(batch)
    ]


def _decide_one(
    memory: _Memory,
    c: Candidate,
    also: Sequence[Candidate],
    *,
    max_chars: int,
    registry: TagRegistry,
) -> lineage.Applied:
    text = sanitize_entry_text(attributed(c, also), max_chars=max_chars, registry=registry)
    if not text:
        return lineage.Applied(
            c.id, c.key, Action.SKIP, (), None, "deterministic", "empty once sanitized"
        )
    folded = tuple((o.id, o.key) for o in also)
    said, mine = bag(text), owned(text)
    hit = memory.near_duplicate(c.tokens, said, mine)
    if hit is not None:
        key, old = memory.live[hit]
        keep = memory.merged_text(hit, text, said)
        if keep != old:
            memory.rewrite(hit, keep, said, mine)
        return lineage.Applied(
            c.id,
            c.key,
            Action.MERGE,
            (key,),
            keep,
            "deterministic",
            "near-duplicate of an existing entry",
            folded,
        )
    why = f"salient: {c.features}" if c.features else "passed the gates"
    memory.add(text, said, mine)
    return lineage.Applied(c.id, c.key, Action.ADD, (), text, "deterministic", why, folded)
