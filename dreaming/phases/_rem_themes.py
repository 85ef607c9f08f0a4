"""REM's themes: which concepts kept coming back in the lookback window, and how strongly.

A concept (a content token, as candidates carry it) recurs when the claims carrying it were
said in several sessions on several days. Its weight is that recurrence, the owner's
sessions and days counting fully and the agent's own less, times how specific the word is
in the agent's corpus (an inverse document frequency over all its candidates): a coding
agent says "add" and "file" in a great many claims, "credo" in a few. Small talk, banners,
the agent's narration, stopwords and the lexicon's small-talk words are never themes.
Everything here is deterministic: ties go to the parts of the measure, then to the concept
said first, never to the alphabet.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, and_, bindparam, select

from dreaming.ingest import claims as claims_mod
from dreaming.ingest import salience as salience_mod
from dreaming.ingest.admission import OriginClass
from dreaming.ingest.cues import Text
from dreaming.ingest.salience import Feature
from dreaming.memory import diary
from dreaming.store.tables import CANDIDATE_EVIDENCE, CANDIDATES

# Words of any conversation that name no subject of it: a theme is never one of these, nor
# a stopword or a small-talk word of the lexicon. Function words the stopwords leave out,
# the commonest verbs, adjectives, adverbs and nouns of everyday English, fillers.
_DULL = frozenset(
    """
    else except etc though although yet via per within without across along around among
    upon onto toward towards whether either neither every each whole unless since still
    already almost maybe perhaps probably rather quite enough instead anyway anyways alright
    otherwise later soon ever often sometimes usually never always again else also even
    here there everywhere somewhere anywhere nowhere away back together apart ahead
    basically literally totally pretty mostly nearly simply exactly really actually
    certainly definitely obviously clearly generally especially currently recently finally
    properly correctly manually nicely quickly slowly easily directly fully completely
    want wants wanted need needs needed make makes made making know knew known think
    thought seem seems seemed look looks looked looking see saw seen come comes came
    coming go goes went gone get gets got getting give gave given take took taken put
    puts putting use uses used using try tries tried trying find found keep kept let say
    says said saying tell told ask asked show shows showed shown call called work works
    worked working start started starting stop stopped help helps helped mean means meant
    feel felt turn turned move moved set sets setting done doing does doe did able
    happen happens happened become became leave left bring brought begin began hold held
    include includes included including provide provided allow allowed consider
    thing things stuff way ways time times day days part parts kind sort lot lots bit
    case cases point fact example problem problems issue issues question answer idea
    number place side end rest sure fine nice good bad better best worse worst new old
    big small same different full whole real possible likely easy hard simple right
    wrong quick current other another next last first second third own certain clear
    true false main whatever anything something everything nothing someone anyone
    everyone somebody anybody everybody today tomorrow yesterday tonight week month year
    minute hour moment morning night hmm hmmm ugh idk tbh wrt imo fyi btw pls plz shit
    damn fuck fucking crap gonna gotta wanna wait waiting win won lose lost tough joy
    passion experience ones check checking create created run running ran
    """.split()  # noqa: SIM905
)
# Whose words count, and how much: the owner's fully, the agent's own less; what third
# parties (email, group chats) or system lines said is no theme of the owner's life.
SPEAKER_WEIGHT = {OriginClass.OWNER.value: 1.0, OriginClass.AGENT.value: 0.4}
_DAY_WEIGHT = 0.5  # a day a concept came up adds this much of a session
_CLAIM_WEIGHT = 1.0  # and how often it was said, on a log scale
_UNTHEMED = frozenset({Feature.SMALLTALK, Feature.BANNER})
# Sentences a quote would rather not be: task talk, the agent's narration, a one-off request.
_CHATTER = frozenset({Feature.TECHNICAL, Feature.NARRATION, Feature.REQUEST})


@dataclass(frozen=True, slots=True)
class Evidence:
    session: str
    day: str
    origin: str
    line: int  # the corpus line's id: earlier lines were said first


# (session, tokens) of every candidate the owner or the agent said (built once: see
# `store.compiled`).
_SAID_IN_SESSIONS = (
    select(CANDIDATE_EVIDENCE.c.session_id, CANDIDATES.c.tokens)
    .join(CANDIDATES, CANDIDATES.c.id == CANDIDATE_EVIDENCE.c.candidate_id)
    .where(
        and_(
            CANDIDATE_EVIDENCE.c.agent == bindparam("agent"),
            CANDIDATE_EVIDENCE.c.origin_class.in_(tuple(SPEAKER_WEIGHT)),
        )
    )
    .distinct()
)


class Specificity:
    """How specific a concept is to some conversations rather than all: its inverse document
    frequency over the agent's sessions (every one it has, not only the window's), smoothed
    and scaled to (0, 1]. What the agent says in nearly every session ("file", "test" for a
    coding agent) is its boilerplate; "peanuts" or "Lisbon" come up in a few."""

    def __init__(self, df: Mapping[str, int], n: int) -> None:
        self.df, self.n = df, n
        self._top = math.log(n + 1) + 1.0

    @classmethod
    def of(
        cls,
        conn: Connection,
        agent: str,
        words: set[str],
        extra: Iterable[tuple[str, str]] = (),
    ) -> Specificity:
        """Session frequencies of `words` from every candidate's owner and agent evidence,
        and from `extra` (session, tokens): the agent's claims no candidate holds."""
        seen: dict[str, set[str]] = defaultdict(set)
        sessions: set[str] = set()
        said = conn.execute(_SAID_IN_SESSIONS, {"agent": agent})
        for session_id, tokens in itertools.chain(said, extra):
            sessions.add(session_id)
            for t in tokens.split():
                if t in words:
                    seen[t].add(session_id)
        return cls({w: len(v) for w, v in seen.items()}, len(sessions))

    def of_word(self, word: str) -> float:
        df = min(self.df.get(word, 1), self.n)
        # Damped (a square root): a concept of every session, such as the project the
        # conversations are about, still counts, at about half the weight of a rare one.
        return math.sqrt((math.log((self.n + 1) / (df + 1)) + 1.0) / self._top)


