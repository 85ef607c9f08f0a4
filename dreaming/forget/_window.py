"""The parts of a memory file a scrub has to read: a purge removes a handful of lines from
a MEMORY.md (or a backup of it) that may hold tens of thousands, and parsing the whole file
was most of what a scrub cost. In a file of entry lines (no legacy `dreaming:entry` block,
the one segment that spans lines) every managed segment stands on whole lines, so the parse
of a slice that starts and ends right after an entry line is the whole file's parse of
those lines: what lies between the slices is kept byte for byte, and the scrub's result is
each slice scrubbed, in place.

A slice is widened to such entry lines, outward from each place a purged text or key occurs;
an entry line there holds neither, so the scrub keeps it, and a managed heading before it
keeps an entry (`memory_file.tidy` leaves every heading outside the slices as it is). A file
with a heading already empty (a person emptied a group by hand) is read whole: tidying it
removes that heading wherever it stands. tests/test_forget_window.py checks the result
against the whole file's scrub.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dreaming.syntax import ENTRY_LINE_RE, GROUP_MARK, HEADING_LINE_RE, LEGACY_OPEN

# What `tidy` accepts under a heading: blank lines, then an entry line.
_ENTRY_FOLLOWS = re.compile(rf"(?:[^\S\n]*\n)*(?:{ENTRY_LINE_RE.pattern})$", re.MULTILINE)


def windows(content: str, marks: Iterable[str]) -> list[tuple[int, int]] | None:
    """The slices (start, end) of `content`, in order and apart, that together hold every
    occurrence of `marks` (purged texts, the first digits of removed keys), or None when
    the file must be read whole. A purge's entries lie all over a file: one slice around
    each, merged where they meet."""
    if LEGACY_OPEN in content or not _headings_hold_entries(content):
        return None
    found: list[tuple[int, int]] = []
    for mark in marks:
        at = content.find(mark)
        while at >= 0:
            found.append((at, at + len(mark)))
            at = content.find(mark, at + 1)
    out: list[tuple[int, int]] = []
    for first, last in sorted(found):
        if out and first < out[-1][1]:
            # Within the slice before: one slice. When in the entry line the slice ends with,
            # that line may go, so the slice goes on to the next one.
            out[-1] = (out[-1][0], max(out[-1][1], _after_entry_from(content, last)))
            continue
        # It starts after the last entry line before it: the one the slice before ends
        # with, or a later one. Slices never overlap.
        out.append((_after_entry_before(content, first), _after_entry_from(content, last)))
    return out


def _after_entry_before(content: str, pos: int) -> int:
    """The end of the last entry line that ends at or before the line holding `pos` (0:
    none)."""
    end = content.rfind("\n", 0, pos)  # the line break ending the line before
    while end >= 0:
        start = content.rfind("\n", 0, end) + 1
        if ENTRY_LINE_RE.fullmatch(content, start, end):
            return end + 1
        end = start - 1
    return 0


def _after_entry_from(content: str, pos: int) -> int:
    """The end of the first entry line that starts after the line holding `pos` (the end of
    the file: none)."""
    start = content.find("\n", pos)
    while start >= 0:
        start += 1
        end = content.find("\n", start)
        if end < 0:
            end = len(content)
        if ENTRY_LINE_RE.fullmatch(content, start, end):
            return min(end + 1, len(content))
        start = end if end < len(content) else -1
    return len(content)


def _headings_hold_entries(content: str) -> bool:
    """Whether an entry line follows every managed heading (after blank lines only), as
    `memory_file.tidy` asks of it. Headings are found by their mark: a search in C, where
    a pattern anchored at every line start would try each character."""
    at = content.find(GROUP_MARK)
    while at >= 0:
        start = content.rfind("\n", 0, at) + 1
        end = content.find("\n", at)
        end = len(content) if end < 0 else end
        if HEADING_LINE_RE.fullmatch(content, start, end) and not _ENTRY_FOLLOWS.match(
            content, min(end + 1, len(content))
        ):
            return False
        at = content.find(GROUP_MARK, end)
    return True


__all__ = ["windows"]
