"""Claims: the sentence-sized statements a corpus line makes, and how they fold together.

A claim's identity is its bag of content words, so "I'm allergic to peanuts" and
"I am allergic to peanuts." are one claim. Near-duplicates that differ in a word or two
fold by Jaccard similarity of those bags, found through an inverted index on their rarest
words. Everything here is deterministic and offline.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from dreaming import syntax
from dreaming.ingest._code import CODE_MARKS, command_line, mostly_code
from dreaming.ingest._echo import EchoIndex as EchoIndex  # its users find it here
from dreaming.text_memo import text_cache

# Harness decorations that are not the speaker's words: OpenClaw's envelope timestamp
# "[Sun 2026-03-08 22:03 GMT+9]" and reply directives such as "[[reply_to_current]]".
_ENVELOPE = re.compile(r"\[(?:[A-Z][a-z]{2} )?\d{4}-\d{2}-\d{2}[^\]]{0,40}\]\s*")
_DIRECTIVE = re.compile(r"\[\[[a-z_:0-9 -]{1,60}\]\]\s*")
# Our markers: MEMORY.md blocks and group headings, DREAMS.md entries, and the key comment
# that ends a compact MEMORY.md entry line.
_OUR_MARKERS = syntax.OWN_MARKER_RE
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_TICK_APOSTROPHE = re.compile(r"(?<=[^\W\d_])`(?=[^\W\d_])")
# A sentence ends at . ! ? (or a closing quote or bracket right after one) before a space,
# and at the full stops of languages written without spaces (。！？) wherever they stand.
# Every space-separated match starts with a space or a semicolon; the lookahead says so
# first, which lets the regex engine pass over other positions cheaply.
# A semicolon before a directive ("Dmitri owns the AWS account now; ask him before a deploy",
# "Never commit to main; open a PR against develop", "Don't use `any`; prefer `unknown`")
# joins two halves of one rule, so it ends no sentence there.
_ENDS_AT_SPACE = (
    r"(?=[\s;；])(?:(?:(?<=[.!?。！？])|(?<=[.!?][\"'”’)\]]))\s+|\s+[-•*]\s+"
    r"|\s*[;；](?!\s*(?:please\s+)?(?:ask|page|ping|send|forward|share|sign|route|keep|use|cc"
    r"|bcc|email|contact|book|link|point|escalate|loop|reach|check|talk|direct|refer|file"
    r"|submit|raise|prefer|open|run|avoid|rebase|squash|stick|wait|put|write|name|leave"
    r"|instead|otherwise|never|always|don'?t|do\s+not)\b)\s*)"
)
_ENDS_UNSPACED = r"(?<=[。！？])(?![\s。！？」』）])"
_SENTENCE_END = re.compile(f"{_ENDS_AT_SPACE}|{_ENDS_UNSPACED}")
# The same without what only text outside ASCII can hold (。！？): a third less to try at
# every position of a line in English.
_SENTENCE_END_ASCII = re.compile(_ENDS_AT_SPACE)
# Every end _SENTENCE_END finds has one of these around it (most lines of a chat are one
# sentence): `[.!?]["'”’)\]]?\s|\s[-•*]\s|[;；。！？]`, written to start with a character set,
# which the regex engine skips to (3.5x faster than trying every position).
_MAY_END = re.compile(
    r"[.!?;；。！？*•-](?:(?<=[;；。！？])|(?<=[.!?])[\"'”’)\]]?\s|(?<=\s[-•*])\s)"
)
# A numbered list run into one line ("1. Check its API 2. Write tests"): items split at their
# numerals, so no item ends in the next one's number ("its API and what it returns 4.").
_NUMBERED_LIST = re.compile(r"(?:^|\s)1[.)]\s.*?\s2[.)]\s")
_LIST_ITEM = re.compile(r"(?:^|\s+)\d{1,2}[.)]\s+")
# Abbreviations whose full stop ends no sentence: a split after one is undone.
_ABBREVIATION = re.compile(
    r"(?:\b(?:e\.g|i\.e|etc|vs|approx|Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|No|Inc|Ltd|Co|U\.S)\.)$",
    re.IGNORECASE,
)
# A match ends the text and is at most 7 characters ("approx."), so it starts within the
# last 8: searching from there finds what a search from the start would, without trying the
# alternatives at every position of a long sentence (with `pos`, \b still sees the
# character before it).
_ABBREVIATION_TAIL = 8
_WORD = re.compile(r"\w+", re.UNICODE)
# The same over ASCII text, where \w is [A-Za-z0-9_]: a fifth faster without Unicode tables.
_WORD_ASCII = re.compile(r"\w+", re.ASCII)
# Outside ASCII, words also end where the script changes: Japanese and Chinese put no spaces
# between words, so a run of kana or of han characters is a word of its own (a long han run
# is read as overlapping character pairs, the usual way to index Chinese without a lexicon).
_CJK = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf"  # kana, han
    "\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\uac00-\ud7af々〆ー"
)
_WORD_INTL = re.compile(
    r"[\u3040-\u309f]+"  # hiragana
    r"|[\u30a0-\u30ff\u31f0-\u31ffー\uff66-\uff9f]+"  # katakana
    r"|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff々〆]+"  # han
    r"|[\uac00-\ud7af]+"  # hangul
    rf"|[^\W{_CJK}]+"
)
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff々〆]{3,}")
# Role words are stopwords (entries say "the user is ..." where speech says "I am ..."), and
# so are fillers that wrap a fact without changing it ("please remember", "reminder:", "still")
# and the parts every URL has ("https", "www", "com"): a URL's words are its host and path.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just let me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves m s t d ll re ve im i'm it's that's don doesn
    didn isn wasn okay ok yes yeah also really just like get got go going one thing things
    user assistant said says please remember reminder still note noted btw anyway actually
    http https www com org
    から まで です ます でした ました する して した ない いる ある なる よう ので けど だけ など
    これ それ あれ この その あの もの こと とき ください ちゃん さん くん ね よ な か
    の を は が に で と も へ や わ ぞ ぜ さ
    的 了 是 在 和 就 都 也 有 我 你 他 她 们 这 那 吗 呢 吧
    """.split()  # noqa: SIM905
)

