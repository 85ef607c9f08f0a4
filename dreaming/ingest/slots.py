"""Slots: what a fact is about, so that a later value replaces an earlier one (invariant 13).

A fact's slot is its holder (who or what it is about: the speaker, "my sister Anna", "the
staging bucket") and its relation (lives in, works at, role, phone, name, ...). "I live in
Leeds" and, a month later, "We moved to Bristol" fill the speaker's `lives_in` slot with two
values: the later one stands, the earlier one is no longer so. Explicit corrections count
without a slot: "use yarn instead of pnpm" replaces what was said of pnpm, and "changed my
mind, ..." replaces the statement most like it.

Everything here reads text alone and decides nothing about time or trust: the callers (deep)
compare statements by their transcript time and only let the owner's words replace. Where a
transcript names who said a statement (several people talk in its session), the speaker of
"I", "we" and "my ..." is that person (`Slots.read(..., speaker=)`): Melanie's "I moved to
Bristol" never fills Caroline's `lives_in`, and never the owner's. The
relations and their phrasings are data (`slots.toml` beside this module), extendable in
settings (`[slots]`). English is read clause by clause, subject before the relation and
value after it; Japanese and Chinese with the value before the relation.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dreaming.ingest import claims as claims_mod
from dreaming.ingest._slot_data import COMMON_CAPITALS, IMPERATIVES
from dreaming.ingest._slot_data import defaults as _defaults
from dreaming.ingest._slot_data import merged as _merged
from dreaming.ingest._slot_data import words_regex as _words_regex
from dreaming.text_memo import text_cache


@dataclass(frozen=True, slots=True)
class Fill:
    """One relation a statement states: of `holder` (empty: the speaker), this `value`."""

    holder: frozenset[str]
    relation: str
    value: frozenset[str]
    negated: bool = False
    mine: bool = False  # the holder is the speaker or the speaker's ("I", "my sister")


@dataclass(frozen=True, slots=True)
class Reading:
    """What replacing needs to know of one statement."""

    fills: tuple[Fill, ...]
    old: frozenset[str]  # the old value an explicit correction names ("instead of pnpm")
    old_named: bool  # and it is a name ("not Maria") or said with a verb ("replaced X with Y")
    corrects: bool  # an explicit correction that names no old value ("changed my mind")
    holders: frozenset[str]  # whose statement: kin words after "my", a leading name
    tokens: frozenset[str]  # its content tokens


# The holder of "she", "it" or "his" in a correction ("Actually her name is Marie"): someone
# other than the speaker, whom the conversation named before.
UNRESOLVED = frozenset(["?"])
_PRONOUNS = frozenset(["he", "she", "him", "his", "her", "they", "them", "their", "it", "its"])
_ACTUALLY = re.compile(r"\b(?:actually|correction|sorry|i mean|i meant)\b", re.IGNORECASE)

NOBODY = Reading((), frozenset(), False, False, frozenset(), frozenset())

# A clause ends at a comma, a semicolon, a colon, a dash, or a conjunction that starts
# another statement ("I live in Leeds, near the park", "..., so forward the letters").
CLAUSE = re.compile(
    r"\s*[,;:]\s+|\s+[-–—]\s+|\s+(?:and|but|so|because|while|although|though|since)\s+",
    re.IGNORECASE,
)
_NEW_VALUE = (" to ", " with ", " for ", " by ", ". ", "! ", "? ")  # "from X to Y", "X. Now"
# A correction's cue that is a verb of changing: the old value it names is no longer, whatever
# else the two statements share ("We switched from poetry to uv", "swapped Jest for Vitest").
_CHANGED = re.compile(
    r"(?i:switched|changed|moved|migrated|relocated|upgraded|downgraded|replaced|swapped)\b"
)
_NAMED_VALUE = re.compile(r"\s*(?:(?:the|our|my) )?[A-Z]")  # "Maria", "the Honda"
_ALTERNATIVE = re.compile(r"\s+(?:over|to|rather than|instead of|than)\s+", re.IGNORECASE)
_CJK_CLAUSE = re.compile(r"[、。，；！？!?]")
_CJK_PARTICLE = re.compile(r"[はがもを]")
_SELF = frozenset(["i", "we", "me", "us", "myself", "ourselves", "user"])
_SELF_CJK = frozenset(["僕", "私", "俺", "わたし", "ぼく", "おれ", "我", "うち"])
_OWNERS = frozenset(["my", "our"])
_UNRESOLVED = frozenset(
    ["he", "she", "they", "it", "this", "that", "there", "these", "those", "you", "your",
     "his", "her", "their", "its", "someone", "everyone", "nobody", "what", "which", "who"]
)  # fmt: skip
# Words that open a clause without being its subject ("Yeah, ...", "Also, we ...").
_OPENERS = frozenset(
    ["yeah", "yes", "yep", "oh", "ok", "okay", "so", "well", "also", "and", "but", "btw",
     "fyi", "update", "actually", "anyway", "now", "just", "still", "then", "plus",
     "please", "pls", "hey", "hi", "sorry", "correction", "oops"]
)  # fmt: skip
# Words in a subject or a value that name neither (adverbs, time words).
_FILLERS = frozenset(
    """now currently recently finally just already still officially actually also again
    today yesterday tomorrow tonight week weeks month months year years day days ago last
    next this these those past recent soon lately since new old anymore longer""".split()  # noqa: SIM905
)
_DETERMINERS = frozenset(["the", "a", "an", "my", "our", "s"])
_NONE: frozenset[str] = frozenset()
MAX_HOLDER_WORDS = 4
MAX_VALUE_WORDS = 6


@dataclass(frozen=True, eq=False)
class Slots:
    """The compiled relations and corrections. Hashable by identity, so callers cache on it."""

    relations: tuple[tuple[str, re.Pattern[str]], ...]
    relations_cjk: tuple[tuple[str, re.Pattern[str]], ...]
    not_self: frozenset[str]
    corrections_old: re.Pattern[str] | None
    corrections_similar: re.Pattern[str] | None
    not_values: frozenset[str]

    @classmethod
    def build(
        cls,
        relations: Mapping[str, Sequence[str]] | None = None,
        lists: Mapping[str, Sequence[str]] | None = None,
    ) -> Slots:
        rel = _merged(_defaults()[0], relations)
        lst = _merged(_defaults()[1], lists)
        english = tuple(
            (name, pattern)
            for name, ps in rel.items()
            if not name.endswith("_cjk") and (pattern := _words_regex(ps)) is not None
        )
        cjk = tuple(
            (name.removesuffix("_cjk"), re.compile("|".join(f"(?:{p})" for p in ps)))
            for name, ps in rel.items()
            if name.endswith("_cjk") and ps
        )
        return cls(
            relations=english,
            relations_cjk=cjk,
            not_self=frozenset(lst.get("not_self", ())),
            corrections_old=_words_regex(lst.get("corrections_old", ())),
            corrections_similar=_words_regex(lst.get("corrections_similar", ())),
            not_values=frozenset(w.casefold() for w in lst.get("not_values", ())),
        )

    def read(self, statement: str, speaker: str | None = None) -> Reading:
        """The slots `statement` fills and the corrections it makes (one sentence or a few),
        said by `speaker` when the transcript names who said it (None: the owner). Cached:
        deep reads every live entry for each batch, and entries change rarely."""
        return _read_cached(self, statement, speaker)

    def _read(self, statement: str) -> Reading:
        text = statement.strip().replace("’", "'")
        if not text:
            return NOBODY
        fills = list(self._clause_fills(text))
        if not text.isascii():
            fills += [f for c in _CJK_CLAUSE.split(text) if c for f in self._fills_cjk(c)]
        old: frozenset[str] = frozenset()
        named = False
        if self.corrections_old is not None:
            for m in self.corrections_old.finditer(text):
                said = _until_clause_end(text[m.end() :], also=_NEW_VALUE)
                old |= _value_tokens(said, _NONE)
                named = named or bool(_NAMED_VALUE.match(said) or _CHANGED.match(m[0]))
        corrects = bool(self.corrections_similar and self.corrections_similar.search(text))
        if not (old or corrects or _ACTUALLY.search(text)):
            # A pronoun's referent is known only to the conversation: only a correction
            # may name it ("Actually her name is Marie"), and then only once.
            fills = [f for f in fills if f.holder != UNRESOLVED]
        return Reading(tuple(fills), old, named, corrects, holders(text), value_tokens(text))

    def _clause_fills(self, text: str) -> Iterable[Fill]:
        """The fills of each clause. A clause without a subject of its own ("... and lives
        in eu-west-1", "Anna, my sister, lives in Lisbon") continues the subject before it,
        not the speaker: "The staging database is called acme-stage and lives in eu-west-1"
        says nothing of where the user lives."""
        carried: Subject = (frozenset(), True)  # no subject yet: the speaker's
        for clause in CLAUSE.split(text):
            if clause:
                fill, carried = self._fill(clause, carried)
                if fill is not None:
                    yield fill

    def _fill(self, clause: str, carried: Subject) -> tuple[Fill | None, Subject]:
        """The clause's fill (the relation said first in it; one a clause), and the subject
        a clause after it without one of its own continues."""
        best: tuple[int, str, re.Match[str]] | None = None
        for name, pattern in self.relations:
            m = pattern.search(clause)
            if m is not None and (best is None or m.start() < best[0]):
                best = (m.start(), name, m)
        if best is None:
            return None, _subject_of(clause, carried)
        _, name, m = best
        # "located.moved": the relation, and how its holder is read.
        name, _, kind = name.partition(".")
        subject = clause[: m.start()]
        holder, mine = _subject_of(subject, carried, named=True)
        said_by = (holder, mine)  # what a clause after this one without a subject continues
        rest = clause[m.end() :]
        if kind == "moved":
            # "We migrated the staging cluster to us-east-2": the holder is what was moved.
            what, *to = _MOVED_TO.split(rest, maxsplit=1)
            holder, mine = holder_of(what), _possessive(what)
            if not to or not holder or holder == UNRESOLVED:
                return None, said_by
            rest = to[0]
        if holder is None or (not holder and name in self.not_self):
            return None, said_by
        relation = name
        if name == "prefers":
            # "prefer tea over coffee": the slot is the pair, the value the one chosen.
            chosen, *other = _ALTERNATIVE.split(rest, maxsplit=1)
            pair = _value_tokens(chosen, _NONE) | _value_tokens("".join(other), _NONE)
            relation, rest = f"prefers:{' '.join(sorted(pair))}", chosen
        value = _value_tokens(rest, self.not_values)
        if not value or _HEDGE.search(clause[: m.start()]):
            return None, said_by
        negated = _negated(clause[: m.end()])
        return Fill(holder, relation, value, negated, mine), said_by

    def _fills_cjk(self, clause: str) -> Iterable[Fill]:
        for name, pattern in self.relations_cjk:
            m = pattern.search(clause)
            if m is None:
                continue
            before = clause[: m.start()]
            parts = _CJK_PARTICLE.split(before)
            subject, value = ("", parts[0]) if len(parts) == 1 else (parts[-2], parts[-1])
            subject = subject.strip()
            holder = frozenset() if not subject or subject in _SELF_CJK else frozenset([subject])
            tokens = frozenset(w.casefold() for w in claims_mod.words(value))
            if tokens and not (holder == frozenset() and name in self.not_self):
                yield Fill(holder, name, tokens, False, not holder)
            return


@text_cache(1 << 14)
def _read_cached(slots: Slots, statement: str, speaker: str | None) -> Reading:
    reading = slots._read(statement)
    return reading if speaker is None else _voiced(reading, speaker)


def _voiced(reading: Reading, speaker: str) -> Reading:
    """`reading` as said by `speaker`: the speaker's own slots (and those a pronoun leaves
    open) and the statement's holders are that person's."""
    voice = claims_mod.holder_id(speaker)
    fills = tuple(
        dataclasses.replace(f, holder=f.holder | {voice}) if f.mine or f.holder == UNRESOLVED else f
        for f in reading.fills
    )
    return dataclasses.replace(reading, fills=fills, holders=reading.holders | {voice})


def _voice(holder: frozenset[str]) -> frozenset[str]:
    """The named speaker a holder is of, as a set of at most one guard token."""
    return frozenset(t for t in holder if t.startswith(claims_mod.HOLDER_MARK))


@functools.cache
def default_slots() -> Slots:
    return Slots.build()


_BUILT: dict[object, Slots] = {}


def slots_for(relations: Mapping[str, Sequence[str]], lists: Mapping[str, Sequence[str]]) -> Slots:
    """The slots for a settings file's `[slots]` extensions, built once per distinct set."""
    if not relations and not lists:
        return default_slots()
    key = (
        tuple(sorted((k, tuple(v)) for k, v in relations.items())),
        tuple(sorted((k, tuple(v)) for k, v in lists.items())),
    )
    found = _BUILT.get(key)
    if found is None:
        found = _BUILT[key] = Slots.build(relations, lists)
    return found