# -- counting recurrence ----------------------------------------------------------------------


@functools.lru_cache(maxsize=8)  # a lexicon is built once a process (and hashed by identity)
def excluded(lexicon: salience_mod.Lexicon) -> frozenset[str]:
    """Concepts that are never themes: dull words and the lexicon's small talk (as tokens)."""
    words = _DULL | claims_mod.STOPWORDS | lexicon.smalltalk_words
    return frozenset(words | {claims_mod.stem(w) for w in words})


@dataclass
class Recurrence:
    """Where one concept came up: the speaker weight of each session and day (the owner's
    if the owner said it there), where it was first said (the corpus line, the word's place
    in its claim), the candidates carrying it."""

    sessions: dict[str, float] = field(default_factory=dict)
    days: dict[str, float] = field(default_factory=dict)
    first: tuple[int, int] = (0, 0)
    candidates: list[int] = field(default_factory=list)
    claims: float = 0.0  # the claims carrying it, each by its speaker's weight

    def weight(self, specificity: float) -> float:
        said = sum(self.sessions.values()) + _DAY_WEIGHT * sum(self.days.values())
        return (said + _CLAIM_WEIGHT * math.log2(1 + self.claims)) * specificity

    def owner_sessions(self) -> int:
        return sum(1 for v in self.sessions.values() if v >= 1.0)

    def order(self) -> tuple[int, int, int, tuple[int, int]]:
        """Ties of the weight: more of the owner's sessions, sessions, days; said first."""
        return (-self.owner_sessions(), -len(self.sessions), -len(self.days), self.first)

    def add(
        self, sessions: Mapping[str, float], days: Mapping[str, float], first: tuple[int, int]
    ) -> None:
        for s, v in sessions.items():
            self.sessions[s] = max(self.sessions.get(s, 0.0), v)
        for d, v in days.items():
            self.days[d] = max(self.days.get(d, 0.0), v)
        self.first = first if self.first == (0, 0) else min(self.first, first)


@dataclass(frozen=True, slots=True)
class _Claim:
    """One claim as the tally read it: its sentences' words and their tokens, the sessions
    and days it was said on (by speaker weight), its first corpus line, and the concepts it
    carries."""

    said: list[list[str]]
    tokens: list[list[str]]
    sessions: dict[str, float]
    days: dict[str, float]
    line: int
    concepts: frozenset[str]