# Words that say a statement is meant to last: a durability cue lets a claim seen in one
# session through deep's gate.
_CUE_PHRASES = (
    "remember",
    "always",
    "never",
    "from now on",
    "prefer",
    "preference",
    "favou?rite",
    "allergic",
    "my name is",
    "call me",
    "i live",
    "i work",
    "i'm based",
    "birthday",
    "don't ever",
    "do not ever",
    "please note",
    "important:",
    "for future",
    "going forward",
    "my (?:wife|husband|partner|son|daughter|dog|cat)",
)
# Each phrase starts with a plain letter; a lookahead on those first letters lets the regex
# engine pass over every other position cheaply (same matches, about half the time).
_CUE = re.compile(
    f"(?={'|'.join(sorted({p[0] for p in _CUE_PHRASES}))})" + rf"\b({'|'.join(_CUE_PHRASES)})\b",
    re.IGNORECASE,
)


class Claim:
    """One claim: a sentence that states something, and its content tokens. What else it is
    (its key, whether it carries a durability cue, whether its speaker speaks of themselves)
    is worked out when first asked for, then kept: most of what an agent says is checked
    against the candidates by its tokens alone, matches none and is never asked more (light
    drops three in four of the agent's claims so). Immutable to its users: a claim is shared
    by every line that says the same (`_extract`'s cache)."""

    __slots__ = ("_cue", "_first", "_key", "_text", "_tokens", "_words")

    def __init__(self, text: str, tokens: frozenset[str], words: list[str]) -> None:
        self._text = text
        self._tokens = tokens
        self._words = words  # the sentence's words (`words(text)`), for `first_person`
        self._key: str | None = None
        self._cue: bool | None = None
        self._first: bool | None = None

    # Read-only: `claim.text = ...` raises (a property without a setter), as the frozen
    # dataclass it was did, at a fraction of a frozen class's cost to make.
    @property
    def text(self) -> str:
        return self._text

    @property
    def tokens(self) -> frozenset[str]:
        return self._tokens

    @property
    def key(self) -> str:
        """The claim's identity: a hash of its token set (`claim_key`)."""
        if self._key is None:
            self._key = _cached_claim_key(self._tokens)
        return self._key

    @property
    def durable_cue(self) -> bool:
        """Whether it says it is meant to last ("always", "from now on", "my name is")."""
        if self._cue is None:
            self._cue = _CUE.search(self._text) is not None
        return self._cue

    @property
    def first_person(self) -> bool:
        """Whether the speaker speaks of themselves: "I ...", "my ...", "we ..."."""
        if self._first is None:
            self._first = speaks_of_self(self._text, self._words)
        return self._first

    def __eq__(self, other: object) -> bool:
        # The rest is worked out from these two.
        if not isinstance(other, Claim):
            return NotImplemented
        return self._text == other._text and self._tokens == other._tokens

    def __hash__(self) -> int:
        return hash((self._text, self._tokens))

    def __repr__(self) -> str:
        return f"Claim(key={self.key!r}, text={self.text!r}, tokens={sorted(self.tokens)!r})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickled with what it has worked out (a reading child extracts claims for light):
        # the words are only for `first_person`, sent worked out.
        return _made, (self._text, self._tokens, self.key, self.durable_cue, self.first_person)


