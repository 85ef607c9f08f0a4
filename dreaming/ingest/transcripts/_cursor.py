"""Where an incremental read of a transcript stopped, and whether what it read is still there.

A cursor pins a byte offset *and* a hash of every byte before it, so a caller can tell an
appended file (read on from the cursor) from one edited anywhere before the cursor, rewritten
or truncated (read again from 0, and what changed re-derived). A hash of the head alone let
an in-place redaction (`sed -i` on line 60) pass as unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

# A head covers all consumed bytes: "s2f:" a SHA-256 of them, "b2f:" (the versions before
# it) a 16-byte BLAKE2b. New reads take SHA-256, and every byte light reads is hashed: where
# the CPU has SHA instructions (AMD Zen, Intel since Ice Lake and Goldmont, ARMv8 with its
# crypto extension) OpenSSL's SHA-256 runs at about twice BLAKE2b's speed (1.45 against
# 0.83 GB/s on this project's machine: light over 161 MB of real sessions 2.78 -> 2.70 s).
# On an older x86 without them it runs at about half BLAKE2b's. A "b2f:" cursor is still
# checked, and read on, with BLAKE2b: an upgrade reads nothing again. Cursors of the oldest
# versions ("b2:", the first 4 KB only) cannot vouch for the rest: their files are read
# again once and compared line by line.
PREFIX = "s2f:"
_HASHES: dict[str, Callable[[], Any]] = {
    PREFIX: hashlib.sha256,
    "b2f:": lambda: hashlib.blake2b(digest_size=16),
}
_PREFIX_OF = {"sha256": PREFIX, "blake2b": "b2f:"}
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where the next read of one transcript file starts."""

    offset: int  # byte offset just past the last fully consumed line
    line: int  # lines consumed; the next line's 1-based number is line + 1
    head: str  # PREFIX (or an older one in _HASHES) + hash of the file's bytes [0, offset)
    size: int  # file size when the cursor was taken


def new_hasher() -> Any:
    return hashlib.sha256()


def digest(hasher: Any) -> str:
    """The head a hasher makes, marked with its kind (a cursor read on keeps its own)."""
    return _PREFIX_OF[hasher.name] + str(hasher.hexdigest())


def hash_range(f: IO[bytes], hasher: Any, start: int, end: int) -> None:
    """Feed the bytes [start, end) of an open file to `hasher`."""
    f.seek(start)
    left = end - start
    while left > 0:
        chunk = f.read(min(_CHUNK, left))
        if not chunk:
            break
        hasher.update(chunk)
        left -= len(chunk)


def prefix_hasher(f: IO[bytes], cursor: Cursor, size: int) -> Any | None:
    """A hasher fed the file's bytes before `cursor`, when they are still what the cursor
    read (ready to take what follows); None when the file changed before it, or is shorter."""
    make = _HASHES.get(cursor.head[:4])
    if size < cursor.offset or make is None:
        return None
    hasher = make()
    hash_range(f, hasher, 0, cursor.offset)
    return hasher if digest(hasher) == cursor.head else None


# The cursor of a file nobody has read yet.
START = Cursor(offset=0, line=0, head=digest(new_hasher()), size=0)


def cursor_is_valid(path: Path, cursor: Cursor) -> bool:
    """Whether `path` still holds, byte for byte, what `cursor` consumed.

    False means the file was edited before the cursor, rewritten or truncated (or is gone).
    """
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            return prefix_hasher(f, cursor, size) is not None
    except OSError:
        return False