class Tally:
    """Concepts over the window, counted as each claim comes; and, worked out only for the
    few concepts that become themes, the two-word phrases, co-occurring concepts and surface
    forms around them (from the claims whose sentences hold the concept, in the order they
    came, so every count and every tie is what counting all of them up front gives)."""

    def __init__(self, lexicon: salience_mod.Lexicon) -> None:
        self.lexicon = lexicon
        self.excluded = excluded(lexicon)
        self.words: dict[str, Recurrence] = defaultdict(Recurrence)
        self.rank: dict[int, tuple[int, float]] = {}  # candidate -> (owner said it?, score)
        self._claims: list[_Claim] = []
        # token -> the claims (indexes into _claims) whose sentences hold it
        self._holding: dict[str, list[int]] = defaultdict(list)
        self._forms: dict[str, Counter[str]] = {}

    def themable(self, token: str) -> bool:
        return (
            len(token) >= (3 if token.isascii() else 2)
            and token.isalpha()
            and token not in self.excluded
        )

    def add(self, row: Any, evidence: Sequence[Evidence]) -> None:
        if not evidence:
            return
        owner = any(e.origin == OriginClass.OWNER.value for e in evidence)
        if row.features is None and not owner and narrates(row.text, self.lexicon):
            return  # the agent's narration (told before, and instead of, the whole assessment)
        features = (
            salience_mod.parse_features(row.features)
            if row.features is not None
            else salience_mod.assess(row.text, self.lexicon).features  # not scored (yet)
        )
        if features & _UNTHEMED or (Feature.NARRATION in features and not owner):
            return  # small talk, a banner, or the agent's narration: nobody's theme
        sessions: dict[str, float] = {}
        days: dict[str, float] = {}
        for e in evidence:
            v = SPEAKER_WEIGHT[e.origin]
            sessions[e.session] = max(sessions.get(e.session, 0.0), v)
            days[e.day] = max(days.get(e.day, 0.0), v)
        line = min(e.line for e in evidence)
        self.rank[row.id] = (int(owner), float(row.score or 0.0))
        # The words people said, not the markdown around them: a heading's words ("Epic",
        # "Description") are no theme, nor do they make a phrase with what follows them.
        said = [
            claims_mod.words(x)
            for x in diary.clean_sentences(row.text)
            if not x.endswith((":", "："))  # a label or a title ("Description:")
        ]
        tokens = [[_token(w) for w in ws] for ws in said]
        place: dict[str, int] = {}
        for t in itertools.chain.from_iterable(tokens):
            place.setdefault(t, len(place))
        carried = set(row.tokens.split())
        words = [t for t in place if t in carried and self.themable(t)]
        said_most = max(sessions.values())
        for w in words:
            rec = self.words[w]
            rec.add(sessions, days, (line, place[w]))
            rec.candidates.append(row.id)
            rec.claims += said_most
        index = len(self._claims)
        self._claims.append(_Claim(said, tokens, sessions, days, line, frozenset(words)))
        for t in place:
            if t:
                self._holding[t].append(index)

    def _forms_of(self, token: str) -> Counter[str]:
        """How `token` was written, by count (the first sentence word casefolded)."""
        forms = self._forms.get(token)
        if forms is None:
            forms = self._forms[token] = Counter()
            for k in self._holding.get(token, ()):
                for ws, ts in zip(self._claims[k].said, self._claims[k].tokens, strict=True):
                    for i, (w, t) in enumerate(zip(ws, ts, strict=True)):
                        if t == token:
                            forms[w if i else w.casefold()] += 1
        return forms

    def _phrases_with(
        self, word: str
    ) -> tuple[dict[tuple[str, str], Recurrence], dict[tuple[str, str], Counter[str]]]:
        """The two-word phrases holding `word`, where they came up and how they were written.
        Two concepts side by side ("tui renderer"), or joined by one stopword that negates
        nothing ("allergic to peanuts"), make a phrase."""
        phrases: dict[tuple[str, str], Recurrence] = defaultdict(Recurrence)
        forms: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for k in self._holding.get(word, ()):
            claim = self._claims[k]
            for said, tokens in zip(claim.said, claim.tokens, strict=True):
                if word not in tokens:
                    continue
                for i, a in enumerate(tokens):
                    if not (a and self.themable(a)):
                        continue
                    for j in range(i + 1, min(i + 3, len(tokens))):
                        b = tokens[j]
                        if j == i + 2 and (tokens[i + 1] or said[i + 1].casefold() in _NEGATING):
                            break
                        if b and b != a and self.themable(b):
                            if word in (a, b):
                                phrases[(a, b)].add(claim.sessions, claim.days, (claim.line, i))
                                forms[(a, b)][" ".join(said[i : j + 1]).casefold()] += 1
                            break
        return phrases, forms

    def label(self, token: str) -> str:
        common = self._forms_of(token).most_common(1)
        return common[0][0] if common else token

    def phrase(self, word: str, min_sessions: int) -> tuple[str, str]:
        """The two-word phrase a concept mostly came up in ("code quality"), and the other
        word of it; else the word's own label and ""."""
        need = max(min_sessions, math.ceil(0.6 * len(self.words[word].sessions)))
        phrases, forms = self._phrases_with(word)
        found = [(p, r) for p, r in phrases.items() if len(r.sessions) >= need and len(r.days) >= 1]
        if not found:
            return self.label(word), ""
        pair, _ = min(found, key=lambda x: (*x[1].order(), x[0]))
        form = forms[pair].most_common(1)[0][0]
        return form, pair[1] if pair[0] == word else pair[0]

    def related(self, word: str, partner: str, specificity: Specificity) -> list[str]:
        """The three concepts said most with it (in most sessions, the specific ones first)."""
        together: Counter[str] = Counter()
        for k in self._holding.get(word, ()):
            claim = self._claims[k]
            if word in claim.concepts:
                for x in claim.concepts:
                    if x != word:
                        together[x] += len(claim.sessions)
        scored = [
            (-n * specificity.of_word(x), self.words[x].first, x)
            for x, n in together.items()
            if x != partner and x in self.words
        ]
        return [x for *_, x in sorted(scored)[:3]]

    def contenders(self, word: str) -> list[int]:
        """The candidates a theme's quote is looked for in: the owner's first, best first."""
        ids = self.words[word].candidates
        return sorted(ids, key=lambda c: (-self.rank[c][0], -self.rank[c][1], c))[:12]


