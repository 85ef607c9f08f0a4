"""The deterministic consolidator: deep's decider when no model decides a batch.

It adds durable candidates, merges near-duplicates into existing entries, and supersedes an
entry whose slot the owner has since filled with another value or that the owner corrected
outright (`dreaming.ingest.slots`): "We moved to Bristol" replaces "I live in Leeds" when it
was said later, on the transcripts' clock. A statement older than the entry it conflicts
with was already replaced: its lineage joins the newer entry, whose text stands. So the
same sessions give the same memory read in one night or night by night. Either way what
else the replaced statement said stays, in the entry that replaces it (`_remainder`).

A near-duplicate is a near-identical bag of words, or one bag holding nearly all of the
other's (at least three words, inflections folded), said of one person: "My son is allergic
to peanuts" never folds into "I'm allergic to peanuts", while "Our deploys happen on
Fridays" is the speaker's own "We deploy on Fridays" (`_likeness.one_speaker`).

Where the transcript names who said a statement, the entry remembers it (its evidence
lines' speakers, `lineage.spoken_by`): one person's "I" is never another's, so Melanie's
"I moved to Bristol" neither folds into nor supersedes Caroline's "I live in Leeds".
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from dreaming.ingest import claims as claims_mod
from dreaming.ingest import slots as slots_mod
from dreaming.ingest.tags import TagRegistry
from dreaming.memory import lineage, memory_file
from dreaming.memory.decisions import Action
from dreaming.memory.sanitize import sanitize_entry_text
from dreaming.phases.deep import _remainder
from dreaming.phases.deep._likeness import (
    LOOSE_SIMILARITY,
    SELF,
    Bag,
    bag,
    contains,
    one_speaker,
    owned,
    statement,
)
from dreaming.phases.deep._selection import Candidate, utterances
from dreaming.phases.deep._wording import attributed, named
from dreaming.text_memo import text_cache


@dataclass(frozen=True, slots=True)
class Voice:
    """Who an entry or a candidate names as having said it: `names` (empty: the owner or the
    agent, implicit), the one person of them (`speaker`), and whose "I" it is (`holder`:
    that person, for a first-person statement)."""

    names: tuple[str, ...] = ()
    speaker: str | None = None
    holder: str | None = None

    @classmethod
    def of(cls, text: str, names: tuple[str, ...], holder: str | None = None) -> Voice:
        return _voice_of(text, names, holder)

    @classmethod
    def _of(cls, text: str, names: tuple[str, ...], holder: str | None) -> Voice:
        speaker = names[0] if len(names) == 1 else None
        if holder is None and speaker is not None:
            said = statement(text, named(names))
            holder = speaker if claims_mod.speaks_of_self(said) else None
        return cls(names, holder or speaker, holder)

    def tokens(self, text: str) -> frozenset[str]:
        """The content tokens of `text`, the names of who said it left out."""
        tokens = claims_mod.content_tokens(text)
        return tokens - claims_mod.content_tokens(" ".join(self.names)) if self.names else tokens

    def reading(self, slots: slots_mod.Slots, text: str) -> slots_mod.Reading:
        return slots.read(statement(text, named(self.names)), speaker=self.speaker)


# A candidate's voice, asked again when its text is compared (the entries' are in `Readings`).
@text_cache(1 << 14)
def _voice_of(text: str, names: tuple[str, ...], holder: str | None) -> Voice:
    return Voice._of(text, names, holder)


@dataclass(frozen=True, slots=True)
class _Read:
    """What the near-duplicate and slot tests need of one held entry's text."""

    voice: Voice
    tokens: frozenset[str]  # its content tokens, for the similarity index
    said: Bag
    mine: Bag
    reading: slots_mod.Reading


class Readings:
    """Each held entry's `_Read`, worked out once for a deep run. Every batch compares its
    candidates with every held entry, and a batch changes a handful of them: a cache of a
    fixed size, swept in the same order batch after batch, misses on every entry once an
    agent holds more than it has room for (at 20,000 entries a batch took seconds). This
    one holds what the run's entries are read as, and goes with the run (whose lock keeps a
    purge of the agent out meanwhile)."""

    def __init__(self, slots: slots_mod.Slots) -> None:
        self.slots = slots
        self._reads: dict[tuple[str, tuple[str, ...]], _Read] = {}

    def of(self, text: str, names: tuple[str, ...]) -> _Read:
        """`text` as held by an entry said by `names` (empty: the owner or the agent)."""
        read = self._reads.get((text, names))
        if read is None:
            voice = Voice.of(text, names)
            read = _Read(
                voice, voice.tokens(text), bag(text), owned(text), voice.reading(self.slots, text)
            )
            self._reads[(text, names)] = read
        return read