# -- reading a clause ----------------------------------------------------------------------

# Whom a clause is about, as `holder_of` says, and whether that is the speaker or the
# speaker's (`Fill.mine`).
Subject = tuple[frozenset[str] | None, bool]


def _subject_of(text: str, carried: Subject, *, named: bool = False) -> Subject:
    """Whom the clause opening with `text` is about: the subject it names, else (`text`
    holds nothing but openers, or, unless `named`, starts with no word that opens a subject:
    "went hiking", "last week") the one `carried` from the clause before. `named`: `text` is
    all that stands before the clause's relation, so it is the subject."""
    words = _lower_words(text)
    while words and words[0] in _OPENERS:
        words = words[1:]
    if not words:
        return carried
    if not named and not _opens_subject(text, words):
        return carried
    holder = holder_of(text)
    if holder is None and (not named or words[0] not in _UNRESOLVED):
        # "Just so you know, call me Hiro": the listener, as a discourse marker, is no
        # subject a relation after it continues; nor is "Finally" ("Finally settled in and
        # live in Denver now"), which names no one.
        return carried
    mine = not holder or (holder != UNRESOLVED and _possessive(text))
    return holder, mine


def opens_subject(clause: str) -> bool:
    """Whether `clause` starts with a subject of its own (see `_opens_subject`)."""
    words = _lower_words(clause)
    return bool(words) and _opens_subject(clause, words)