def _made(text: str, tokens: frozenset[str], key: str, cue: bool, first: bool) -> Claim:
    claim = Claim(text, tokens, [])
    claim._key, claim._cue, claim._first = key, cue, first
    return claim


# Words by which a speaker speaks of themselves. A first-person claim is its speaker's: where
# the transcript names who said it, that person is part of the claim's identity (`held_key`).
_FIRST_PERSON = frozenset(
    "i me my mine myself we us our ours ourselves 私 僕 俺 わたし ぼく おれ 我 我们 うち".split()  # noqa: SIM905
)
_FIRST_PERSON_CJK = re.compile(r"[私僕俺我]")


def speaks_of_self(text: str, found: list[str] | None = None) -> bool:
    """Whether `text` (whose words `found` are, when known) speaks of its speaker."""
    if not _FIRST_PERSON.isdisjoint(map(str.casefold, words(text) if found is None else found)):
        return True
    return not text.isascii() and _FIRST_PERSON_CJK.search(text) is not None


def held_key(key: str, holder: str | None) -> str:
    """The key of a claim said by `holder` of themselves ("I live in Leeds" by Caroline and
    by Melanie are two claims); a claim without a named holder keeps its plain key."""
    if holder is None:
        return key
    joined = f"{key}\x00{holder_id(holder)}"
    return "c:" + hashlib.blake2b(joined.encode("utf-8"), digest_size=8).hexdigest()


HOLDER_MARK = "@"  # opens a holder's guard token: no content token has it (they are \w runs)


def holder_id(name: str) -> str:
    """A named holder as the guards compare it: case and spacing do not tell two apart."""
    return HOLDER_MARK + " ".join(name.casefold().split())


def stem(word: str) -> str:
    # Deliberately tiny: folds plurals, which is most of what near-duplicates differ by.
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@text_cache(1 << 14)
def _token(word: str) -> str:
    """A word's content token, or "" for a stopword or a number, or the negation mark for a
    negator. Cached: the vocabulary of a run is small next to its word count (bounded, so
    memory stays flat in input size)."""
    w = word.casefold()
    if w in _NEGATORS:
        return NEGATED
    if w in STOPWORDS or w.isdigit():
        return ""
    return stem(w)


def words(text: str) -> list[str]:
    """The words of a text: \\w runs, further split by script outside ASCII (see _WORD_INTL);
    a han run of three or more characters becomes its overlapping character pairs."""
    if text.isascii():
        return _WORD_ASCII.findall(text)
    out: list[str] = []
    for w in _WORD_INTL.findall(text):
        if len(w) >= 3 and _HAN_RUN.fullmatch(w):
            out.extend(w[i : i + 2] for i in range(len(w) - 1))
        else:
            out.append(w)
    return out


