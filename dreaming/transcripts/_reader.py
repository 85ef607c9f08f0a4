"""TranscriptReader: one session file in, Messages out, from a cursor on."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from dreaming.messages import Format, Message, SessionFile, SkipCounts, SkipReason

from ._claude_code import parse_claude_code
from ._common import ParseContext
from ._cursor import HEAD_BYTES, START, Cursor, head_hash
from ._detect import detect_format
from ._event_log import parse_event_log
from ._lines import DEFAULT_MAX_LINE_BYTES, LineSource
from ._openclaw import parse_openclaw

_Parser = Callable[[Iterable[tuple[int, dict[str, Any]]], ParseContext], Iterator[Message]]
_PARSERS: dict[Format, _Parser] = {
    Format.OPENCLAW: parse_openclaw,
    Format.CLAUDE_CODE: parse_claude_code,
    Format.EVENT_LOG: parse_event_log,
}
# A NUL in the first bytes means a binary file, not a transcript (JSON text never has one).
_BINARY_SNIFF_BYTES = 8192


class TranscriptReader:
    """Reads one transcript file and yields its Messages, from a cursor on.

    Every iteration reads from `cursor` to the current end of the file and, when it runs to
    the end, moves `cursor` past what it consumed; iterate again later to read what was
    appended since. A cursor that no longer fits the file (rewritten, truncated) is dropped
    and the file read from the start, with `restarted` set (until the next iteration) so the
    caller can discard what it derived from the old content. Problems are counted in `skips`,
    never raised.
    """

    def __init__(
        self,
        session: SessionFile,
        *,
        start: Cursor | None = None,
        skips: SkipCounts | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be positive, got {max_line_bytes}")
        self.session = session
        self.cursor: Cursor = start if start is not None else START
        self.skips: SkipCounts = skips if skips is not None else Counter()
        self.max_line_bytes = max_line_bytes
        self.restarted = False
        self.format: Format | None = session.format
        if self.format is None:
            self.format = detect_format(session.path, max_line_bytes=max_line_bytes)

    def __iter__(self) -> Iterator[Message]:
        return self._read()

    def _read(self) -> Iterator[Message]:
        skips = self.skips
        self.restarted = False
        try:
            f = self.session.path.open("rb")
        except OSError:
            skips[SkipReason.UNREADABLE_FILE.value] += 1
            return
        with f:
            head = f.read(_BINARY_SNIFF_BYTES)
            size = os.fstat(f.fileno()).st_size
            start = self.cursor
            if start.offset and not _fits(start, head, size):
                start = self.cursor = START
                self.restarted = True
            if size == 0:
                skips[SkipReason.EMPTY_FILE.value] += 1
                return
            if b"\0" in head:
                skips[SkipReason.BINARY_FILE.value] += 1
                return
            if self.format is None:
                # The file may have grown a recognisable line since construction.
                self.format = detect_format(self.session.path, max_line_bytes=self.max_line_bytes)
            if self.format is None:
                skips[SkipReason.UNKNOWN_FORMAT.value] += 1
                return
            source = LineSource(
                f,
                offset=start.offset,
                line=start.line,
                skips=skips,
                max_line_bytes=self.max_line_bytes,
            )
            ctx = ParseContext(self.session.agent, self.session.session_id, skips)
            yield from _PARSERS[self.format](source, ctx)
            # Reached only when the consumer read everything: a reader abandoned half-way
            # keeps its old cursor, so nothing it did not hand out is skipped next time.
            end = source.offset
            want = min(HEAD_BYTES, end)
            if len(head) < want:  # the file was shorter than a head when we opened it
                f.seek(0)
                head = f.read(want)
            self.cursor = Cursor(
                offset=end,
                line=source.line,
                head=head_hash(head[:want]),
                size=os.fstat(f.fileno()).st_size,
            )


def _fits(cursor: Cursor, head: bytes, size: int) -> bool:
    """cursor_is_valid() on bytes already read: the file is long enough and starts the same."""
    want = min(HEAD_BYTES, cursor.offset)
    return size >= cursor.offset and len(head) >= want and head_hash(head[:want]) == cursor.head