def _opens_subject(text: str, words: Sequence[str]) -> bool:
    """Whether a clause with no relation in it starts with its subject: the speaker, a
    pronoun, something possessed or determined ("my sister", "the staging database"), or a
    name followed by a verb ("Priya is my boss and lives in Delhi", "Melanie took the kids
    camping and lives in Denver now"). A capital alone is no name: every sentence starts
    with one ("Big news: moved to Bristol", "Went hiking and live in Seattle now"), and a
    name after a greeting is the listener ("Hi Jo, work at Globex now")."""
    first = words[0]
    if first in _SELF or first in _OWNERS or first in _PRONOUNS or first in _UNRESOLVED:
        return True
    if first in _DETERMINERS:
        return True
    lead = _WORD.search(text)
    if lead is None or lead[0].casefold() in _OPENERS:
        return False
    return (
        lead[0][:1].isupper()
        and lead[0] not in COMMON_CAPITALS
        and first not in _FILLERS  # "Finally got the keys and live in Denver now"
        and len(words) > 1
        and words[1] in _NAME_VERBS
    )


# Verbs a name at a clause's start is the subject of ("Priya is ...", "Anna got ...").
_NAME_VERBS = frozenset(
    """is was has had got gets went goes took takes said says did does made makes works
    worked lives lived moved started joined left bought found met sent called told loves
    likes hates wants needs became becomes runs ran""".split()  # noqa: SIM905
)