# "I don't eat pork" and "I eat pork" have the same content words; a negation mark among the
# tokens keeps them two claims (these negators are stopwords, so nothing else would tell them
# apart). Not every negator negates the claim: "don't forget ..." asks to remember it, "No
# worries, ..." opens it, "... never before" only insists; "never" itself marks it otherwise.
NEGATED = "¬"
_NEGATORS = frozenset(["not", "no", "nor", "t", "cannot", "ない", "ません", "不", "没"])
_NOT_NEGATING_AFTER = frozenset(["forget"])  # "don't forget", "do not forget"
_INTERJECTION_AFTER_NO = frozenset(["worries", "worry", "problem", "problems", "doubt", "wonder"])
_EMPHASIS_AFTER_NEVER = frozenset(["before", "earlier", "later", "sooner", "again", "ever"])

# Whose fact it is: "My daughter is allergic to peanuts" is not "I'm allergic to peanuts",
# however many other words they share. Two claims fold only if they hold the same of these
# (and the same negation mark), so a fold never moves a fact to someone else.
HOLDERS = frozenset(
    stem(w)
    for w in """
    wife husband partner spouse fiance fiancee girlfriend boyfriend son daughter kid kids
    child children baby mom mum mother dad father parent parents sister brother sibling
    grandma grandmother grandpa grandfather grandson granddaughter aunt uncle cousin niece
    nephew friend friends boss manager colleague coworker teammate neighbor neighbour
    roommate dog cat
    """.split()  # noqa: SIM905
)
GUARDED = HOLDERS | {NEGATED}


def _tokens(words: list[str]) -> frozenset[str]:
    found = set(map(_token, words))
    found.discard("")
    if NEGATED in found or "never" in found:
        if _negates(words):
            found.add(NEGATED)
        else:
            found.discard(NEGATED)
    return frozenset(found)


def _negates(words: list[str]) -> bool:
    """Whether a negator in `words` negates the claim (see `_NEGATORS`)."""
    lowered = [w.casefold() for w in words]
    for i, w in enumerate(lowered):
        after = lowered[i + 1] if i + 1 < len(lowered) else ""
        if w == "never":
            if after and after not in _EMPHASIS_AFTER_NEVER:
                return True
        elif w in _NEGATORS:
            if after in _NOT_NEGATING_AFTER or (i == 0 and after in _INTERJECTION_AFTER_NO):
                continue
            return True
    return False


def tokens_of(found: list[str]) -> frozenset[str]:
    """Content tokens of words already found with `words`."""
    return _tokens(found)


def content_tokens(text: str) -> frozenset[str]:
    return _tokens(words(text))


def query_words(text: str) -> frozenset[str]:
    """Content words as written (no stemming), for full-text search queries."""
    found = (w.casefold() for w in words(text))
    return frozenset(w for w in found if w not in STOPWORDS and not w.isdigit())


def claim_key(tokens: Iterable[str]) -> str:
    joined = " ".join(sorted(tokens))
    return "c:" + hashlib.blake2b(joined.encode("utf-8"), digest_size=8).hexdigest()


# A claim said again has the same token set: its key is looked up, not hashed again.
# Cache sizes are kept small enough that full caches stay a few MB (a key entry holds its
# token set, ~1 KB): they fill on a big input, and memory must not grow with it.
_cached_claim_key = text_cache(1 << 12)(claim_key)


def clean(text: str) -> str:
    # Our own block markers quoted back: the text between them is matched as a recall of
    # the entry; the markers themselves are never part of a claim. (Each pattern needs its
    # literal opening characters: a line without them skips the regex.)
    if "<!--" in text:
        text = _OUR_MARKERS.sub(" ", text)
    if "[" in text:
        text = _ENVELOPE.sub("", text)
        if "[[" in text:
            text = _DIRECTIVE.sub("", text)
    if "`" in text:
        if "```" in text:
            text = _FENCE.sub(" ", text)
        # A backtick between letters is an apostrophe typed on the wrong key ("it`s").
        text = _TICK_APOSTROPHE.sub("'", text)
    return text


def extract(text: str, *, min_words: int, max_words: int) -> list[Claim]:
    """Claims in a corpus line. Questions, sentences that are mostly code (a pasted snippet,
    a trace, a command line) and fragments too short or too long to be one fact are not
    claims; inline code, paths and URLs in a sentence are words of it."""
    return list(_extract(text, min_words, max_words))


# Agents and people repeat whole lines ("Run the whole test suite and tell me what fails."):
# a line seen recently is not taken apart again. Claims are immutable, so sharing is safe;
# the cache is bounded, so memory stays flat in input size.
EXTRACT_CACHE = 2048


