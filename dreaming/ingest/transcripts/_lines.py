"""Streaming JSONL: one parsed object per line, every bad line counted and skipped.

This is the hot loop of ingestion (inputs run to gigabytes), so it stays flat: one bounded
`readline` and one msgspec decode per line, and the rare cases (blank lines, a BOM, oversized
or unfinished lines, and anything msgspec rejects) are handled off the fast path, after a
failure, by the standard library's json exactly as before.

msgspec decodes bytes straight to the same Python values as `json.loads` (arbitrary-size
integers included, unlike orjson, which turns integers past 64 bits into floats) in about
half the time, but it is stricter: it rejects NaN and Infinity, numbers that overflow a float
(json.loads gives inf), lone surrogates (escaped or encoded) and a BOM. Every line it rejects
goes through the json path, so what a line yields, or which skip it counts, is json.loads'.
The one edge where the two can part: a line nested within a level or two of the interpreter's
recursion limit, which msgspec may still decode where json's scanner (called through one
more C call) hits the limit; json's own outcome there already depends on the caller's stack.
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, cast

import msgspec

from dreaming.messages import SkipCounts, SkipReason

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024

# Oversized lines are thrown away in pieces of this size, so one never sits in memory whole.
_DISCARD_CHUNK = 1024 * 1024
_NEWLINE = 10  # b"\n"[0]: indexing bytes gives ints

_MALFORMED = SkipReason.MALFORMED_JSON.value
_NOT_AN_OBJECT = SkipReason.NOT_AN_OBJECT.value
_INVALID_UTF8 = SkipReason.INVALID_UTF8.value
_OVERSIZED = SkipReason.OVERSIZED_LINE.value

# The fast path: msgspec straight from the line's bytes (no separate UTF-8 decode; it checks
# the encoding itself). Untyped, so it builds the same dicts, lists, str, int, float, bool and
# None as json.loads; it raises DecodeError (ValidationError is one) on what it rejects and
# RecursionError on deep nesting, and either sends the line to the json path.
_decode = msgspec.json.Decoder().decode
_REJECTED = (msgspec.DecodeError, RecursionError)

# The json path: the C scanner behind json.loads, called directly (json.loads adds two regex
# matches and three Python calls per line). Anything unusual about a line (leading
# whitespace, trailing data, errors) falls back to _parse_slow, i.e. json.loads.
# (typeshed types the scanner's context as a scanner; any JSONDecoder is what it reads.)
_scan_once = json.scanner.make_scanner(cast(Any, json.JSONDecoder()))

# What _parse_slow returns instead of a value: a blank line (not a problem, nothing to read)
# and a line that holds no JSON value. Sentinels, because `null` is a value.
_BLANK = object()
_INVALID = object()


class LineSource:
    """JSON objects from an open binary file, starting at a given offset and line count.

    After (or during) iteration `offset` is just past the last consumed line and `line` is the
    number of lines consumed. A final line without a newline is consumed only when it parses
    as a complete JSON value; otherwise it stays unconsumed, because its writer may still be
    appending to it.
    """

    def __init__(
        self,
        f: BinaryIO,
        *,
        offset: int,
        line: int,
        skips: SkipCounts,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_lines: int | None = None,
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be positive, got {max_line_bytes}")
        self._f = f
        self.offset = offset
        self.line = line
        self._skips = skips
        self._max_line_bytes = max_line_bytes
        self._stop_line = None if max_lines is None else line + max_lines

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Yield (1-based line number, object) for every line that is a JSON object."""
        f = self._f
        f.seek(self.offset)
        readline = f.readline
        decode = _decode
        skips = self._skips
        limit = self._max_line_bytes + 1  # one more byte than allowed tells "too long" apart
        stop_line = self._stop_line
        offset = self.offset
        line = self.line
        try:
            if offset > 0:
                # A previous read consumed a final line before its newline arrived: whatever
                # was appended to that line since belongs to it, not to a new line.
                f.seek(offset - 1)
                if f.read(1) != b"\n":
                    rest, ended = _discard_to_newline(readline)
                    offset += rest
                    if not ended:
                        return
            while stop_line is None or line < stop_line:
                raw = readline(limit)
                if not raw:
                    return
                size = len(raw)
                if raw[-1] != _NEWLINE:
                    if size == limit:
                        rest, ended = _discard_to_newline(readline)
                        if not ended:
                            return  # an oversized line still being written: judge it later
                        offset += size + rest
                        line += 1
                        skips[_OVERSIZED] += 1
                        continue
                    # The last line, with no newline yet: take it only if it is complete.
                    obj = _parse_slow(raw, None)
                    if obj is _INVALID or obj is _BLANK:
                        return
                    offset += size
                    line += 1
                else:
                    offset += size
                    line += 1
                    try:
                        obj = decode(raw)
                    except _REJECTED:
                        obj = _parse_json(raw, skips)
                        if obj is _INVALID or obj is _BLANK:
                            continue
                if type(obj) is dict:
                    yield line, obj
                else:
                    skips[_NOT_AN_OBJECT] += 1
        finally:
            self.offset = offset
            self.line = line


def _parse_json(raw: bytes, skips: SkipCounts) -> Any:
    """A complete line msgspec rejected, read by json as the fast path did before msgspec:
    the value, or `_BLANK` / `_INVALID` (counted in `skips`) as `_parse_slow` returns."""
    try:
        text = raw.decode()
        obj, end = _scan_once(text, 0)
    except UnicodeDecodeError:
        skips[_INVALID_UTF8] += 1
        return _INVALID
    except (StopIteration, ValueError, RecursionError):
        end = -1
    # The value must fill the line up to its newline ("\r\n" and other trailing space take
    # the slow path, which strips them).
    if end != len(text) - 1:
        return _parse_slow(raw, skips)
    return obj


def _parse_slow(raw: bytes, skips: SkipCounts | None) -> Any:
    """Parse a line the fast path could not: tolerate a BOM and blank lines, count the rest.

    Returns the value, `_BLANK` for a blank line, or `_INVALID` when the line is no JSON value
    (counted in `skips` when given; an unfinished last line is not counted).
    """
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        if skips is not None:
            skips[_INVALID_UTF8] += 1
        return _INVALID
    # A BOM only ever opens a file, but editors put it there; JSON itself forbids it.
    text = text.removeprefix("\ufeff")
    if not text.strip():
        return _BLANK
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        if skips is not None:
            skips[_MALFORMED] += 1
        return _INVALID


def loads(raw: bytes) -> Any:
    """`json.loads(raw)`, through msgspec first (about twice as fast, the same value) and
    json.loads for whatever msgspec rejects, so the value or the error is json.loads' own."""
    try:
        return _decode(raw)
    except _REJECTED:
        return json.loads(raw)


def _discard_to_newline(readline: Callable[[int], bytes]) -> tuple[int, bool]:
    """Skip the rest of the current line in bounded pieces: (bytes skipped, newline found)."""
    skipped = 0
    while True:
        chunk = readline(_DISCARD_CHUNK)
        if not chunk:
            return skipped, False
        skipped += len(chunk)
        if chunk[-1] == _NEWLINE:
            return skipped, True
