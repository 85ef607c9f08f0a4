"""Salience: what a claim tells, read from its text alone. Deterministic and explainable.

Facts are usually said once and pleasantries recur, so a claim's worth comes from its text:
a standing instruction to the agent, a first-person disclosure (identity, relationships,
work, places, possessions, plans, events, likes, constraints), names, numbers and time
words, and how dense it is. Small talk, the agent's narration, failure banners and
fragments are worth nothing however often they recur. Rarity of the claim's words within
the agent's own corpus is added when candidates are scored (`dreaming.ingest.scoring`), since it
needs the whole corpus.

The cue lists are data (`lexicon.toml` beside this module), extendable in settings
(`[salience]`); English and languages written without spaces (Japanese, Chinese) are covered.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from dreaming.ingest import claims as claims_mod
from dreaming.ingest import grouping
from dreaming.ingest._named import says_a_name, says_a_number
from dreaming.ingest.cues import Cues, Text, build_all
from dreaming.text_memo import text_cache


class Feature(StrEnum):
    """What fired for a claim. The first group adds to its worth; the second zeroes it."""

    INSTRUCTION = "instruction"
    DISCLOSURE = "disclosure"
    FACT = "fact"  # a third-person fact about a named thing or person
    CONSTRAINT = "constraint"  # an allergy, a diet, a health or access need
    EVENT = "event"  # something that happened or is set to happen, in the past tense or dated
    FIRST_PERSON = "first-person"
    PREFERENCE = "preference"
    NAMES = "names"
    NUMBERS = "numbers"
    TIME = "time"
    DENSE = "dense"
    SMALLTALK = "smalltalk"
    NARRATION = "narration"  # the agent's narration: zero unless the owner said it too
    BANNER = "banner"
    FRAGMENT = "fragment"
    REQUEST = "request"  # a one-off task for the agent: zero unless it also sets a rule
    TECHNICAL = "technical"  # file names, identifiers, flags, pasted output: task talk


# Features that make a claim worthless on their own (narration only when the agent alone said
# it: "I'll be in Tokyo next week" is a fact when the owner says it).
ZEROING = frozenset({Feature.SMALLTALK, Feature.BANNER, Feature.FRAGMENT, Feature.REQUEST})

# Weights of the text features in a claim's salience (the part of the score the text earns;
# rarity is weighed in `dreaming.ingest.scoring`). An instruction or a disclosure alone clears
# deep's default gate; names, numbers and time words make a statement specific.
WEIGHTS: Mapping[Feature, float] = {
    Feature.INSTRUCTION: 0.80,
    Feature.CONSTRAINT: 0.80,
    Feature.FACT: 0.60,
    Feature.EVENT: 0.35,
    Feature.DISCLOSURE: 0.20,
    Feature.TIME: 0.25,
    Feature.NUMBERS: 0.20,
    Feature.NAMES: 0.15,
    Feature.FIRST_PERSON: 0.10,
    Feature.PREFERENCE: 0.10,
    Feature.DENSE: 0.05,
}


@dataclass(frozen=True, eq=False)
class Lexicon:
    """The compiled cue lists. Hashable by identity, so callers can cache on it."""

    instruction: Cues
    remember: Cues
    first_person: Cues
    disclosure: Cues
    fact: Cues
    constraint: Cues
    event: Cues
    preference: Cues
    work: Cues
    time: Cues
    smalltalk_line: Cues
    reaction: Cues
    appraisal: Cues
    anticipation: Cues
    offer: Cues
    pronoun_object: Cues
    demonstrative_object: Cues
    preference_of_view: Cues
    pronoun_subject: Cues
    narration: Cues
    banner: Cues
    request: Cues
    fragment_lines: Cues
    directive_clause: re.Pattern[str] | None
    directive_target: Cues
    directive_object: Cues
    technical: re.Pattern[str] | None
    fact_named: re.Pattern[str] | None
    introduction: re.Pattern[str] | None
    fragment_starts: frozenset[str]
    smalltalk_words: frozenset[str]
    thin_words: frozenset[str]
    # The managed groups in the order entries are tried, each with its cue lists merged.
    groups: tuple[tuple[grouping.Group, Cues], ...] = ()

    @functools.cached_property
    def chatter(self) -> frozenset[str]:
        """The content tokens that tell nothing: small talk and thin words, stemmed as
        claims' tokens are, and the negation mark."""
        words = self.smalltalk_words | self.thin_words
        return frozenset({claims_mod.NEGATED, *(claims_mod.stem(w) for w in words)})

    def prepare(self) -> Lexicon:
        """Every cue list an assessment may read, built now if it was not (not the groups',
        which place entries in MEMORY.md): for a process with a moment to spare before it
        assesses claims, such as light waiting for a reading child's first reads."""
        for value in vars(self).values():
            if isinstance(value, Cues) and not value.built:
                value.build()
        return self

    @classmethod
    def build(
        cls,
        extra: Mapping[str, Sequence[str]] | None = None,
        groups: Sequence[grouping.Group] | None = None,
    ) -> Lexicon:
        """The lists of `lexicon.toml` with `extra` appended, and `groups` (default: the
        file's) each with the cue lists it names."""
        lists = dict(_default_lists())
        for key, values in (extra or {}).items():
            lists[key] = (*lists.get(key, ()), *values)

        def both(name: str) -> Cues:
            return Cues(lists.get(name, ()), lists.get(f"{name}_cjk", ()))

        lexicon = cls(
            instruction=both("instruction"),
            remember=both("remember"),
            first_person=both("first_person"),
            disclosure=both("disclosure"),
            fact=both("fact"),
            constraint=both("constraint"),
            event=both("event"),
            preference=both("preference"),
            work=both("work"),
            time=both("time"),
            smalltalk_line=Cues((), lists.get("smalltalk_cjk", ())),
            reaction=Cues(lists.get("reaction", ())),
            appraisal=Cues(lists.get("appraisal", ())),
            anticipation=Cues(lists.get("anticipation", ())),
            offer=Cues(lists.get("offer", ())),
            pronoun_object=Cues(lists.get("pronoun_object", ())),
            demonstrative_object=Cues(lists.get("demonstrative_object", ())),
            preference_of_view=Cues(lists.get("preference_of_view", ())),
            pronoun_subject=Cues(lists.get("pronoun_subject", ())),
            narration=both("narration"),
            banner=both("banner"),
            request=both("request"),
            fragment_lines=Cues(lists.get("fragment_lines", ())),
            directive_clause=_raw_regex(lists.get("directive_clause", ()), re.IGNORECASE),
            directive_target=Cues(lists.get("directive_target", ())),
            directive_object=Cues(lists.get("directive_object", ())),
            fact_named=_raw_regex(lists.get("fact_named", ())),
            introduction=_raw_regex(lists.get("introduction", ())),
            # Case matters here (camelCase), so these run on the claim as written.
            technical=_raw_regex(lists.get("technical", ())),
            fragment_starts=frozenset(
                w.replace("\\", "") for w in lists.get("fragment_starts", ())
            ),
            smalltalk_words=frozenset(w.casefold() for w in lists.get("smalltalk_words", ())),
            thin_words=frozenset(w.casefold() for w in lists.get("thin_words", ())),
            groups=grouping.with_cues(
                lists, grouping.default_groups() if groups is None else groups
            ),
        )
        # The settings' own cues are built now; the built-in lists, when first read.
        return build_all(lexicon) if extra else lexicon


