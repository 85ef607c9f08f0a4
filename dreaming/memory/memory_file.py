"""MEMORY.md: parse into operator text, managed headings and hash-addressed entries, render back.

Operator text is preserved byte for byte: a document is a list of segments whose raw
text concatenates to exactly the file that was read. Managed entries are written one
markdown list line each, grouped under a few managed headings; the file is pasted into the
agent's context on every turn, so every character of framing is paid on every turn, and a
line carries only its text and its key as the file shows it (`dreaming.syntax`)::

      ## People <!-- dreaming:group -->
      - 2026-03-08 I'm allergic to peanuts. <!--m:3f9a1c-->

Files of two older forms are read as well and rewritten once by :func:`apply_entries`:
lines showing the whole key, ``- The user is allergic to peanuts. <!-- m:3f9a1c2b4d5e6f70 -->``,
and legacy blocks::

      <!-- dreaming:entry m:3f9a1c2b4d5e6f70 -->
      The user is allergic to peanuts.
      <!-- /dreaming:entry -->

An entry whose text no longer hashes to its key was edited by a person; it is kept as it
is and reported, never rewritten or moved.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# The syntax (key, line, block, heading) is `dreaming.syntax`'s; re-exported here for the
# callers that reach it through the memory file.
from dreaming import syntax
from dreaming.ingest import salience
from dreaming.ingest.grouping import GROUP_TITLES, GROUPS
from dreaming.syntax import (
    KEY_PREFIX,
    MARKER_RE,
    SEGMENT_RE,
    atomic_write,
    entry_key,
    load_text,
    normalize_entry_text,
    one_line,
    render_block,
    render_line,
    render_old_line,
    shortest,
)
from dreaming.text_memo import text_cache

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
    "entry_key",
    "load_text",
    "normalize_entry_text",
    "one_line",
    "parse",
    "parse_slice",
    "read",
    "render_block",
    "render_heading",
    "render_line",
    "render_old_line",
    "shortest",
    "tidy",
]


# The forms of a managed entry in a file.
LINE = "line"  # written now
OLD_LINE = "old line"  # a line showing the whole key, as the first compact form did
LEGACY = "block"  # a legacy `dreaming:entry` block


@dataclass(frozen=True, slots=True)
class Block:
    """One managed entry as it stands in the file: a line or a legacy block."""

    # The whole key; of an entry a person edited, the key as the file shows it (the text no
    # longer tells the rest): `stands_for` matches it.
    key: str
    text: str
    raw: str
    # Whether a person changed the text since we wrote it (it no longer hashes to its key).
    # Computed once at parse time: a large MEMORY.md is parsed on every write.
    edited: bool = False
    form: str = LINE
    shown: str = ""  # the key as the file shows it

    @property
    def compact(self) -> bool:
        """A list line (either form), not a legacy block."""
        return self.form != LEGACY

    @classmethod
    def of(cls, key: str, text: str, *, shown: str | None = None, compact: bool = True) -> Block:
        """The entry `key` rendered: a line showing `shown` (default: the whole key), or a
        legacy block."""
        if not compact:
            return cls(key, text, render_block(key, text), _key_of(text) != key, LEGACY, key)
        text, shown = one_line(text), shown or key
        return cls(key, text, render_line(shown, text), _key_of(text) != key, LINE, shown)

    @classmethod
    def read(cls, shown: str, text: str, raw: str, form: str) -> Block:
        """A block as a file shows it: known by its whole key when the text hashes to one
        the shown key stands for, else edited."""
        whole = _key_of(text)
        if syntax.matches(shown, whole):
            return cls(whole, text, raw, False, form, shown)
        return cls(shown, text, raw, True, form, shown)

    def stands_for(self, key: str) -> bool:
        """Whether this is the entry of the whole key `key` (a person's edit of it too)."""
        return syntax.matches(self.shown, key) if self.edited else key == self.key

    def stands_for_any(self, keys: Collection[str]) -> bool:
        if not self.edited:
            return self.key in keys
        return any(syntax.matches(self.shown, k) for k in keys)


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

    def holds(self, keys: Iterable[str]) -> set[str]:
        """Those of `keys` (whole keys) that an entry of this file stands for, edited or not."""
        keys = list(keys)
        live = {b.key for b in self.live_blocks()}
        return {k for k in keys if k in live} | self.edited_hold(keys)

    def edited_keys(self, known: Collection[str]) -> set[str]:
        """The keys of the entries a person edited: the whole key of each that stands for one
        of `known`, else the key it shows."""
        return {next((k for k in known if b.stands_for(k)), b.key) for b in self.edited_blocks()}

    def edited_hold(self, keys: Iterable[str]) -> set[str]:
        """Those of `keys` (whole keys) whose entry a person edited here."""
        edited = self.edited_blocks()
        return {k for k in keys if any(b.stands_for(k) for b in edited)} if edited else set()


# The key of an entry's text, remembered: hashing the normalized text is most of a parse,
# and a rewrite or a purge parses files (MEMORY.md, its backups) that share most lines.
_key_of = text_cache(1 << 16)(entry_key)


def parse(text: str) -> Document:
    """Any text: entry lines of either form, legacy blocks and managed headings are
    recognised, everything else is operator text; `parse(text).render() == text` always.

    The same text is parsed once: a purge and a MEMORY.md write each read the file several
    times (scrub, dry count, render, duplicates), and a Document is immutable."""
    return _parse(text)


@text_cache(4)
def _parse(text: str) -> Document:
    segments: list[Segment] = []
    pos = 0
    for m in SEGMENT_RE.finditer(text):
        if m.start() > pos:
            segments.append(text[pos : m.start()])
        raw = m.group(0)
        if m["block"] is not None:
            segments.append(Block.read(m["bkey"], m["btext"], raw, LEGACY))
        elif m["lkey"] is not None:
            segments.append(Block.read(m["lkey"], m["ltext"], raw, LINE))
        elif m["okey"] is not None:
            segments.append(Block.read(m["okey"], m["ltext"], raw, OLD_LINE))
        else:
            segments.append(Heading(m["title"].strip().casefold(), raw))
        pos = m.end()
    if pos < len(text):
        segments.append(text[pos:])
    return Document(tuple(segments))


def parse_slice(text: str) -> Document:
    """`parse`, not remembered: a purge parses the few lines around each entry it removes,
    slices that would push whole files out of `parse`'s cache."""
    return _parse.__wrapped__(text)


def read(path: Path) -> Document:
    return parse(load_text(path) or "")


# -- grouping -------------------------------------------------------------------------------


def render_heading(group: str) -> str:
    """A group's managed heading line, titled as the group data says (without the blank
    line before it)."""
    return syntax.render_heading(GROUP_TITLES.get(group, group.capitalize()))


# -- applying the database's entries --------------------------------------------------------


def apply_entries(
    doc: Document,
    entries: Sequence[tuple[str, str]],
    group_of: Callable[[str], str] = salience.group_of,
) -> Document:
    """A document whose managed entries are exactly `entries` (key, text), as lines.

    A wanted line stays where it is, byte for byte, its key shown as the file's keys say
    (`syntax.shown_keys`: a line of the older form, or one whose key must now show more or
    fewer digits, gets its key comment rewritten, its text kept); unwanted lines and blocks
    go. Wanted legacy blocks and new entries are written as lines at the end of their
    group's run of lines, under its managed heading (a group without one gets a heading
    appended at the end of the file). Person-edited entries, in any form, stay as they are
    and are never added a second time: an edit stands for every wanted key that starts with
    the key it shows (one a person edited before a later key with the same first digits
    came is taken as that key's too: a chance of one in 16.7 million per such pair).
    Headings left with no entry under them go, with the blank line before them. Operator
    text is never changed: where something between two pieces of it was removed they meet,
    keeping the line break of a block that began mid-line, and a line break is added where
    one of our lines must start a line. Deterministic (the file depends only on the entries
    and the operator's text, not on how many writes brought them), and applying the result
    again changes nothing. `group_of(text)` must return one of GROUPS.
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
    placed = doc.edited_hold(wanted)
    # How the file shows each key depends on the keys it holds, edited entries' included.
    shown = syntax.shown_keys(
        (k for k in wanted if k not in placed), (b.shown for b in doc.edited_blocks())
    )
    kept, settled = _kept_lines(doc, wanted, placed, shown)
    pending: dict[str, list[Block]] = {}
    for key, text in wanted.items():
        if key in placed:
            continue
        group = group_of(text)
        if group not in GROUPS:
            raise ValueError(f"group_of returned {group!r}, not one of {GROUPS}")
        pending.setdefault(group, []).append(Block.of(key, text, shown=shown[key]))
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


def _kept_lines(
    doc: Document, wanted: Mapping[str, str], placed: set[str], shown: Mapping[str, str]
) -> tuple[list[Segment], bool]:
    """The document's segments without unwanted entries and second copies, and whether
    what went stood on whole lines of its own. A wanted line stays where it is with its text
    as it is, showing its key as `shown` says (a line of the older form is rewritten so);
    a wanted legacy block goes, to be written as a line. Adds the keys kept to `placed`."""
    kept: list[Segment] = []
    settled = True
    for seg in doc.segments:
        if isinstance(seg, Block) and not seg.edited:
            if seg.compact and seg.key in wanted and seg.key not in placed:
                placed.add(seg.key)
                kept.append(_showing(seg, shown[seg.key]))
            else:
                # Unwanted, a second copy, or a legacy block to rewrite below.
                settled &= _drop(kept, seg)
            continue
        kept.append(seg)
    return kept, settled


def _showing(line: Block, shown: str) -> Block:
    """`line` in the current form showing its key as `shown`: as it is when it does."""
    if line.form == LINE and line.shown == shown:
        return line
    raw = syntax.reshow_line(line.raw, shown)
    return Block(line.key, line.text, raw, False, LINE, shown)


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