class Memory:
    """The held entries, indexed for the near-duplicate and slot tests, kept for a deep run.
    Each batch starts from the entries as the database holds them (`sync`); its decisions
    change them as they come (an entry a merge rewrites, or one an add creates, is compared
    against by the candidates after it).

    An entry's id orders it as the database does (creation, then key), and ties go to the
    lowest id (the first entry). A batch's new entries come last in the database, so a sync
    keeps every entry that is as it was under its id, and numbers the new ones after all
    others: the indexes change by what the batch changed, not by all that is held (at
    20,000 entries rebuilding them took a third of a second a batch). An entry that changed
    in place (a merge named a new speaker) is numbered again, with every entry after it."""

    def __init__(self, similarity: float, readings: Readings) -> None:
        self.similarity = similarity
        self.reads = readings
        self.slots = readings.slots
        self.index = claims_mod.SimilarityIndex(similarity)
        self.loose = claims_mod.SimilarityIndex(LOOSE_SIMILARITY)
        self.order: list[int] = []  # the ids of the held entries, in the database's order
        self.live: dict[int, tuple[str, str]] = {}  # id -> (key, text)
        self.bags: dict[int, Bag] = {}
        self.owned: dict[int, Bag] = {}
        self.readings: dict[int, slots_mod.Reading] = {}
        self.stated: dict[int, datetime | None] = {}
        self.voices: dict[int, Voice] = {}
        self.gone: set[int] = set()  # superseded in this batch
        # Which entries `slots_mod.replaces` can pair with a statement without comparing
        # them all: a slot filled anew needs the same relation on both sides, and only a
        # correction ("instead of", "changed my mind") looks past it.
        self.by_relation: dict[str, set[int]] = defaultdict(set)
        self.correcting: set[int] = set()
        # What each id was read from at the last sync (key, text, speakers); an entry a
        # batch rewrote or added has none, and is read again.
        self._synced: dict[int, tuple[str, str, tuple[str, ...]]] = {}
        self._next = 0

    def sync(
        self,
        live: Sequence[tuple[str, str]],
        stated: Mapping[str, datetime],
        spoken: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        """Start a batch from `live` (key, text) in the database's order, `stated` (when the
        owner last stated each) and `spoken` (who said each, where lines name them)."""
        ids = {as_read: i for i, as_read in self._synced.items()}
        wanted = [(key, text, tuple(sorted((spoken or {}).get(key, ())))) for key, text in live]
        kept: list[int | None] = []
        last = -1
        for as_read in wanted:
            i = ids.get(as_read)
            if i is None or i <= last:
                last = self._next  # from here on every entry is numbered anew
                kept.append(None)
            else:
                last = i
                kept.append(i)
        keep = {i for i in kept if i is not None}
        for i in [i for i in self.live if i not in keep]:
            self._drop(i)
        self.gone = set()
        self.order = []
        for i, (key, text, names) in zip(kept, wanted, strict=True):
            if i is None:
                read = self.reads.of(text, names)
                i = self._put(
                    key, text, read.voice, read.said, read.mine, read.tokens, read.reading
                )
                self._synced[i] = (key, text, names)
            self.order.append(i)
            self.stated[i] = stated.get(key)

    def _put(
        self,
        key: str,
        text: str,
        voice: Voice,
        said: Bag,
        mine: Bag,
        tokens: frozenset[str],
        reading: slots_mod.Reading,
    ) -> int:
        i = self._next
        self._next += 1
        self.live[i] = (key, text)
        self.voices[i] = voice
        self.bags[i] = said
        self.owned[i] = mine
        self.readings[i] = reading
        self._index_reading(i)
        self.index.add(i, tokens, voice.holder)
        self.loose.add(i, said, voice.holder)
        return i

    def _drop(self, i: int) -> None:
        self._unindex_reading(i)
        self.index.discard(i)
        self.loose.discard(i)
        for table in (self.live, self.voices, self.bags, self.owned, self.readings):
            del table[i]
        self.stated.pop(i, None)
        self._synced.pop(i, None)

    def _index_reading(self, i: int) -> None:
        reading = self.readings[i]
        for f in reading.fills:
            self.by_relation[f.relation].add(i)
        if reading.old or reading.corrects:
            self.correcting.add(i)

    def _unindex_reading(self, i: int) -> None:
        reading = self.readings[i]
        for f in reading.fills:
            self.by_relation[f.relation].discard(i)
        self.correcting.discard(i)

    def _sharing(self, reading: slots_mod.Reading) -> set[int]:
        """The entries that fill a relation `reading` fills."""
        out: set[int] = set()
        for f in reading.fills:
            out |= self.by_relation.get(f.relation, set())
        return out

    def conflicts(self, reading: slots_mod.Reading) -> list[tuple[int, slots_mod.Replacement]]:
        """The live entries a statement would replace if said later: every entry of a slot
        it fills anew, and the likest one it corrects outright."""
        # In index order, as if every entry were asked: the others would answer None.
        near: Iterable[int] = (
            self.order if reading.old or reading.corrects else sorted(self._sharing(reading))
        )
        found = [
            (i, r)
            for i in near
            if i not in self.gone
            and (r := slots_mod.replaces(reading, self.readings[i])) is not None
        ]
        # An entry stating another slot too stays, unless that one is a statement of its
        # own the replacing entry keeps (`_remainder`): replacing it would lose that slot.
        by_slot = [(i, r) for i, r in found if r.by_slot]
        whole = [
            (i, r)
            for i, r in by_slot
            if (
                slots_mod.covers(reading, self.readings[i])
                and _remainder.replaceable(reading, self.live[i][1], self.reader(i))
            )
            or _remainder.separable(reading, self.live[i][1], self.reader(i))
        ]
        if by_slot or not found:
            return whole
        # The likest correction target; of equally alike ones, the last stated.
        return [max(found, key=lambda p: (p[1].likeness, self.when(p[0]), p[0]))]

    def reader(self, i: int) -> _remainder.Read:
        """How entry `i`'s speaker's statements are read."""
        return functools.partial(self.voices[i].reading, self.slots)

    def rest(self, i: int, reading: slots_mod.Reading) -> list[str]:
        """What entry `i` says that a statement read as `reading` leaves true (`_remainder`)."""
        return _remainder.kept(reading, self.live[i][1], self.reader(i))

    def replacing(
        self,
        reading: slots_mod.Reading,
        when: datetime | None,
        said: tuple[str, _remainder.Read],
    ) -> list[tuple[int, slots_mod.Replacement]]:
        """The live entries stated after `when` that replace a statement said then (`said`:
        its text, and how its speaker's statements are read)."""
        # A later entry replaces it by filling one of its relations anew, or correcting it.
        near = sorted(self._sharing(reading) | self.correcting)
        return [
            (i, r)
            for i in near
            if i not in self.gone
            and self.stated_after(i, when)
            and (r := slots_mod.replaces(self.readings[i], reading)) is not None
            # A statement of another slot too is no old value as a whole: it stays, unless
            # that slot is a statement of its own the newer entry keeps (as `conflicts`).
            and (
                not r.by_slot
                or (
                    slots_mod.covers(self.readings[i], reading)
                    and _remainder.replaceable(self.readings[i], *said)
                )
                or _remainder.separable(self.readings[i], *said)
            )
        ]

    def when(self, i: int) -> datetime:
        """When entry `i` was stated (the earliest moment when nobody knows)."""
        return self.stated[i] or datetime.min.replace(tzinfo=UTC)

    def stated_after(self, i: int, when: datetime | None) -> bool:
        """Whether entry `i` was stated after `when` (unknown times: not after)."""
        stated = self.stated[i]
        return when is not None and stated is not None and stated > when

    def near_duplicate(
        self, tokens: frozenset[str], said: Bag, mine: Bag, holder: str | None = None
    ) -> int | None:
        """The index of the entry that states what a candidate (whose "I" is `holder`'s,
        when a transcript names them) says, if one does."""
        hit = self.index.best(tokens, holder)
        if hit is not None and one_speaker(self.bags[hit], self.owned[hit], said, mine) is None:
            hit = None
        if hit is None:
            # Looked up with and without the speaker: "our deploys" may be "we deploy".
            for query in (said, said ^ {SELF}):
                near = self.loose.best(query, holder)
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
        voice = self.voices[hit]
        self._synced.pop(hit, None)  # the next batch reads it as the database has it
        self.live[hit] = (memory_file.entry_key(text), text)
        self.bags[hit] = said
        self.owned[hit] = mine
        self.index.discard(hit)
        self.loose.discard(hit)
        self.index.add(hit, voice.tokens(text), voice.holder)
        self.loose.add(hit, said, voice.holder)
        self._unindex_reading(hit)
        self.readings[hit] = voice.reading(self.slots, text)
        self._index_reading(hit)

    def add(self, text: str, said: Bag, mine: Bag, when: datetime | None, voice: Voice) -> None:
        key = memory_file.entry_key(text)
        reading = voice.reading(self.slots, text)
        i = self._put(key, text, voice, said, mine, voice.tokens(text), reading)
        self.order.append(i)
        self.stated[i] = when

    def retire(self, hits: Sequence[int]) -> None:
        for i in hits:
            self.gone.add(i)
            self._synced.pop(i, None)  # out of the indexes: read again if it stays held
            self.index.discard(i)
            self.loose.discard(i)


def decide(
    live: list[tuple[str, str]],
    batch: Sequence[Candidate],
    *,
    similarity: float,
    max_chars: int,
    registry: TagRegistry,
    slots: slots_mod.Slots | None = None,
    stated: Mapping[str, datetime] | None = None,
    said_at: Mapping[int, datetime] | None = None,
    spoken: Mapping[str, frozenset[str]] | None = None,
    memory: Memory | None = None,
) -> list[lineage.Applied]:
    """One decision per utterance of `batch` against the `live` entries (key, text).
    `stated` gives when the owner last stated each live entry and `said_at` when the owner
    last said each candidate (by id), on the transcripts' clock: they decide which of two
    values of a slot stands. `spoken` gives the people each live entry names as having said
    it (`lineage.spoken_by`): a statement is only ever compared with the same person's.
    `memory`: the entries as the batch before left them, kept by the caller from batch to
    batch (made with `slots` and `similarity`)."""
    if memory is None:
        memory = Memory(similarity, Readings(slots or slots_mod.default_slots()))
    elif (slots is not None and slots is not memory.slots) or similarity != memory.similarity:
        raise ValueError("the memory was made with other slots or another similarity")
    memory.sync(live, stated or {}, spoken)
    when = said_at or {}
    return [
        _decide_one(memory, c, also, when.get(c.id), max_chars=max_chars, registry=registry)
        for c, also in utterances(batch)
    ]


def _decide_one(
    memory: Memory,
    c: Candidate,
    also: Sequence[Candidate],
    when: datetime | None,
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
    voice = Voice.of(text, c.speakers, c.holder)
    hit = memory.near_duplicate(c.tokens, said, mine, voice.holder)
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
    # Only the owner's word changes a fact: an agent-only line never replaces one.
    if c.owner_lines:
        read = functools.partial(voice.reading, memory.slots)
        reading = read(text)
        # An entry stated later that replaces this statement: it is an old value.
        newer = memory.replacing(reading, when, (text, read))
        if newer:
            return _old_value(memory, c, (text, voice, read), newer, folded, max_chars)
        # A correction said before an entry corrects something older than it, not the entry.
        earlier = [p for p in memory.conflicts(reading) if not memory.stated_after(p[0], when)]
        if earlier:
            # What else the replaced entries said stays, in the entry that replaces them.
            kept = [
                part
                for i, _ in earlier
                if memory.voices[i].holder == voice.holder
                for part in memory.rest(i, reading)
            ]
            if kept:
                text = _remainder.joined(text, kept, max_chars)
                said, mine = bag(text), owned(text)
            return _supersede(memory, c, text, (said, mine, voice), when, earlier, folded)
    why = f"salient: {c.features}" if c.features else "passed the gates"
    memory.add(text, said, mine, when, voice)
    return lineage.Applied(c.id, c.key, Action.ADD, (), text, "deterministic", why, folded)


def _old_value(
    memory: Memory,
    c: Candidate,
    said: tuple[str, Voice, _remainder.Read],
    newer: list[tuple[int, slots_mod.Replacement]],
    folded: tuple[tuple[int, str], ...],
    max_chars: int,
) -> lineage.Applied:
    """`c` is an old value: an entry stated later replaces it. Its lineage joins the latest
    such entry, whose text stays, as if `c` had been read first and superseded by it: with
    what else `c` said that the entry leaves true (`_remainder`). `said`: `c`'s text, its
    voice, and how that voice's statements are read."""
    i, r = max(newer, key=lambda p: (memory.when(p[0]), p[0]))
    key, kept = memory.live[i]
    text, voice, read = said
    if memory.voices[i].holder == voice.holder:
        rest = _remainder.kept(memory.readings[i], text, read)
        if rest and (joined := _remainder.joined(kept, rest, max_chars)) != kept:
            memory.rewrite(i, joined, bag(joined), owned(joined))
            kept = joined
    why = f"an earlier value, replaced by a later statement ({r.reason})"
    return lineage.Applied(c.id, c.key, Action.MERGE, (key,), kept, "deterministic", why, folded)


def _supersede(
    memory: Memory,
    c: Candidate,
    text: str,
    bags: tuple[Bag, Bag, Voice],
    when: datetime | None,
    conflicts: list[tuple[int, slots_mod.Replacement]],
    folded: tuple[tuple[int, str], ...],
) -> lineage.Applied:
    """`c`, said later, replaces the entries it conflicts with. `bags`: what it says, what
    it calls the speaker's, and who said it."""
    hits = [i for i, _ in conflicts]
    memory.retire(hits)
    said, mine, voice = bags
    memory.add(text, said, mine, when, voice)
    why = "; ".join(dict.fromkeys(r.reason for _, r in conflicts))
    targets = tuple(memory.live[i][0] for i in hits)
    return lineage.Applied(
        c.id, c.key, Action.SUPERSEDE, targets, text, "deterministic", why, folded
    )