@text_cache(EXTRACT_CACHE)
def _extract(text: str, min_words: int, max_words: int) -> tuple[Claim, ...]:
    claims: list[Claim] = []
    seen: set[frozenset[str]] = set()
    text = clean(text)
    marked = CODE_MARKS.search(text) is not None  # most lines hold no code at all
    for raw in sentences(text):
        sentence = raw.strip().strip("*_#>\"' ")
        if sentence.count("`") % 2:  # a stray backtick at an end opens no code span
            sentence = sentence.strip("*_#>`\"' ")
        # A question asks, and a line ending in a colon only introduces what follows.
        if not sentence or sentence.endswith(("?", "？", ":", "：")):
            continue
        # Its length first: a tenth of the cost of weighing its code, which a sentence too
        # short or too long (a pasted block is often both code and too long) is spared.
        found = words(sentence)
        if not (min_words <= len(found) <= max_words):
            continue
        marks = marked and CODE_MARKS.search(sentence) is not None
        if (marks or command_line(sentence)) and mostly_code(sentence):
            continue
        tokens = _tokens(found)
        if len(tokens) - (NEGATED in tokens) < 2:  # the mark is no word
            continue
        # Said twice in the line, a claim counts once. (Its key is a hash of its tokens, so
        # equal tokens are equal keys; the key itself is made only when asked for.)
        if tokens in seen:
            continue
        seen.add(tokens)
        claims.append(Claim(sentence, tokens, found))
    return tuple(claims)


# `extract`'s claims as its cache holds them, without the copy: a tuple every caller shares.
extract_cached = _extract


def sentences(text: str) -> list[str]:
    """A text's sentences, whole: a claim is a sentence that stands on its own, never a clause
    cut at a comma. Numbered items run into one line split at their numerals, and a split
    after an abbreviation ("e.g.", "Dr.") is undone."""
    # (the list's "1." or "1)" looked for first: the regex costs a pass over every line)
    if ("1." in text or "1)" in text) and _NUMBERED_LIST.search(text):
        parts = [p for item in _LIST_ITEM.split(text) for p in _split(item)]
    else:
        parts = _split(text)
    if "." not in text or len(parts) < 2:
        return parts
    merged: list[str] = []
    for part in parts:
        if merged and _ends_in_abbreviation(last := merged[-1].rstrip()):
            merged[-1] = f"{last} {part.lstrip()}"
        else:
            merged.append(part)
    return merged


def _ends_in_abbreviation(text: str) -> bool:
    """Whether `text` ends in an abbreviation's full stop ("Dr.", "e.g."): only its tail is
    searched (see _ABBREVIATION_TAIL)."""
    return _ABBREVIATION.search(text, max(0, len(text) - _ABBREVIATION_TAIL)) is not None


_CODE_SPAN = re.compile(r"`[^`]+`")


def _split(text: str) -> list[str]:
    """`_SENTENCE_END.split`, except inside a `code span` ("Run `make test; make lint` first")."""
    if _MAY_END.search(text) is None:
        return [text]
    end = _SENTENCE_END_ASCII if text.isascii() else _SENTENCE_END
    if "`" not in text:
        return end.split(text)
    spans = [m.span() for m in _CODE_SPAN.finditer(text)]
    if not spans:
        return end.split(text)
    parts: list[str] = []
    start = 0
    for m in end.finditer(text):
        if any(a < m.start() < b for a, b in spans):
            continue
        parts.append(text[start : m.start()])
        start = m.end()
    parts.append(text[start:])
    return parts


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)


MAX_PROBE = 400  # candidate sets scored per lookup at most
EXTRA_PROBE = 2  # words counted past the probe to rule sets out before scoring them
COUNT_FROM = 32  # a pool of more sets is counted first (`best`); a smaller one scored whole


def _guard(tokens: frozenset[str], holder: str | None) -> frozenset[str]:
    guard = tokens & GUARDED
    return guard if holder is None else guard | {holder_id(holder)}