_WORD = re.compile(r"[^\W\d_]+")
_MOVED_TO = re.compile(r"\s+(?:over |back )?(?:to|into|onto)\s+", re.IGNORECASE)


def _lower_words(text: str) -> list[str]:
    return [w.casefold() for w in claims_mod.words(text)]


def holder_of(subject: str) -> frozenset[str] | None:
    """Who a clause's subject names: empty for the speaker ("I", "we", "the user", none at
    all), the words of a possessed or named noun phrase ("my sister Anna" -> {sister, anna},
    "the staging bucket" -> {staging, bucket}), or None when it names no one we can tell
    (a pronoun: "she", "it"; the listener: "you", "your")."""
    words = _lower_words(subject)
    while words and words[0] in _OPENERS:
        words = words[1:]
    if not words:
        return frozenset()
    first = words[0]
    if first in _SELF or (first == "the" and words[1:2] == ["user"]):
        rest = words[2:] if first == "the" else words[1:]
        # "The user's sister" is the sister; "I", "We also", "the user" are the speaker.
        if rest[:1] == ["s"]:
            return _noun_phrase(rest[1:])
        return frozenset()
    if first in _PRONOUNS:
        return UNRESOLVED
    if first in _UNRESOLVED:
        return None
    if first in _OWNERS and len(words) == 1:
        return frozenset()  # "My number is ...", "My name is ..."
    if first in _OWNERS or first in _DETERMINERS:
        return _noun_phrase(words[1:])
    return _noun_phrase(words)


