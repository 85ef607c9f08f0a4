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

import hashlib
import os
import re
import stat
import tempfile
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dreaming.errors import WorkspaceFileError

# The key carries its algorithm ("m:" = blake2b-64 of the normalized text) so a later change
# of hash shows up as a different prefix instead of silently splitting the data.
KEY_PREFIX = "m:"
BLOCK_RE = re.compile(
    r"<!-- dreaming:entry (?P<key>m:[0-9a-f]{16}) -->\n(?P<text>.*?)\n<!-- /dreaming:entry -->\n?",
    re.DOTALL,
)
# One whole line; the key is the last comment of the line (the text is matched lazily up
# to a comment that the end of the line follows).
LINE_RE = re.compile(r"^- (?P<text>.+?) <!-- (?P<key>m:[0-9a-f]{16}) -->$\n?", re.MULTILINE)
# A heading owns the blank line right before it, if there is one: the line that separates
# its group from what comes before goes with it when an empty group is removed, so adding
# and removing a group leaves the file as it was.
HEADING_RE = re.compile(r"(?:^\n)?^## (?P<title>.+?) <!-- dreaming:group -->$\n?", re.MULTILINE)
# All three in one pass. A block may start anywhere (as it always could); lines and
# headings only at a line start. No two alternatives can start at the same character.
_SEGMENT_RE = re.compile(
    r"(?P<block><!-- dreaming:entry (?P<bkey>m:[0-9a-f]{16}) -->\n"
    r"(?P<btext>(?s:.*?))\n<!-- /dreaming:entry -->\n?)"
    r"|^- (?P<ltext>.+?) <!-- (?P<lkey>m:[0-9a-f]{16}) -->$\n?"
    r"|(?:^\n)?^## (?P<title>.+?) <!-- dreaming:group -->$\n?",
    re.MULTILINE,
)
# Anything entry text must never contain: our block markers, our heading marker and the
# compact form's key comment (whitespace and case tolerated: a near miss is as suspect).
MARKER_RE = re.compile(
    r"<!--\s*(?:/?\s*dreaming:(?:entry|group)\b[^>]*|m:[0-9a-f]{16}\s*)-->", re.IGNORECASE
)
_WS = re.compile(r"\s+")

# Managed groups in render order, and the titles of their headings.
GROUPS: tuple[str, ...] = ("instructions", "people", "work", "preferences")
GROUP_TITLES: dict[str, str] = {g: g.capitalize() for g in GROUPS}


def normalize_entry_text(text: str) -> str:
    """The form an entry's key is computed from: identical facts share a key."""
    text = unicodedata.normalize("NFKC", text)
    return _WS.sub(" ", text).strip().rstrip(".!").casefold()


def entry_key(text: str) -> str:
    digest = hashlib.blake2b(normalize_entry_text(text).encode("utf-8"), digest_size=8)
    return KEY_PREFIX + digest.hexdigest()


def one_line(text: str) -> str:
    """Entry text as a compact line shows it: every whitespace run one space. The key does
    not change (:func:`normalize_entry_text` collapses whitespace the same way)."""
    return " ".join(text.split())


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
    for m in _SEGMENT_RE.finditer(text):
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


def render_line(key: str, text: str) -> str:
    """The compact form of an entry, one line with its trailing newline."""
    return f"- {one_line(text)} <!-- {key} -->\n"


def render_block(key: str, text: str) -> str:
    """The legacy block form, of files written before the compact form (no longer written;
    tests of reading old files build them with it)."""
    return f"<!-- dreaming:entry {key} -->\n{text}\n<!-- /dreaming:entry -->\n"


def render_heading(group: str) -> str:
    """A group's managed heading line (without the blank line before it)."""
    return f"## {GROUP_TITLES.get(group, group)} <!-- dreaming:group -->\n"


def read(path: Path) -> Document:
    return parse(load_text(path) or "")


def load_text(path: Path) -> str | None:
    """A workspace file's text with its line endings as "\n" (None: no such file). CRLF
    files are written back as CRLF by `atomic_write`; what cannot be kept byte for byte (not
    UTF-8, not a file) is refused with a clear error rather than rewritten."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise WorkspaceFileError(f"{path} is a directory, not a file") from None
    except OSError as err:
        raise WorkspaceFileError(f"{path}: cannot read it ({err.strerror or err})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise WorkspaceFileError(
            f"{path}: not valid UTF-8 (byte {err.start}, line {line}); dreaming will not"
            " rewrite a file it cannot read exactly: fix that byte and run again"
        ) from None
    return text.replace("\r\n", "\n")


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


def atomic_write(path: Path, content: str) -> None:
    """Write via a temp file in the same folder + fsync + rename: readers see old or new.

    What the file was stays as it was: a symlink keeps pointing where it did (its target is
    written, so a file shared through the link updates), the mode is kept (a new file gets
    0644 less the umask, as any editor would make it, not mkstemp's 0600), and a CRLF file
    stays CRLF."""
    target = path.resolve() if path.is_symlink() else path
    if target.is_dir():
        raise WorkspaceFileError(f"{path} is a directory, not a file")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        before = target.stat()
        mode = stat.S_IMODE(before.st_mode)
        with target.open("rb") as fh:
            # The first line ending says which kind the file uses: a small read, not the file.
            head = fh.read(4096)
        end = head.find(b"\n")
        crlf = end > 0 and head[end - 1 : end] == b"\r"
    except FileNotFoundError:
        mode, crlf = 0o666 & ~_umask(), False
    if crlf:
        content = content.replace("\r\n", "\n").replace("\n", "\r\n")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(content)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        Path(tmp).replace(target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    # Read, not set-and-restore: os.umask() would change it for every thread meanwhile.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