def narrates(text: str, lexicon: salience_mod.Lexicon) -> bool:
    """Whether `salience.assess(text)` holds NARRATION, told without the rest of it: exactly
    when the text is no banner and no fragment (assess returns early on those) and a
    narration cue hits. The agent's narration is a third of its claims in a window, and REM
    drops it whatever else it says (tests/test_salience.py holds the two to agreement)."""
    body = text.strip()
    prepared = Text.of(body, claims_mod.words(body.replace("’", "'")))
    return (
        not lexicon.banner.hit(prepared)
        and not salience_mod.fragment(prepared, lexicon)
        and lexicon.narration.hit(prepared)
    )


_NEGATING = frozenset({"not", "no", "nor", "never", "t", "cannot", "without"})


def _token(word: str) -> str:
    f = word.casefold()
    return "" if f in claims_mod.STOPWORDS or f.isdigit() else claims_mod.stem(f)


def quality(sentence: str, origin: str, lexicon: salience_mod.Lexicon) -> float | None:
    """How well a sentence carries a theme: the owner's word, what it tells (salience), a
    sentence that looks like one (capital, full stop), not task chatter. None: the agent's
    narration ("Now I need to check ..."), which is never quoted."""
    s = salience_mod.assess(sentence, lexicon)
    if origin != OriginClass.OWNER.value and Feature.NARRATION in s.features:
        return None
    value = s.value + (1.0 if origin == OriginClass.OWNER.value else 0.0)
    value += 0.2 if sentence.rstrip("\"'”’)").endswith((".", "!", "。", "！")) else 0.0
    value += 0.1 if sentence[:1].isupper() else 0.0
    value -= 0.3 * len(s.features & _CHATTER)
    if not 40 <= len(sentence) <= 160:
        value -= 0.2
    return value