def _raw_regex(patterns: Sequence[str], flags: int = 0) -> re.Pattern[str] | None:
    """Patterns matched on the claim as written (case and all, unless `flags` say otherwise)."""
    return re.compile("|".join(f"(?:{p})" for p in patterns), flags) if patterns else None


@functools.cache
def _default_lists() -> Mapping[str, tuple[str, ...]]:
    # `[[groups]]` is read by `grouping`; the rest are cue lists.
    raw = grouping.lexicon_data()
    return {k: tuple(str(v) for v in vs) for k, vs in raw.items() if k != "groups"}


@functools.cache
def default_lexicon() -> Lexicon:
    return Lexicon.build()


# What keeps a line that cannot stand on its own (or that is all identifiers) worth something.
_RULES = frozenset({Feature.INSTRUCTION, Feature.CONSTRAINT})
_STANDING = _RULES | {Feature.FACT}

# What a request to remember must name to be one: the speaker, a name, a number or a fact.
_SPECIFIC = frozenset({Feature.FIRST_PERSON, Feature.NAMES, Feature.NUMBERS, Feature.FACT})


@dataclass(frozen=True, slots=True)
class Salience:
    features: frozenset[Feature]
    value: float  # in [0, 1.5]: what the text earns before rarity and corroboration

    @property
    def zero(self) -> bool:
        return bool(self.features & ZEROING)

    def names(self) -> str:
        return " ".join(sorted(f.value for f in self.features))


