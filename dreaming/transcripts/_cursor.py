"""Where an incremental read of a transcript stopped, and whether that place still exists.

A cursor pins a byte offset *and* a hash of the file's first bytes, so a caller can tell an
appended file (read on from the cursor) from a rewritten or truncated one (read again from 0).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

# Enough of the head to tell two transcripts apart (the header line carries a session id and
# a timestamp) while keeping validation one small read.
HEAD_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where the next read of one transcript file starts."""

    offset: int  # byte offset just past the last fully consumed line
    line: int  # lines consumed; the next line's 1-based number is line + 1
    head: str  # head_hash() of the file's first min(HEAD_BYTES, offset) bytes
    size: int  # file size when the cursor was taken


def head_hash(data: bytes) -> str:
    """Hash of a file head, with an algorithm prefix so a later change of hash is visible."""
    return "b2:" + hashlib.blake2b(data[:HEAD_BYTES], digest_size=16).hexdigest()


# The cursor of a file nobody has read yet.
START = Cursor(offset=0, line=0, head=head_hash(b""), size=0)


def cursor_is_valid(path: Path, cursor: Cursor) -> bool:
    """Whether `path` still starts with the bytes `cursor` saw and is at least as long.

    False means the file was rewritten or truncated (or is gone): re-read it from 0.
    """
    want = min(HEAD_BYTES, cursor.offset)
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            if size < cursor.offset:
                return False
            f.seek(0)
            head = f.read(want)
    except OSError:
        return False
    return len(head) == want and head_hash(head) == cursor.head
