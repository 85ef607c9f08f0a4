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
from collections.abc import Collection, Mapping, Sequence

from dreaming.syntax import ENTRY_LINE_RE, GROUP_MARK, HEADING_LINE_RE, KEY_HEAD_RE, LEGACY_OPEN

# What `tidy` accepts under a heading: blank lines, then an entry line.
_ENTRY_FOLLOWS = re.compile(rf"(?:[^\S\n]*\n)*(?:{ENTRY_LINE_RE.pattern})$", re.MULTILINE)
# Past this many purged texts in one file a pattern of them all costs about what reading
# the whole file does: it is read whole.
_MOST_NEEDLES = 200


def literals(texts: Sequence[str]) -> re.Pattern[str]:
    """One pattern matching any of `texts`, each as it is."""
    return re.compile("|".join(map(re.escape, texts)))


def head_spans(content: str, heads: Collection[str]) -> dict[str, list[tuple[int, int]]]:
    """Where each of `heads` (keys' first digits, `syntax.shortest`) occurs in `content`,
    those that do: one pass of the key-head pattern however many there are
    (`syntax.mentions_key` asks one at a time); a head not spelled as a key's is searched
    as text (an empty one occurs at 0)."""
    wanted = set(heads)
    out: dict[str, list[tuple[int, int]]] = {}
    if any(KEY_HEAD_RE.fullmatch(h) for h in wanted):
        for m in KEY_HEAD_RE.finditer(content):
            if m.group() in wanted:
                out.setdefault(m.group(), []).append(m.span())
    for head in wanted:
        if not KEY_HEAD_RE.fullmatch(head) and head in content:
            out[head] = _found(content, head)
    return out


def _found(content: str, text: str) -> list[tuple[int, int]]:
    """Every place `text` occurs (an empty one: at 0)."""
    out, at = [], content.find(text)
    while at >= 0 and text:
        out.append((at, at + len(text)))
        at = content.find(text, at + 1)
    return out or [(0, 0)]


def windows(
    content: str, needles: Sequence[str], heads: Mapping[str, Sequence[tuple[int, int]]]
) -> list[tuple[int, int]] | None:
    """The slices (start, end) of `content`, in order and apart, that together hold every
    line where one of `needles` (purged texts, each in `content`) or `heads` (removed keys'
    first digits, where they occur: `head_spans`) occurs, or None when the file must be read
    whole. A purge's entries lie all over a file: one slice around each, merged where they
    meet."""
    if LEGACY_OPEN in content or not _headings_hold_entries(content):
        return None
    found = _occurrences(content, needles, heads)
    if found is None:
        return None
    # (start, end, where the entry line it ends with starts: the end of the file if none)
    out: list[tuple[int, int, int]] = []
    for first, last in found:
        if out and first < out[-1][1]:
            # Within the slice before: one slice. Reaching into the entry line the slice
            # ends with, that line may go, so the slice goes on to the next one.
            start, _, anchor = out[-1]
            if last > anchor:
                out[-1] = (start, *_after_entry_from(content, last))
            continue
        # It starts after the last entry line before it: the one the slice before ends
        # with, or a later one. Slices never overlap.
        out.append((_after_entry_before(content, first), *_after_entry_from(content, last)))
    return [(start, end) for start, end, _ in out]


def _occurrences(
    content: str, needles: Sequence[str], heads: Mapping[str, Sequence[tuple[int, int]]]
) -> list[tuple[int, int]] | None:
    """(start, end) of the needles' occurrences (one pass of a pattern of them) and the
    heads', in order. A pattern finds matches that do not overlap: an occurrence it passes
    over starts inside a match, so on a line the match's slice holds. None: read the file
    whole."""
    if "" in needles or "" in heads or len(needles) > _MOST_NEEDLES:
        return None
    spans = [span for found in heads.values() for span in found]
    if needles:
        spans += [m.span() for m in literals(needles).finditer(content)]
    return sorted(spans)


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


def _after_entry_from(content: str, pos: int) -> tuple[int, int]:
    """(the end of the first entry line that starts after the line holding `pos`, where that
    line starts); (the end of the file, the end of the file): none."""
    start = content.find("\n", pos)
    while start >= 0:
        start += 1
        end = content.find("\n", start)
        if end < 0:
            end = len(content)
        if ENTRY_LINE_RE.fullmatch(content, start, end):
            return min(end + 1, len(content)), start
        start = end if end < len(content) else -1
    return len(content), len(content)


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


__all__ = ["head_spans", "literals", "windows"]