_HOLDERS = frozenset({Feature.FIRST_PERSON, Feature.NAMES})
_TOLD = frozenset({Feature.FACT, Feature.NAMES, Feature.NUMBERS})
_HOLDER = re.compile(r"\b(?:he|she|they|his|her|hers|their|him|them)\b", re.IGNORECASE)
# A discourse marker before a statement ("Reminder: My manager is ...", "FYI, our cluster
# ...") hides the sentence start that a named fact is anchored at.
_LEAD = re.compile(
    r"^(?:(?:reminder|fyi|heads up|note|btw|by the way|just so you know|p\.?s\.?|moreover|also|"
    r"plus|anyway|besides|and|so|oh|well|actually)\s*[:,.!-]*"
    r"|(?:hey|hi|hello|hiya|oh|wow|thanks|yeah|yes|ok|okay|well)[,!.]*(?:\s+[A-Z][a-z]+)?\s*[,!.]+)"
    r"\s+",
    re.IGNORECASE,
)


def _without_lead(body: str) -> str:
    lead = _LEAD.match(body)
    if lead is None:
        return body
    rest = body[lead.end() :]
    return rest[:1].upper() + rest[1:]


# A bare pronoun for what a light verb was done to leaves a line small talk below this many
# telling words (`pronoun_object` in the lexicon); a thing pointed at ("I made this dish"),
# below SHOWN_WORDS (`demonstrative_object`).
PRONOUN_WORDS = 4
SHOWN_WORDS = 3


def telling(tokens: Iterable[str], lex: Lexicon) -> int:
    """How many of a claim's content tokens tell something: not the negation mark, not the
    words of small talk ("awesome", "thanks"), not the thin words that say nothing specific
    (light verbs, vague nouns, appraisals, time words: `thin_words`)."""
    chatter = lex.chatter
    return sum(1 for t in tokens if t not in chatter)


def _smalltalk(
    text: Text,
    words: list[str],
    tokens: frozenset[str],
    lex: Lexicon,
    found: set[Feature],
    *,
    telling_needed: int = 2,
) -> bool:
    """Small talk: an appraisal or a generalisation with no holder ("The Eiffel Tower is so
    cool!", "Allergies can be tough"), a reaction to the listener or a caption, looking
    forward said as a feeling ("Can't wait for tomorrow's grand opening!"), what a light verb
    was done to said as a bare pronoun with little else ("I took it at the beach last
    month"); or fewer than two words left once acknowledgements and stopwords are removed
    (and, unless the claim tells something, vocatives: "Thanks, Melanie!"). A rule is never
    small talk, a constraint only as an appraisal; a disclosure or a fact needs two such
    words (a self-introduction one: the name, `telling_needed`); a preference ("I love
    hiking") or an event ("I had a great time at the park") passes that count
    (`scoring.clear` weighs how much it tells)."""
    if not text.ascii and lex.smalltalk_line.hit(text):
        return True
    if Feature.INSTRUCTION in found:
        return False
    if lex.appraisal.hit(text):
        return True  # what someone thinks of a thing ("Allergies can be tough"): nobody's
    if Feature.CONSTRAINT in found:
        return False
    if lex.reaction.hit(text) or lex.anticipation.hit(text):
        return True  # a reaction to the listener, however much it seems to tell
    if lex.offer.hit(text) and not found & _TOLD:
        return True  # "shoot me a question anytime you need!"
    if Feature.NAMES not in found and (
        (lex.pronoun_object.hit(text) and telling(tokens, lex) < PRONOUN_WORDS)
        or (lex.demonstrative_object.hit(text) and telling(tokens, lex) < SHOWN_WORDS)
    ):
        return True  # "I took it at the beach last month": took what?
    if found & {Feature.PREFERENCE, Feature.EVENT}:
        return False
    informative = bool(found & {Feature.DISCLOSURE, Feature.FACT})
    left = 0
    for w in words:
        f = w.casefold()
        if f in claims_mod.STOPWORDS or f in lex.smalltalk_words or f.isdigit():
            continue
        if not informative and w[:1].isupper() and w != "I" and w is not words[0]:
            continue  # a vocative names nobody's fact
        left += 1
        if left >= telling_needed:
            return False
    return True


def fragment(text: Text, lex: Lexicon) -> bool:
    """A clause cut from its sentence: starts in lower case with a connective ("since I
    moved ...", "its API and ..."). (A list item run into the next one's numeral is split
    apart by `claims.sentences` already.)"""
    first = text.raw[:1]
    return first.islower() and bool(text.words) and text.words[0] in lex.fragment_starts