def _possessive(subject: str) -> bool:
    """Whether a clause's subject is something of the speaker's ("my sister", "our dog",
    "the user's wife")."""
    words = _lower_words(subject)
    while words and words[0] in _OPENERS:
        words = words[1:]
    if words[:1] and words[0] in _OWNERS:
        return True
    if words[:1] and words[0] in _SELF:
        return words[1:2] == ["s"]
    return words[:3] == ["the", "user", "s"]


# "the staging one": the word stands for a noun said before, and names nothing itself.
_ANAPHORS = frozenset(["one", "ones"])


def _noun_phrase(words: list[str]) -> frozenset[str] | None:
    found: list[str] = []
    for w in words:
        if w in _ANAPHORS:
            continue
        if w in claims_mod.STOPWORDS or w in _FILLERS:
            if found:
                break
            continue
        found.append(claims_mod.stem(w))
        if len(found) >= MAX_HOLDER_WORDS:
            break
    return frozenset(found) if found else None


def _until_clause_end(text: str, also: Sequence[str] = ()) -> str:
    cut = CLAUSE.split(text, maxsplit=1)[0]
    for stop in also:
        at = cut.find(stop)
        if at >= 0:
            cut = cut[:at]
    return cut


# An address, a URL or a path is one value, not its words ("anna@new.example").
_WHOLE = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|https?://[^\s,;]+|~?[\w.-]*/[\w./-]+")


def _value_tokens(text: str, not_values: frozenset[str]) -> frozenset[str]:
    """The value's words, stemmed (digits kept: a phone number is its digits), at most
    MAX_VALUE_WORDS; empty when its first word names no value ("at home")."""
    out: list[str] = [m.rstrip(".").casefold() for m in _WHOLE.findall(text)]
    if out:
        text = _WHOLE.sub(" ", text)
    for w in _lower_words(text):
        if w in claims_mod.STOPWORDS or w in _FILLERS:
            continue
        if not out and w in not_values:
            return frozenset()
        out.append(claims_mod.stem(w))
        if len(out) >= MAX_VALUE_WORDS:
            break
    return frozenset(out)


def value_tokens(text: str) -> frozenset[str]:
    """A statement's content words as values are read (stemmed, digits kept)."""
    return frozenset(
        claims_mod.stem(w)
        for w in _lower_words(text)
        if w not in claims_mod.STOPWORDS and w not in _FILLERS
    )


_NEGATION = re.compile(
    r"\b(?:not|no longer|never|don't|doesn't|didn't|isn't|aren't|wasn't|dont|doesnt|"
    r"didnt|isnt|arent|wasnt|n't)\b|n't\b|\bany ?more\b"
    # "I lost my job at X", "I quit my job at X": a value that no longer holds
    r"|\b(?:lost|quit|left|leaving|losing|quitting)\b",
    re.IGNORECASE,
)
# A value only hoped for or weighed ("I may have found a job at ...", "thinking of moving
# to ...") is no statement that the fact changed.
_HEDGE = re.compile(
    r"\b(?:may|might|maybe|perhaps|hope|hoping|hopefully|wish|thinking (?:of|about)|"
    r"considering|could|would|planning|plan to|want to|wanna|if)\b",
    re.IGNORECASE,
)


def _negated(text: str) -> bool:
    return _NEGATION.search(text) is not None


# A short label before a colon ("Update:", "Quick change of plans:", "Heads up:") names
# nobody: the statement starts after it.
_LABEL = re.compile(r"^(?:[\w'-]+ ){0,3}[\w'-]+:\s+")
_LEADING_NAME = re.compile(r"^(?:([A-Z][a-z]+),?\s+)?([A-Z][a-z]{1,20})\b(?!')")


