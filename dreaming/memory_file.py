"""MEMORY.md: parse into operator text and hash-addressed managed blocks, render back.

Operator text is preserved byte for byte: a document is a list of segments whose raw
text concatenates to exactly the file that was read. A managed block whose text no longer
hashes to its key was edited by a person; it is kept as it is and reported, never rewritten.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

# The key carries its algorithm ("m:" = blake2b-64 of the normalized text) so a later change
# of hash shows up as a different prefix instead of silently splitting the data.
KEY_PREFIX = "m:"
BLOCK_RE = re.compile(
    r"<!-- dreaming:entry (?P<key>m:[0-9a-f]{16}) -->\n(?P<text>.*?)\n<!-- /dreaming:entry -->\n?",
    re.DOTALL,
)
MARKER_RE = re.compile(r"<!--\s*/?\s*dreaming:entry\b[^>]*-->", re.IGNORECASE)
_WS = re.compile(r"\s+")


def normalize_entry_text(text: str) -> str:
    """The form an entry's key is computed from: identical facts share a key."""
    text = unicodedata.normalize("NFKC", text)
    return _WS.sub(" ", text).strip().rstrip(".!").casefold()


def entry_key(text: str) -> str:
    digest = hashlib.blake2b(normalize_entry_text(text).encode("utf-8"), digest_size=8)
    return KEY_PREFIX + digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Block:
    key: str
    text: str
    raw: str
    # Whether a person changed the text since we wrote it (it no longer hashes to its key).
    # Computed once at parse time: a large MEMORY.md is parsed on every write.
    edited: bool = False

    @classmethod
    def of(cls, key: str, text: str, raw: str | None = None) -> Block:
        return cls(
            key, text, raw if raw is not None else render_block(key, text), entry_key(text) != key
        )


@dataclass(frozen=True, slots=True)
class Document:
    segments: tuple[str | Block, ...]

    @property
    def blocks(self) -> list[Block]:
        return [s for s in self.segments if isinstance(s, Block)]

    def render(self) -> str:
        return "".join(s.raw if isinstance(s, Block) else s for s in self.segments)

    def live_blocks(self) -> list[Block]:
        return [b for b in self.blocks if not b.edited]

    def edited_blocks(self) -> list[Block]:
        return [b for b in self.blocks if b.edited]


def parse(text: str) -> Document:
    segments: list[str | Block] = []
    pos = 0
    for m in BLOCK_RE.finditer(text):
        if m.start() > pos:
            segments.append(text[pos : m.start()])
        segments.append(Block.of(m["key"], m["text"], m.group(0)))
        pos = m.end()
    if pos < len(text):
        segments.append(text[pos:])
    return Document(tuple(segments))


def render_block(key: str, text: str) -> str:
    return f"<!-- dreaming:entry {key} -->\n{text}\n<!-- /dreaming:entry -->\n"


def read(path: Path) -> Document:
    try:
        return parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Document(())


def apply_entries(doc: Document, entries: Sequence[tuple[str, str]]) -> Document:
    """A document whose managed blocks are exactly `entries` (key, text), in place where a
    block already stood, new ones appended at the end. Person-edited blocks and all
    operator text stay as they are."""
    wanted = dict(entries)
    segments: list[str | Block] = []
    # A person-edited block still stands for its entry: never add a second copy beside it.
    seen: set[str] = {b.key for b in doc.edited_blocks()}
    for seg in doc.segments:
        if isinstance(seg, Block):
            if seg.edited:
                segments.append(seg)
            elif seg.key in wanted and seg.key not in seen:
                seen.add(seg.key)
                segments.append(seg)
            continue
        segments.append(seg)
    new = [(k, t) for k, t in entries if k not in seen]
    if new:
        body = "".join(s.raw if isinstance(s, Block) else s for s in segments)
        if body and not body.endswith("\n"):
            segments.append("\n")
        for key, text in new:
            segments.append(Block.of(key, text))
    return Document(tuple(segments))


def atomic_write(path: Path, content: str) -> None:
    """Write via a temp file in the same folder + fsync + rename: readers see old or new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def keys_of(blocks: Iterable[Block]) -> set[str]:
    return {b.key for b in blocks}