class SimilarityIndex:
    """Finds the most similar known token set at or above a threshold.

    Two sets with Jaccard >= t share at least one of any (|A| - ceil(t*|A|) + 1) of A's
    words, so probing A's rarest words that many is enough to find every match. A set is
    found only for a query of the same guard: the same holder words, negation mark and
    named holder (whose "I" it is: `holder`), so a match never moves a fact to someone else."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._postings: dict[str, set[int]] = defaultdict(set)
        self._sets: dict[int, frozenset[str]] = {}
        self._guards: dict[int, frozenset[str]] = {}

    def add(self, ident: int, tokens: frozenset[str], holder: str | None = None) -> None:
        self._sets[ident] = tokens
        self._guards[ident] = _guard(tokens, holder)
        for t in tokens:
            self._postings[t].add(ident)

    def rename(self, old: int, new: int) -> None:
        tokens = self._sets.pop(old)
        self._sets[new] = tokens
        self._guards[new] = self._guards.pop(old)
        for t in tokens:
            self._postings[t].discard(old)
            self._postings[t].add(new)

    def discard(self, ident: int) -> None:
        self._guards.pop(ident, None)
        for t in self._sets.pop(ident, frozenset()):
            self._postings[t].discard(ident)

    def could_match(self, tokens: frozenset[str]) -> bool:
        """False when no set here can match `tokens`, by likeness (`best`) or as the same set:
        a match shares at least t*|A| of A's words, so that many must be in some set here.
        A few dictionary lookups, where `best` sorts and counts; for the claims that can only
        corroborate (the agent's), which mostly repeat nothing."""
        need = math.ceil(self.threshold * len(tokens) - 1e-9)
        postings = self._postings
        for t in tokens:
            if postings.get(t):
                need -= 1
                if need <= 0:
                    return True
        return need <= 0

    def best(self, tokens: frozenset[str], holder: str | None = None) -> int | None:
        n = len(tokens)
        if not n or not self._sets:
            return None
        threshold = self.threshold
        need = max(n - int(threshold * n + 0.999999) + 1, 1)
        postings = self._postings
        # Words from rarest (fewest postings; ties by the word itself): the first `need` probe.
        by_rarity = sorted([(len(postings.get(t, ())), t) for t in tokens])
        seen: set[int] = set()
        for size, t in by_rarity[:need]:
            if size:
                seen.update(postings[t])
                if len(seen) >= MAX_PROBE:
                    break  # a fold is best-effort past this: bounded cost, still deterministic
        if not seen:
            return None
        # The sets in play: all found, or past the cap the lowest ids of them, as always.
        capped = len(seen) >= MAX_PROBE
        pool = set(sorted(seen)[:MAX_PROBE]) if capped else seen
        if len(pool) > COUNT_FROM:
            # Only sets that can still match: a match shares >= t*|A| words with A, so it
            # lacks at most |A| - ceil(t*|A|) and holds >= `hits` of A's `need` + EXTRA_PROBE
            # rarest words (counted from the postings, which list every set holding a word).
            counted = by_rarity[: need + EXTRA_PROBE]
            hits = len(counted) - (n - math.ceil(threshold * n - 1e-9))
            shared: Counter[int] = Counter()
            for k, (size, t) in enumerate(counted):
                if size:
                    # A probed word's sets are all in the pool unless the cap cut it.
                    shared.update(postings[t] if k < need and not capped else postings[t] & pool)
            pool = {i for i, c in shared.items() if c >= hits}
        # Jaccard >= t needs t*|A| <= |B| <= |A|/t: skip sets of the wrong size unscored.
        low, high = threshold * n, n / threshold
        sets, guards, guard = self._sets, self._guards, _guard(tokens, holder)
        best_id: int | None = None
        best_score = threshold
        for ident in pool:
            other = sets.get(ident)
            if other is None:  # an id reused without `discard`: its old words still list it
                continue
            m = len(other)
            if m < low or m > high or guards[ident] != guard:
                continue
            common = len(tokens & other)
            score = common / (n + m - common)  # jaccard(tokens, other)
            # Of equal scores the lowest id wins (the pool is in no particular order).
            if score > best_score or (score == best_score and (best_id is None or ident < best_id)):
                best_id, best_score = ident, score
        return best_id

    def __len__(self) -> int:
        return len(self._sets)