def holders(text: str) -> frozenset[str]:
    """Whose statement it is, as far as words tell: kin words after "my"/"our"/"the user's"
    ("my sister", "our dog") and a person's name leading it ("Anna moved to ..."). Empty for
    the speaker's own and impersonal statements."""
    words = _lower_words(text)
    out = {
        claims_mod.stem(nxt)
        for w, nxt in itertools.pairwise(words)
        if w in ("my", "our", "s") and claims_mod.stem(nxt) in claims_mod.HOLDERS
    }
    lead = _LEADING_NAME.match(_LABEL.sub("", text.strip(), count=1))
    # (A plural verb after it makes it a noun: "Eggs now come from ...", "Kids are ...".)
    if (
        lead is not None
        and lead[2] not in COMMON_CAPITALS
        and lead[1] not in IMPERATIVES
        and not _PLURAL.match(lead.string, lead.end())
    ):
        out.add(lead[2].casefold())
    return frozenset(out)


_PLURAL = re.compile(
    r"\s+(?:now\s+|all\s+|usually\s+)?(?:are|were|have|come|go|do|get|need|make|run)\b"
)


# -- replacing -----------------------------------------------------------------------------


def _compatible(a: frozenset[str], b: frozenset[str]) -> bool:
    """Two holders that may be one: equal, or one naming more of the same ("my sister" and
    "my sister Anna"), of the same speaker. The speaker (empty) is only the speaker."""
    va, vb = _voice(a), _voice(b)
    if va != vb:
        return False
    if va:
        a, b = a - va, b - vb
    if not a or not b:
        return a == b
    if a == UNRESOLVED or b == UNRESOLVED:
        return True
    return a <= b or b <= a


@dataclass(frozen=True, slots=True)
class Replacement:
    reason: str
    likeness: float  # how alike the two statements are: of several, the likest is replaced
    by_slot: bool  # a slot filled anew (every such entry goes), else a correction (one)


def _fill_replaces(nf: Fill, of: Fill) -> Replacement | None:
    """Whether fill `nf`, said later, makes fill `of` no longer so."""
    if nf.relation != of.relation or not _compatible(nf.holder, of.holder):
        return None
    label = nf.relation.split(":")[0].replace("_", " ")
    # A pronoun's slot is one of several others': only the likest one is replaced.
    by_slot = not _unresolved(nf.holder)
    if nf.negated != of.negated:
        if nf.value & of.value:
            return Replacement(f"no longer so: {label}", 1.0, by_slot)
    elif not nf.negated and not (nf.value <= of.value or of.value <= nf.value):
        return Replacement(f"a new value for {label}", 1.0, by_slot)
    return None


def covers(new: Reading, old: Reading) -> bool:
    """Whether every slot `old` fills is one `new` fills anew or states again: replacing the
    statement then loses none of the slots it states. "My name is Ana and I live in Porto"
    is not covered by "We moved to Bristol" (the name would go with it); "I live in Leeds
    and work at Acme" is, by "I moved to Bristol and still work at Acme"."""
    return all(
        any(_fill_replaces(nf, of) or _restates(nf, of) for nf in new.fills) for of in old.fills
    )


def _restates(nf: Fill, of: Fill) -> bool:
    """Whether fill `nf` says again what fill `of` says (the same slot, the same value)."""
    return (
        nf.relation == of.relation
        and nf.negated == of.negated
        and _compatible(nf.holder, of.holder)
        and (nf.value <= of.value or of.value <= nf.value)
    )


def replaces(new: Reading, old: Reading) -> Replacement | None:
    """Whether statement `new`, said later, makes statement `old` no longer so."""
    for nf in new.fills:
        for of in old.fills:
            found = _fill_replaces(nf, of)
            if found is not None:
                return found
    voice = _voice(new.holders)
    if voice != _voice(old.holders):
        return None  # never across speakers
    pronoun = not (new.holders - voice) and any(_unresolved(f.holder) for f in new.fills)
    if new.holders != old.holders and not (pronoun and old.holders - voice):
        return None
    likeness = claims_mod.jaccard(new.tokens - new.old, old.tokens)
    if new.old and new.old <= old.tokens and not (new.tokens - new.old) <= old.tokens:
        others = (old.tokens - new.old) & (new.tokens - new.old)
        if others or new.old_named or _same_relation(new, old):
            return Replacement("corrected: " + " ".join(sorted(new.old)), likeness, False)
    if new.corrects and likeness >= 0.4 and len(new.tokens & old.tokens) >= 2:
        return Replacement("corrected by a later statement", likeness, False)
    return None


def _unresolved(holder: frozenset[str]) -> bool:
    return holder >= UNRESOLVED


def _same_relation(new: Reading, old: Reading) -> bool:
    return bool({f.relation for f in new.fills} & {f.relation for f in old.fills})