def _directive(body: str, text: Text, lex: Lexicon) -> bool:
    """A rule said in a later clause: "..., so share mockups as Penpot links", "...; page her
    instead". The clause must follow a statement of its own (three words or more: "ok, send
    it now" is a one-off ask), and the sentence must say the rule lasts or whom it is about."""
    if lex.directive_clause is None or ("," not in body and ";" not in body):
        return False
    m = lex.directive_clause.search(body.replace("’", "'"))
    if m is None or _statement_words(body[: m.start()]) < 3:
        return False
    if _LASTING.search(m[0]) or lex.directive_target.hit(text):
        return True  # "..., so never suggest ...": the clause itself says the rule lasts
    clause = body[m.end() :]
    if lex.directive_object.hit(Text.of(clause)):
        return True
    return says_a_name(clause, ["", *claims_mod.words(clause)])


# "I'm vegetarian, so please only suggest ...": a rule's reason is a statement however short,
# and "I'm" is two words of it ("ok, send it now" is still one word before its ask).
_CONTRACTED = ("'m", "'re", "'s", "'ve", "'ll", "'d")
# An ask that says it lasts: "so always ...", "so never ...", "so please only ...".
_LASTING = re.compile(r"\b(?:always|never|only)\b", re.IGNORECASE)


def _statement_words(text: str) -> int:
    words = text.replace("’", "'").split()
    return len(words) + sum(1 for w in words if w.lower().endswith(_CONTRACTED))


# A night asks about one text several times (light scores a claim; REM judges a sentence
# quotable, then weighs it): each answer is worked out once. Lexicons compare by identity.
# A purge drops the texts kept (`text_memo.forget_all`): none outlives it in memory.
@text_cache(8192)
def assess(text: str, lexicon: Lexicon | None = None) -> Salience:
    """The features of one claim's text and the salience they earn."""
    lex = lexicon or default_lexicon()
    body = text.strip()
    words = claims_mod.words(body.replace("’", "'"))
    prepared = Text.of(body, words)
    # A banner or a fragment is worth nothing whatever else it holds: no need to look further.
    if lex.banner.hit(prepared):
        return Salience(frozenset({Feature.BANNER}), 0.0)
    if fragment(prepared, lex):
        return Salience(frozenset({Feature.FRAGMENT}), 0.0)
    found = {
        feature
        for feature, cues in (
            (Feature.INSTRUCTION, lex.instruction),
            (Feature.FIRST_PERSON, lex.first_person),
            (Feature.FACT, lex.fact),
            (Feature.EVENT, lex.event),
            (Feature.CONSTRAINT, lex.constraint),
            (Feature.PREFERENCE, lex.preference),
        )
        if cues.hit(prepared)
    }
    # A disclosure is the speaker telling about themselves; a named subject states a fact.
    if Feature.FIRST_PERSON in found and lex.disclosure.hit(prepared):
        found.add(Feature.DISCLOSURE)
    if lex.fact_named is not None and lex.fact_named.search(_without_lead(body)):
        found.add(Feature.FACT)
    # "I'm Marta, by the way": who the speaker is, told by the name alone.
    introduces = lex.introduction is not None and lex.introduction.search(body) is not None
    if introduces:
        found |= {Feature.FACT, Feature.DISCLOSURE}
    if says_a_name(body, words):
        found.add(Feature.NAMES)
    if says_a_number(body, prepared):
        found.add(Feature.NUMBERS)
    # A need is someone's: "Allergies can be tough", "a gluten-free crust" name no holder.
    if Feature.CONSTRAINT in found and not found & _HOLDERS and not _HOLDER.search(body):
        found.discard(Feature.CONSTRAINT)
    # Liking what is in view ("I love the dark sky", "I love how art lets us ...") appraises
    # it; what someone likes to do or have ("I love taking walks") is their preference.
    if Feature.PREFERENCE in found and lex.preference_of_view.hit(prepared):
        found.discard(Feature.PREFERENCE)
    # "Remember ..." is a rule to keep only when it names something to keep.
    if found & _SPECIFIC and lex.remember.hit(prepared):
        found.add(Feature.INSTRUCTION)
    if lex.time.hit(prepared):
        found.add(Feature.TIME)
    if lex.narration.hit(prepared):
        found.add(Feature.NARRATION)
    if Feature.INSTRUCTION not in found and _directive(body, prepared, lex):
        found.add(Feature.INSTRUCTION)
    if Feature.INSTRUCTION not in found and lex.request.hit(prepared):
        found.add(Feature.REQUEST)
    # A line that cannot stand on its own ("It is called Dorado", "Is nowhere near the city")
    # is no memory, unless a rule or a constraint is said in it.
    tokens = claims_mod.tokens_of(words)
    if not found & _RULES and (
        lex.fragment_lines.hit(prepared) or lex.pronoun_subject.hit(prepared)
    ):
        found.add(Feature.FRAGMENT)
    elif _smalltalk(prepared, words, tokens, lex, found, telling_needed=1 if introduces else 2):
        found.add(Feature.SMALLTALK)
    content = len(tokens) - (claims_mod.NEGATED in tokens)  # the mark is no word
    if words and content / len(words) >= 0.5 and content >= 4:
        found.add(Feature.DENSE)
    if lex.technical is not None and lex.technical.search(body):
        found.add(Feature.TECHNICAL)
    features = frozenset(found)
    if features & ZEROING:
        return Salience(features, 0.0)
    counted = features
    if Feature.TECHNICAL in features and not features & _STANDING:
        # Talk about the task at hand ("i removed them, tui-renderer.ts is fine now"): what
        # happened to a file is no lasting fact about anyone; a preference is still one. A
        # rule, a constraint or a named fact, identifiers and all ("The staging bucket is
        # called acme_stage_assets"), counts as it would without them.
        counted = features & {Feature.PREFERENCE}
    value = sum(WEIGHTS.get(f, 0.0) for f in counted)
    return Salience(features, round(min(value, 1.5), 6))


