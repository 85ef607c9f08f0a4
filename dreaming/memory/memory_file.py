"""MEMORY.md: parse into operator text, managed headings and hash-addressed entries, render back.

Operator text is preserved byte for byte: a document is a list of segments whose raw
text concatenates to exactly the file that was read. Managed entries come in two forms:

- the compact form written now, one markdown list line per entry, grouped under a few
  managed headings (the file is pasted into the agent's context on every turn, so every
  character of framing is paid on every turn)::

      ## People <!-- dreaming:group -->
      - The user is allergic to peanuts. <!-- m:3f9a1c2b4d5e6f70 -->

- the legacy block form of older files, read as well and rewritten once into the compact
  form by :func:`apply_entries`::

      <!-- dreaming:entry m:3f9a1c2b4d5e6f70 -->
      The user is allergic to peanuts.
      <!-- /dreaming:entry -->

An entry whose text no longer hashes to its key was edited by a person; it is kept as it
is and reported, never rewritten or moved.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# The syntax (key, line, block, heading) is `dreaming.syntax`'s; re-exported here for the
# callers that reach it through the memory file.
from dreaming.syntax import (
    GROUP_TITLES,
    GROUPS,
    KEY_PREFIX,
    MARKER_RE,
    SEGMENT_RE,
    atomic_write,
    entry_key,
    load_text,
    normalize_entry_text,
    one_line,
    render_block,
    render_heading,
    render_line,
)

__all__ = [
    "GROUPS",
    "GROUP_TITLES",
    "KEY_PREFIX",
    "MARKER_RE",
    "Block",
    "Document",
    "Heading",
    "Segment",
    "apply_entries",
    "atomic_write",
    "default_group",
    "entry_key",
    "load_text",
    "normalize_entry_text",
    "one_line",
    "parse",
    "read",
    "render_block",
    "render_heading",
    "render_line",
    "tidy",
]


@dataclass(frozen=True, slots=True)
class Block:
    """One managed entry as it stands in the file: a compact line or a legacy block."""

    key: str
    text: str
    raw: str
    # Whether a person changed the text since we wrote it (it no longer hashes to its key).
    # Computed once at parse time: a large MEMORY.md is parsed on every write.
    edited: bool = False
    # The form: a compact list line (True) or a legacy `dreaming:entry` block (False).
    compact: bool = True

    @classmethod
    def of(cls, key: str, text: str, raw: str | None = None, *, compact: bool = True) -> Block:
        if raw is None:
            raw = render_line(key, text) if compact else render_block(key, text)
            text = one_line(text) if compact else text
        return cls(key, text, raw, entry_key(text) != key, compact)


@dataclass(frozen=True, slots=True)
class Heading:
    """A managed heading line, `## Title <!-- dreaming:group -->`, with the blank line
    before it if there is one; `group` is its title casefolded (one of GROUPS unless a
    person wrote another title)."""

    group: str
    raw: str

    @classmethod
    def of(cls, group: str, *, blank_line_before: bool = False) -> Heading:
        return cls(group, ("\n" if blank_line_before else "") + render_heading(group))


Segment = str | Block | Heading


def _raw(seg: Segment) -> str:
    return seg if isinstance(seg, str) else seg.raw


@dataclass(frozen=True, slots=True)
class Document:
    segments: tuple[Segment, ...]

    @property
    def blocks(self) -> list[Block]:
        return [s for s in self.segments if isinstance(s, Block)]

    @property
    def headings(self) -> list[Heading]:
        return [s for s in self.segments if isinstance(s, Heading)]

    def render(self) -> str:
        return "".join(_raw(s) for s in self.segments)

    def live_blocks(self) -> list[Block]:
        return [b for b in self.blocks if not b.edited]

    def edited_blocks(self) -> list[Block]:
        return [b for b in self.blocks if b.edited]


def parse(text: str) -> Document:
    """Any text: compact entry lines, legacy blocks and managed headings are recognised,
    everything else is operator text; `parse(text).render() == text` always."""
    segments: list[Segment] = []
    pos = 0
    for m in SEGMENT_RE.finditer(text):
        if m.start() > pos:
            segments.append(text[pos : m.start()])
        raw = m.group(0)
        if m["block"] is not None:
            segments.append(Block.of(m["bkey"], m["btext"], raw, compact=False))
        elif m["lkey"] is not None:
            segments.append(Block.of(m["lkey"], m["ltext"], raw))
        else:
            segments.append(Heading(m["title"].strip().casefold(), raw))
        pos = m.end()
    if pos < len(text):
        segments.append(text[pos:])
    return Document(tuple(segments))


def read(path: Path) -> Document:
    return parse(load_text(path) or "")


# -- grouping -------------------------------------------------------------------------------

# A first guess only: callers with a better classifier pass it as `group_of`.
_INSTRUCTION_RE = re.compile(
    r"\b(?:always|never|don['’]t|do not|must|call me|from now on|before you|make sure"
    r"|remember to)\b"
    r"|こと|禁|必ず|しないで|ください"
)
_PREFERENCE_RE = re.compile(
    r"\b(?:likes?|liked|loves?|loved|prefers?|preferred|preferences?|favou?rites?"
    r"|enjoys?|enjoyed|hates?|hated|dislikes?|disliked)\b"
    r"|好き|嫌い"
)
_WORK_RE = re.compile(
    r"\b(?:work|works|worked|working|jobs?|projects?|company|companies|teams?|deploy\w*"
    r"|code|coding|repos?|repository|repositories|servers?|office|careers?)\b"
    r"|仕事|会社"
)


def default_group(text: str) -> str:
    """The group of an entry by keywords: instructions, then preferences, then work, else
    people (facts about the user and those around them)."""
    folded = text.casefold()
    if _INSTRUCTION_RE.search(folded):
        return "instructions"
    if _PREFERENCE_RE.search(folded):
        return "preferences"
    if _WORK_RE.search(folded):
        return "work"
    return "people"


# -- applying the database's entries --------------------------------------------------------


def apply_entries(
    doc: Document,
    entries: Sequence[tuple[str, str]],
    group_of: Callable[[str], str] = default_group,
) -> Document:
    """A document whose managed entries are exactly `entries` (key, text), in compact form.

    A wanted compact line stays where it is, byte for byte; unwanted lines and blocks go.
    Wanted legacy blocks and new entries are written as lines at the end of their group's
    run of lines, under its managed heading (a group without one gets a heading appended at
    the end of the file). Person-edited entries, in either form, stay as they are and are
    never added a second time. Headings left with no entry under them go, with the blank
    line before them. Operator text is never changed: where something between two pieces
    of it was removed they meet, keeping the line break of a block that began mid-line, and
    a line break is added where one of our lines must start a line. Deterministic, and
    applying the result again changes nothing. `group_of(text)` must return one of GROUPS.
    """
    out, settled = _apply_once(doc, entries, group_of)
    if settled:
        return out
    # Removing a legacy block that did not stand on whole lines of its own can change how
    # the text around it reads: the text before it may now end as an entry line. Settle on
    # the document as it will be read back (one more round is usually enough).
    for _ in range(_SETTLE_ROUNDS):
        again = parse(out.render())
        if _managed(again) == _managed(out):
            return again
        out = _apply_once(again, entries, group_of)[0]
    return out


_SETTLE_ROUNDS = 8


def _managed(doc: Document) -> list[Block | Heading]:
    return [s for s in doc.segments if not isinstance(s, str)]


def _apply_once(
    doc: Document, entries: Sequence[tuple[str, str]], group_of: Callable[[str], str]
) -> tuple[Document, bool]:
    """One pass of :func:`apply_entries`, and whether it removed only segments that stood on
    whole lines (then the result reads back as built, and needs no second pass)."""
    wanted: dict[str, str] = {}
    for key, text in entries:
        # An entry with no text has no line to stand on (it would not parse back).
        if one_line(text):
            wanted.setdefault(key, text)
    # A person-edited entry still stands for its key: never add a second copy beside it.
    placed: set[str] = {b.key for b in doc.edited_blocks()}
    kept: list[Segment] = []
    settled = True
    for seg in doc.segments:
        if isinstance(seg, Block) and not seg.edited:
            if seg.compact and seg.key in wanted and seg.key not in placed:
                placed.add(seg.key)
                kept.append(seg)
            else:
                # Unwanted, a second copy, or a legacy block to rewrite below.
                settled &= _drop(kept, seg)
            continue
        kept.append(seg)
    pending: dict[str, list[Block]] = {}
    for key, text in wanted.items():
        if key in placed:
            continue
        group = group_of(text)
        if group not in GROUPS:
            raise ValueError(f"group_of returned {group!r}, not one of {GROUPS}")
        pending.setdefault(group, []).append(Block.of(key, text))
    homeless: list[str] = []
    for group in GROUPS:
        if group not in pending:
            continue
        found = _first_heading(kept, (group,))
        if found is not None:
            end = _run_end(kept, found[0])
            lines: list[Segment] = list(pending[group])
            if not _raw(kept[end - 1]).endswith("\n"):
                lines.insert(0, "\n")
            kept[end:end] = lines
            continue
        # A new group goes before the first group that comes after it in GROUPS order, so
        # the file does not depend on which write first brought each group (a night
        # replayed after a crash writes in fewer steps and must give the same file).
        found = _first_heading(kept, GROUPS[GROUPS.index(group) + 1 :])
        if found is None:
            homeless.append(group)
            continue
        later, after = found
        # The new group takes the place of the one after it, blank line (or none, at the
        # start of the file) included; that one then gets a blank line before it.
        blank = after.raw.startswith("\n")
        if not blank:
            kept[later] = Heading(after.group, "\n" + after.raw)
        kept[later:later] = [Heading.of(group, blank_line_before=blank), *pending[group]]
    if homeless:
        body = "".join(_raw(s) for s in kept)
        starts_file = not body
        if body and not body.endswith("\n"):
            kept.append("\n")
        for group in homeless:
            # A blank line between groups and after the text before them, owned by the
            # heading (it goes when the group does).
            kept.append(Heading.of(group, blank_line_before=not starts_file))
            kept.extend(pending[group])
            starts_file = False
    return tidy(Document(tuple(kept))), settled


def _drop(kept: list[Segment], seg: Block) -> bool:
    """Leave `seg` out of `kept`; whether it stood on whole lines of its own. A legacy block
    that started mid-line ended that line: its line break stays, or the text before and
    after it would join into one line."""
    line_start = not kept or _raw(kept[-1]).endswith("\n")
    if not line_start and seg.raw.endswith("\n"):
        kept.append("\n")
    return line_start and seg.raw.endswith("\n")


def _first_heading(
    segments: Sequence[Segment], groups: Sequence[str]
) -> tuple[int, Heading] | None:
    """The first managed heading of one of `groups`, and where it stands."""
    for i, seg in enumerate(segments):
        if isinstance(seg, Heading) and seg.group in groups:
            return i, seg
    return None


def _run_end(segments: Sequence[Segment], heading: int) -> int:
    """Where new lines of the heading's group go: after the last entry of the run of entries
    (and blank text between them) that follows it, or right after the heading."""
    end = heading + 1
    for i in range(heading + 1, len(segments)):
        seg = segments[i]
        if isinstance(seg, Block):
            end = i + 1
        elif isinstance(seg, Heading) or seg.strip():
            break
    return end


def tidy(doc: Document) -> Document:
    """The document without managed headings that have no entry under them (before the
    next heading or non-blank operator text), and with every entry line and heading at the
    start of a line (removing what stood between two segments can join them)."""
    segs = doc.segments
    kept = [s for i, s in enumerate(segs) if not isinstance(s, Heading) or _has_entries(segs, i)]
    out: list[Segment] = []
    line_start = True
    for seg in kept:
        # A heading's own blank line, if it has one, ends whatever line came before.
        starts_line = (isinstance(seg, Heading) and not seg.raw.startswith("\n")) or (
            isinstance(seg, Block) and seg.compact
        )
        if starts_line and not line_start:
            out.append("\n")
        raw = _raw(seg)
        if raw:
            out.append(seg)
            line_start = raw.endswith("\n")
    return Document(tuple(out))


def _has_entries(segments: Sequence[Segment], heading: int) -> bool:
    for seg in segments[heading + 1 :]:
        if isinstance(seg, Block):
            return True
        if isinstance(seg, Heading) or seg.strip():
            return False
    return False
