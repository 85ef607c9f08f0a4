"""DREAMS.md: dated diary entries inside managed markers; operator text kept byte for byte.

    <!-- dreaming:diary 2026-03-14 -->
    ## 2026-03-14
    ...
    <!-- /dreaming:diary -->

Writing the entry of a date that already has one replaces it, so re-running REM for the same
night is idempotent.

Each entry's window (the sessions REM read for it) is kept in the `diary_windows` table,
which this module owns: REM records it before it writes the entry, every run of that day
adding to it, so the table lists every session an entry may draw on. A purge removes the
entries whose window read one of its sessions (`without_days`) and their rows
(`forget_days`); an entry with no recorded window (written before windows were kept) is
decided from days by forget.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, and_, delete, select

from dreaming.ingest import claims as claims_mod
from dreaming.ingest import salience as salience_mod
from dreaming.store.dialect import insert_ignore
from dreaming.store.tables import DIARY_WINDOWS
from dreaming.syntax import DIARY_RE as ENTRY_RE
from dreaming.syntax import atomic_write, load_text
from dreaming.syntax import render_diary as render_entry


@dataclass(frozen=True, slots=True)
class DiaryEntry:
    day: str
    body: str


def entries(text: str) -> list[DiaryEntry]:
    return [DiaryEntry(m["day"], m["body"]) for m in ENTRY_RE.finditer(text)]


def with_entry(text: str, day: str, body: str) -> str:
    """`text` with the diary entry for `day` set to `body` (in place, or appended)."""
    block = render_entry(day, body)
    for m in ENTRY_RE.finditer(text):
        if m["day"] == day:
            return text[: m.start()] + block + text[m.end() :]
    if text and not text.endswith("\n"):
        text += "\n"
    return text + block


def read(path: Path) -> str:
    return load_text(path) or ""


def write_entry(path: Path, day: str, body: str) -> bool:
    """Set the day's entry in DREAMS.md. Returns whether the file changed."""
    current = read(path)
    new = with_entry(current or "# DREAMS.md\n\n", day, body)
    if new == current:
        return False
    atomic_write(path, new)
    return True


def without_days(text: str, days: Collection[str]) -> tuple[str, list[str]]:
    """`text` without the diary entries of `days` (operator text kept byte for byte), and
    the days whose entries were removed."""
    removed: list[str] = []
    out: list[str] = []
    at = 0
    for m in ENTRY_RE.finditer(text):
        if m["day"] in days:
            out.append(text[at : m.start()])
            at = m.end()
            removed.append(m["day"])
    out.append(text[at:])
    return "".join(out), removed


def remove_days(path: Path, days: Collection[str]) -> list[str]:
    """Remove the entries of `days` from DREAMS.md. Returns the days removed."""
    current = read(path)
    new, removed = without_days(current, days)
    if removed:
        atomic_write(path, new)
    return removed


# -- windows: the sessions each entry's night read (the `diary_windows` table) ------------------


def record_window(conn: Connection, agent: str, day: str, sessions: Iterable[str]) -> None:
    """Add `sessions` to the window of `day`'s entry (before the entry is written)."""
    rows = [{"agent": agent, "day": day, "session_id": s} for s in sorted(set(sessions))]
    if rows:
        conn.execute(insert_ignore(conn, DIARY_WINDOWS), rows)


def windows(conn: Connection, agent: str) -> dict[str, set[str]]:
    """day -> the sessions its entry's window read, for every day with a recorded window."""
    w = DIARY_WINDOWS.c
    out: dict[str, set[str]] = defaultdict(set)
    for day, session_id in conn.execute(select(w.day, w.session_id).where(w.agent == agent)):
        out[day].add(session_id)
    return dict(out)


def forget_days(conn: Connection, agent: str, days: Collection[str]) -> None:
    """A purge's part here: the windows of the entries it removed."""
    if days:
        w = DIARY_WINDOWS.c
        conn.execute(delete(DIARY_WINDOWS).where(and_(w.agent == agent, w.day.in_(list(days)))))


# -- quoting: the whole sentences a person said, without the markdown around them ------------
# Corpus lines hold an utterance on one line (its line breaks are spaces), so the marks that
# began a line (a heading, a quote, a bullet, a table row) are found inside it.