def parse_features(names: str | None) -> frozenset[Feature]:
    if not names:
        return frozenset()
    return frozenset(_FEATURES[n] for n in names.split() if n in _FEATURES)


_FEATURES = {f.value: f for f in Feature}  # a stored name -> its feature (read per candidate)


def group_of(text: str, lexicon: Lexicon | None = None) -> str:
    """The MEMORY.md heading an entry goes under: the first of the lexicon's groups (by
    rank, `lexicon.toml`'s `[[groups]]`) whose cues or checks it hits, else the fallback.
    Pass the effective lexicon (`lexicon_for` the settings' `[salience]`): a user's cues
    change headings as they change scores."""
    lex = lexicon or default_lexicon()
    prepared = Text.of(text)
    # Each check is asked of the group whose cues `cues` are.
    checks: dict[str, Callable[[Cues], bool]] = {
        "directive": lambda _: _directive(text, prepared, lex),
        "about_family": lambda _: _about_family(prepared),
        "only_an_alternative": lambda cues: _only_an_alternative(text, cues),
    }
    for group, cues in lex.groups:
        if group.fallback:
            return group.name
        hit = cues.hit(prepared) or any(checks[c](cues) for c in group.checks)
        if hit and not any(checks[c](cues) for c in group.unless):
            return group.name
    raise ValueError("the lexicon has no fallback group")


def _only_an_alternative(text: str, cues: Cues) -> bool:
    """Whether all `cues` (a group's) find in an entry is an alternative ("instead of",
    "rather than") with no taste for it: "We now deploy to Render instead of Fly.io" tells
    a change, "I prefer tea instead of coffee" a preference."""
    if _ALTERNATIVE.search(text) is None:
        return False
    return not cues.hit(Text.of(_ALTERNATIVE.sub(" ", text)))


_ALTERNATIVE = re.compile(r"\b(?:instead of|rather than)\b", re.IGNORECASE)


# Whose entry it is decides its heading before what it mentions: "My sister Anna lives in
# Lisbon and works as an architect" is about a person, though it names work. A boss or a
# teammate is work's.
_FAMILY = (
    claims_mod.HOLDERS
    - {claims_mod.stem(w) for w in ("boss", "manager", "colleague", "coworker", "teammate")}
) | {"family"}
_OWNERS = frozenset(["my", "our", "his", "her", "their", "s"])  # "s": the user's, Anna's


def _about_family(text: Text) -> bool:
    words = text.words
    return any(
        w in _OWNERS and claims_mod.stem(nxt) in _FAMILY for w, nxt in itertools.pairwise(words)
    )


_BUILT: dict[tuple[tuple[str, tuple[str, ...]], ...], Lexicon] = {}


def lexicon_for(extra: Mapping[str, Sequence[str]]) -> Lexicon:
    """The lexicon for a settings file's `[salience]` extensions, built once per distinct set."""
    if not extra:
        return default_lexicon()
    key = tuple(sorted((k, tuple(v)) for k, v in extra.items()))
    found = _BUILT.get(key)
    if found is None:
        found = _BUILT[key] = Lexicon.build(extra)
    return found