_IMAGE = re.compile(r"!\[[^\]]{0,200}\]\([^)\s]{0,500}\)")
_LINK = re.compile(r"\[([^\[\]]{1,200})\]\((?:[^()\s]|\([^()\s]*\)){1,500}\)")
_AUTOLINK = re.compile(r"<(https?://[^>\s]{1,500})>")
# A table: a run of at least two cells, each short ("| a | b |", "|---|---|").
_TABLE = re.compile(r"\|(?:[^|]{0,80}\|){2,}")
# What began a line: a heading, a quote, a bullet or a task box, a rule.
_LINE_MARK = re.compile(
    r"(?:^|\s)(?P<mark>#{1,6}|>+|[-*•](?:\s+\[[ xX]\])?|-{3,}|\*{3,}|_{3,}|={3,})(?=\s|$)"
)
_MARK_CHARS = re.compile(r"[#>\-*•_=]")  # one of them is in every line mark
_NUMBER_MARK = re.compile(r"(?:^|\s)(?P<mark>\d{1,2}[.)])(?=\s)")
_NUMBERED = re.compile(r"(?:^|\s)1[.)]\s.*?\s2[.)]\s")
# A bold label opening a line ("**Description:** ...", "**Note**: ...").
_LABEL = re.compile(r"^(?:\*\*|__)[^*_]{1,40}?(?::(?:\*\*|__)|(?:\*\*|__):?)\s*")
# Each with what any text it matches holds.
_EMPHASIS = (
    ("**", re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")),
    ("__", re.compile(r"__(?=\S)(.+?)(?<=\S)__")),
    ("~~", re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")),
    ("*", re.compile(r"(?<![\w*])\*(?=[^\s*])([^*]+?)(?<=[^\s*])\*(?![\w*])")),
    ("_", re.compile(r"(?<![\w_])_(?=[^\s_])([^_]+?)(?<=[^\s_])_(?![\w_])")),
)
# Markdown or markup left in a sentence once the above is removed: it is no quote.
_LEFTOVER = re.compile(
    r"\*\*|__|~~|\||(?:^|\s)#{1,6}(?:\s|$)|(?:^|\s)>|\]\(|<[A-Za-z/!]|`{3}|~{3}"
    r"|https?://|www\.|[{}]|\\[nrt]"
)
_CODE_SPAN = re.compile(r"`[^`]*`")
_AUX = r"(?:should|could|would|can|do|does|did|is|are|am|was|were|will|shall|may|might|have|has)"
_ASKS = re.compile(
    rf"^(?:{_AUX}(?:n'?t)?\s+(?:i|you|we|they|he|she|it|the|this|that|these|those|there|my|your"
    r"|our|their|his|her|anyone|someone|anybody|somebody)\b"
    rf"|(?:what|why|how|when|where|who|which)(?:'s\b|\s+{_AUX}\b))",
    re.IGNORECASE,
)
_QUESTION = re.compile(r"[?？]")
_LETTERS = re.compile(r"[^\W\d_]", re.UNICODE)

MIN_QUOTE_CHARS, MAX_QUOTE_CHARS = 20, 200
MIN_QUOTE_WORDS, MAX_QUOTE_WORDS = 4, 40


def _unmark(text: str) -> str:
    # Most lines hold no markdown: a pattern runs only on a text holding the characters
    # every match of it holds (checked on the text as the patterns before left it).
    if "![" in text:
        text = _IMAGE.sub(" ", text)
    if "](" in text:
        text = _LINK.sub(r"\1", text)
    if "<" in text:
        text = _AUTOLINK.sub(r"\1", text)
    text = text.strip()
    if text.startswith(("**", "__")):
        text = _LABEL.sub("", text)
    for needs, pattern in _EMPHASIS:
        if needs in text:
            text = pattern.sub(r"\1", text)
    return " ".join(text.split())  # runs of whitespace as one space (`\s` is `str.isspace`)


def _blocks(text: str) -> list[tuple[str, str]]:
    """The line-sized pieces of a one-line utterance: (the mark that began it, its text)."""
    text = claims_mod.clean(text)  # our markers, harness envelopes, fenced code
    if "|" in text:
        text = _TABLE.sub("\n", text)
    # (each pattern looked for only in a text holding a character every match of it holds)
    marks = [_LINE_MARK] if _MARK_CHARS.search(text) else []
    if ("1." in text or "1)" in text) and _NUMBERED.search(text):
        marks.append(_NUMBER_MARK)
    cuts: list[tuple[int, int, str]] = [(0, 0, "")]
    for pattern in marks:
        cuts += [(m.start(), m.end(), m["mark"]) for m in pattern.finditer(text)]
    cuts.sort()
    out: list[tuple[str, str]] = []
    for i, (_start, end, mark) in enumerate(cuts):
        stop = cuts[i + 1][0] if i + 1 < len(cuts) else len(text)
        for piece in text[end:stop].split("\n"):  # a table stood here
            if piece.strip():
                out.append((mark, piece))
            mark = ""
    return out


def clean_sentences(text: str) -> list[str]:
    """Every sentence of a corpus line with its markdown removed (no judgement of whether it is
    worth quoting: `quotable` does that). Forget hunts for these too, so a diary line quoting
    a sentence of a purged line is found and removed."""
    return [s for s, _whole in _sentences(text)]


def quotable(text: str, lexicon: salience_mod.Lexicon | None = None) -> list[str]:
    """The sentences of a corpus line a diary may quote: whole, free of markdown, of sensible
    length, neither a question nor small talk, a banner or a fragment."""
    return [s for s in whole_sentences(text) if is_quotable(s, lexicon)]


def whole_sentences(text: str) -> list[str]:
    """The sentences of a corpus line that stand whole, free of markdown: what `quotable`
    judges one by one (REM judges only those naming its theme)."""
    return [s for s, whole in _sentences(text) if whole]


def _sentences(text: str) -> list[tuple[str, bool]]:
    """(sentence, whether it stands whole). A piece after a dash that may have been a bullet
    or a dash inside a sentence ("decorators - you can ...") is the rest of a sentence when
    what came before it did not end one and it starts in lower case."""
    out: list[tuple[str, bool]] = []
    before = ""
    for mark, body in _blocks(text):
        # Emphasis goes first: "**Why?** It broke." is two sentences once it is plain.
        parts = claims_mod.sentences(_unmark(body))
        if mark.startswith("#"):
            parts = parts[1:]  # the heading ran into what followed it: its sentence is no one's
        for i, part in enumerate(parts):
            sentence = part.strip()
            if not sentence:
                continue
            cut = (i > 0 or mark in ("", "-", "*", "•")) and not _ENDED.search(before)
            if cut and sentence[:1].islower():
                if out and out[-1][0] == before:
                    out[-1] = (before, False)  # and what it continues is no whole sentence
                out.append((sentence, False))
            else:
                out.append((sentence, True))
            before = sentence
        if mark.startswith("#") or not parts:
            before = ""
    return out


_ENDED = re.compile(r"(?:^|[.!?。！？:：…][\"'”’)\]]*)$")


def is_quotable(sentence: str, lexicon: salience_mod.Lexicon | None = None) -> bool:
    """Whether one of `whole_sentences` is fit to quote (see `quotable`)."""
    if not MIN_QUOTE_CHARS <= len(sentence) <= MAX_QUOTE_CHARS:
        return False
    if _QUESTION.search(sentence) or sentence.endswith((":", "：", ",", ";", "-")):
        return False
    if _ASKS.match(sentence):
        return False  # a question without its question mark
    if sentence.startswith("`"):
        return False
    if _LEFTOVER.search(sentence):
        return False
    code = sum(len(m) for m in _CODE_SPAN.findall(sentence))
    if code * 5 > len(sentence) * 2 or sentence.count("`") % 2:
        return False  # mostly code, or a code span cut open
    if len(_LETTERS.findall(sentence)) * 2 < len(sentence):
        return False  # symbols and numbers, not speech
    if not MIN_QUOTE_WORDS <= len(claims_mod.words(sentence)) <= MAX_QUOTE_WORDS:
        return False
    return not salience_mod.assess(sentence, lexicon).features & _NOT_QUOTED


_NOT_QUOTED = frozenset(
    {salience_mod.Feature.SMALLTALK, salience_mod.Feature.BANNER, salience_mod.Feature.FRAGMENT}
)
