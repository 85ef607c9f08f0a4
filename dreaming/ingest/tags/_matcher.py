"""Compiled stripping for one set of declarations (the registry builds one per scope).

How it works, and why:

- A cheap pre-check (``'<' in text``, a handful of ``in`` tests for sentinel prefixes) lets
  the vast majority of messages through untouched before any regex runs.
- One combined regex finds the leftmost *token*: an XML open/close/self-closing tag of any
  declared name or a delimited begin/end marker; a second one finds sentinel lines (run
  only when a sentinel prefix occurs in the text). Python code then finds where that
  token's block ends (matching close tag with nesting, matching end marker, closing fence,
  blank line). Regexes only ever tokenize, with possessive quantifiers, so nothing
  backtracks catastrophically; the block search is a linear walk.
- Every alternative of the token regex starts with a bare literal character (``<`` for
  most), not with a group: that lets Python's regex engine skip ahead to candidate
  characters instead of trying every alternative at every position, which is the
  difference between ~10 MB/s and memchr speed on text full of unrelated ``<``.
- Fail closed: an opening tag or begin marker without its end strips to the end of the
  text; a stray closing tag or end marker is removed on its own.
- Removing a block may leave blank lines behind, or create a new token where two pieces
  of text meet (``<sys<system-reminder/>tem-reminder>``). A pass is therefore repeated
  until the text stops changing; every pass that changes the text makes it shorter, so
  this terminates, and the result is a fixpoint: stripping is idempotent by construction.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ._model import Pattern, TagDeclaration

# A line that is empty or whitespace only, found by the newline that ends the line before.
_BLANK_LINE = re.compile(r"\n[^\S\n]*+(?=\n|\Z)")
# An opening code fence (backticks leading a line), and a closing one (backticks alone).
_FENCE_OPEN = re.compile(r"^[^\S\n]*+(`{3,})", re.MULTILINE)
_TICKS = re.compile(r"`{3,}")
# A closing code fence: backticks alone on their line.
_FENCE_CLOSE = re.compile(r"^[^\S\n]*+(`{3,})[^\S\n]*+$", re.MULTILINE)
# `id=...` inside a delimited marker, so an end marker is paired with its own begin.
_MARKER_ID = re.compile(r"""\bid\s*+=\s*+["']?+([^"'\s>]+)""")
# What may follow an XML tag name without the name going on (`system-reminder-x` is not
# `system-reminder`).
_NAME_END = r"(?![\w.:-])"


_CLOSERS = {"<": ">", "[": "]", "{": "}", "(": ")"}


_CLOSERS = {"<": ">", "[": "]", "{": "}", "(": ")"}


def _marker_regex(marker: str) -> str:
    """A delimited marker, with optional attributes when it is bracketed.

    ``<<<EXTERNAL_UNTRUSTED_CONTENT`` also matches ``<<<EXTERNAL_UNTRUSTED_CONTENT
    id="ab">>>``: attributes run (on the same line) up to the closing brackets that mirror
    the opening ones. Without those the attributes run to the end of the line, which
    fails closed. A marker that already ends with its closing bracket, or is not
    bracketed at all, matches as declared.
    """
    body = re.escape(marker)
    if re.match(r"\w", marker[-1]):
        body += r"(?!\w)"
    closer = _CLOSERS.get(marker[0])
    if closer is None or marker.endswith(closer):
        return body
    count = len(marker) - len(marker.lstrip(marker[0]))
    c = re.escape(closer)
    return body + rf"[^\n{c}]*+{c}{{0,{count}}}+"


def _alternative(group: str, first: str, rest: str) -> str:
    """``first`` (one character) then ``rest``, case-insensitive, captured as ``group``.

    The first character stays outside the group as a bare literal whenever it is uncased,
    so the regex engine can scan for it (see the module docstring). ``group`` captures
    the token minus that character; callers use the whole match.
    """
    if first.lower() == first.upper():
        return f"{re.escape(first)}(?P<{group}>(?i:{rest}))"
    return f"(?P<{group}>(?i:{re.escape(first)}{rest}))"


def _marker_alternative(group: str, marker: str) -> str:
    return _alternative(group, marker[0], _marker_regex(marker)[len(re.escape(marker[0])) :])


def _xml_name_regex(decl: TagDeclaration) -> str:
    if not decl.variants:
        return re.escape(decl.tag)
    return "".join("[-_]" if c in "-_" else re.escape(c) for c in decl.tag)


def _xml_alternative(group: str, close_group: str, names: str) -> str:
    # `[^>]*+(?:>|\Z)`: a tag without its `>` runs to the end of the text (fail closed).
    rest = rf"\s*+(?P<{close_group}>/\s*+)?(?:{names}){_NAME_END}[^>]*+(?:>|\Z)"
    return _alternative(group, "<", rest)


@dataclass(frozen=True)
class _Delimited:
    decl: TagDeclaration
    begin: re.Pattern[str]
    pair: re.Pattern[str]  # group "e" = end marker, group "b" = begin marker
    same_marker: bool  # begin and end are one and the same string


class _Scan:
    """One pass over one text: cached look-aheads shared by every search in the pass.

    Each cached match is the leftmost one at or after the position it was searched from,
    so it stays the answer for any later position up to its own start. Within a pass the
    positions asked for only move forward, so the cache is always valid; this keeps a pass
    linear even though the sentinel regex may look far ahead from every token.
    """

    def __init__(self, text: str, finders: Sequence[re.Pattern[str]]) -> None:
        self.text = text
        self._finders = finders
        self._cached: list[re.Match[str] | None] = [None] * len(finders)
        self._exhausted = [False] * len(finders)
        self.marker_ids: dict[str, dict[str, tuple[list[int], list[int]]]] = {}

    def next_token(self, pos: int) -> re.Match[str] | None:
        best: re.Match[str] | None = None
        for i, finder in enumerate(self._finders):
            if self._exhausted[i]:
                continue
            m = self._cached[i]
            if m is None or m.start() < pos:
                m = self._cached[i] = finder.search(self.text, pos)
                if m is None:
                    self._exhausted[i] = True
                    continue
            # Ties go to the earlier finder: block tokens before sentinel lines.
            if best is None or m.start() < best.start():
                best = m
        return best

    def end_with_id(self, key: str, spec: _Delimited, marker_id: str, after: int) -> int | None:
        """End of the first end marker carrying ``marker_id`` after ``after``.

        The end markers are indexed by id once per pass, on demand, so pairing stays
        linear however many blocks a message holds.
        """
        index = self.marker_ids.get(key)
        if index is None:
            index = self.marker_ids[key] = {}
            for m in spec.pair.finditer(self.text):
                if m.lastgroup == "e" and (mid := _MARKER_ID.search(m.group())) is not None:
                    starts, ends = index.setdefault(mid.group(1), ([], []))
                    starts.append(m.start())
                    ends.append(m.end())
        starts, ends = index.get(marker_id, ([], []))
        k = bisect.bisect_left(starts, after)
        return ends[k] if k < len(ends) else None


class Stripper:
    """Removes the blocks of a fixed set of declarations from text."""

    def __init__(self, declarations: Sequence[TagDeclaration]) -> None:
        self.declarations = tuple(declarations)
        xml = [d for d in self.declarations if d.pattern is Pattern.XML]
        sentinels = [d for d in self.declarations if d.pattern is Pattern.SENTINEL_LINE]
        delimited = [d for d in self.declarations if d.pattern is Pattern.DELIMITED]

        ends: list[str] = []
        begins: list[str] = []
        self._delimited: dict[str, _Delimited] = {}
        for i, d in enumerate(delimited):
            assert d.begin is not None and d.end is not None
            same = d.begin.casefold() == d.end.casefold()
            if not same:
                # Ends before begins: at one position the longer, more specific marker wins
                # when an end marker happens to start with the begin marker.
                ends.append(_marker_alternative(f"de{i}", d.end))
            begins.append(_marker_alternative(f"db{i}", d.begin))
            self._delimited[f"db{i}"] = _Delimited(
                decl=d,
                begin=re.compile(_marker_alternative("b", d.begin)),
                pair=re.compile(
                    _marker_alternative("e", d.end) + "|" + _marker_alternative("b", d.begin)
                ),
                same_marker=same,
            )
        alternatives = ends + begins

        self._xml: dict[str, tuple[TagDeclaration, re.Pattern[str]]] = {}
        if xml:
            # Longest names first so a name that is a prefix of another cannot shadow it.
            xml.sort(key=lambda d: -len(d.tag))
            for d in xml:
                same_name = re.compile(_xml_alternative("t", "c", _xml_name_regex(d)))
                self._xml[d.key] = (d, same_name)
            names = "|".join(_xml_name_regex(d) for d in xml)
            alternatives.append(_xml_alternative("x", "xc", f"(?P<xn>{names})"))

        self._sentinels: dict[str, TagDeclaration] = {}
        self._end_patterns: dict[str, re.Pattern[str]] = {}
        for d in sentinels:
            assert d.sentinel_prefix is not None
            self._sentinels[d.sentinel_prefix] = d
            if d.end_pattern is not None:
                self._end_patterns[d.sentinel_prefix] = re.compile(d.end_pattern)
        self._token = re.compile("|".join(alternatives)) if alternatives else None
        self._sentinel: re.Pattern[str] | None = None
        if sentinels:
            prefixes = sorted(self._sentinels, key=len, reverse=True)
            alternation = "|".join(re.escape(p) for p in prefixes)
            self._sentinel = re.compile(f"(?P<s>(?m:^)[^\\S\\n]*+(?P<sp>{alternation}))")

        # Pre-check material: every XML tag and most markers start with "<"; anything
        # else must appear literally.
        markers = [m for d in delimited for m in (d.begin or "", d.end or "")]
        self._needs_lt = bool(xml) or any(m.startswith("<") for m in markers)
        self._literals = tuple(self._sentinels)
        # One punctuation character every sentinel prefix contains ("(" and ":" for the
        # built-ins) answers "no sentinel here" for most messages in a single scan.
        common = set.intersection(*(set(p) for p in self._literals)) if self._literals else set()
        anchors = sorted(c for c in common if not c.isalnum() and not c.isspace())
        self._anchor = anchors[0] if anchors else ""
        other = [re.escape(m) for m in markers if not m.startswith("<")]
        self._other_markers = re.compile(f"(?i:{'|'.join(other)})") if other else None

    # -- public --------------------------------------------------------------------------

    def might_match(self, text: str) -> bool:
        """Cheap test: False means :meth:`strip` would return ``text`` unchanged."""
        if self._needs_lt and "<" in text:
            return True
        if self._has_sentinel(text):
            return True
        return self._other_markers is not None and self._other_markers.search(text) is not None

    def strip(self, text: str) -> str:
        while self.might_match(text):
            stripped = self._pass(text)
            if stripped is text:
                break
            text = stripped
        return text

    # -- one pass ------------------------------------------------------------------------

    def _has_sentinel(self, text: str) -> bool:
        if self._anchor not in text:  # "" is in every text
            return False
        # A plain loop, not any(...): measurably faster on this hot path.
        for prefix in self._literals:  # noqa: SIM110
            if prefix in text:
                return True
        return False

    def _pass(self, text: str) -> str:
        """Remove every block found scanning left to right; ``text`` itself if none."""
        finders = [self._token] if self._token is not None else []
        if self._sentinel is not None and self._has_sentinel(text):
            finders.append(self._sentinel)
        scan = _Scan(text, finders)
        spans: list[tuple[int, int]] = []
        pos = 0
        while (m := scan.next_token(pos)) is not None:
            end = self._block_end(scan, m)
            spans.append((m.start(), end))
            pos = end
        if not spans:
            return text
        return _remove(text, spans)

    def _block_end(self, scan: _Scan, m: re.Match[str]) -> int:
        text = scan.text
        kind = m.lastgroup
        assert kind is not None
        if kind == "x":
            return self._xml_end(text, m)
        if kind == "s":
            return self._sentinel_end(scan, m)
        if kind.startswith("de"):
            return m.end()  # a stray end marker: removed on its own
        spec = self._delimited[kind]
        if spec.same_marker:
            nxt = spec.begin.search(text, m.end())
            return nxt.end() if nxt else len(text)
        mid = _MARKER_ID.search(m.group())
        if mid is not None:
            # The end marker with the begin's own id wins, so a forged end marker inside
            # the untrusted content cannot cut the block short.
            paired = scan.end_with_id(kind, spec, mid.group(1), m.end())
            if paired is not None:
                return paired
        depth = 1
        for t in spec.pair.finditer(text, m.end()):
            depth += 1 if t.lastgroup == "b" else -1
            if depth == 0:
                return t.end()
        return len(text)

    def _xml_end(self, text: str, m: re.Match[str]) -> int:
        token = m.group()
        if m.group("xc") is not None or _is_self_closing(token):
            return m.end()  # a stray closing tag, or <tag/>
        if not token.endswith(">"):
            return len(text)
        same_name = self._same_name(text, m)
        depth = 1
        for t in same_name.finditer(text, m.end()):
            if t.group("c") is not None:
                depth -= 1
                if depth == 0:
                    return t.end()
            elif not t.group().endswith(">"):
                return len(text)
            elif not _is_self_closing(t.group()):
                depth += 1
        return len(text)

    def _same_name(self, text: str, m: re.Match[str]) -> re.Pattern[str]:
        """The token regex of the declaration whose tag ``m`` opened."""
        found = self._xml.get(_fold(m.group("xn")))
        if found is not None:
            return found[1]
        # Case-insensitive matching and casefold() disagree on a few characters
        # (U+0130); fall back to asking each declaration's own regex.
        for _, same_name in self._xml.values():
            if same_name.match(text, m.start()):
                return same_name
        raise AssertionError("token matched no declared XML tag")  # pragma: no cover

    def _is_opener(self, m: re.Match[str]) -> bool:
        """Does this token open a block that has its own end (XML or delimited)?"""
        kind = m.lastgroup or ""
        if kind == "x":
            return m.group("xc") is None and not _is_self_closing(m.group())
        return kind.startswith("db")

    def _sentinel_end(self, scan: _Scan, m: re.Match[str]) -> int:
        text = scan.text
        n = len(text)
        line_end = _line_end(text, m.end())
        end_re = self._end_patterns.get(m.group("sp"))
        if end_re is not None:
            # Declared end: the first following line that matches, inclusive.
            pos = line_end
            while pos < n:
                nxt = _line_end(text, pos + 1)
                # Sliced, not pos/endpos: a `^` in the operator's regex must see a line start.
                if end_re.search(text[pos + 1 : nxt]):
                    return nxt
                pos = nxt
            return n

        # A fence or a declared block right after the prefix, or on the very next line:
        # the sentinel's block runs through it.
        for start in (m.end(), line_end + 1):
            if start > n:
                break
            stop = _line_end(text, start)
            content = text[start:stop]
            at = start + len(content) - len(content.lstrip())
            if at < stop:
                end = self._block_at(scan, at)
                if end is not None:
                    return end
        return self._paragraph_end(scan, m.end())

    def _block_at(self, scan: _Scan, at: int) -> int | None:
        """End of the fence or declared block that opens exactly at ``at``, if one does."""
        fence = _TICKS.match(scan.text, at)
        if fence is not None:
            return _fence_end(scan.text, _line_end(scan.text, at), len(fence.group()))
        t = self._token.match(scan.text, at) if self._token is not None else None
        if t is not None and self._is_opener(t):
            return self._block_end(scan, t)
        return None

    def _paragraph_end(self, scan: _Scan, cursor: int) -> int:
        """Up to the next blank line, but never ending inside a fence or declared block
        that opens within the paragraph (that would leak the rest of it)."""
        text = scan.text
        stop = _paragraph_stop(text, cursor)
        fence: re.Match[str] | None = None
        fence_stop = -1
        while cursor < stop:
            if fence_stop != stop or (fence is not None and fence.start() < cursor):
                # Otherwise still valid: the cursor only moves forward.
                fence, fence_stop = _FENCE_OPEN.search(text, cursor, stop), stop
            t = scan.next_token(cursor)
            if t is not None and t.start() >= stop:
                t = None
            if fence is not None and (t is None or fence.start() < t.start()):
                block_end = _fence_end(text, _line_end(text, fence.start()), len(fence.group(1)))
            elif t is not None:
                if not self._is_opener(t):
                    cursor = t.end()
                    continue
                block_end = self._block_end(scan, t)
            else:
                break
            if block_end > stop:
                stop = _paragraph_stop(text, block_end)
            cursor = block_end
        return stop


def _fold(name: str) -> str:
    return name.casefold().replace("-", "_")


def _is_self_closing(token: str) -> bool:
    return token.endswith(">") and token[:-1].rstrip().endswith("/")


def _line_end(text: str, pos: int) -> int:
    """Index of the newline ending the line that contains ``pos`` (or len(text))."""
    nl = text.find("\n", pos)
    return len(text) if nl < 0 else nl


def _paragraph_stop(text: str, pos: int) -> int:
    blank = _BLANK_LINE.search(text, pos)
    return len(text) if blank is None else blank.start()


def _fence_end(text: str, opening_line_end: int, ticks: int) -> int:
    for close in _FENCE_CLOSE.finditer(text, min(opening_line_end + 1, len(text))):
        if len(close.group(1)) >= ticks:
            return close.end()
    return len(text)  # unterminated fence: fail closed


def _remove(text: str, spans: list[tuple[int, int]]) -> str:
    """Cut ``spans`` out of ``text``, tidying only the whitespace each cut leaves behind.

    At each cut the whitespace on both sides (W) is rewritten: inside a line it is kept
    as is; across lines it becomes at most one blank line plus the indentation of the next
    line, and a block that filled whole lines takes its own line break with it. At the
    start or end of the text the leftover whitespace is dropped.
    """
    n = len(text)
    merged: list[list[int]] = []
    for s, e in spans:
        # Blocks separated only by whitespace are one cut: nothing of the user's is
        # between them.
        if merged and (s == merged[-1][1] or text[merged[-1][1] : s].isspace()):
            merged[-1][1] = e
        else:
            merged.append([s, e])

    out: list[str] = []
    prev = 0
    for s, e in merged:
        left = s
        while left > prev and text[left - 1].isspace():
            left -= 1
        right = e
        while right < n and text[right].isspace():
            right += 1
        before, after = text[left:s], text[e:right]
        out.append(text[prev:left])
        if left == 0:
            nl = after.rfind("\n")
            out.append(after[nl + 1 :] if nl >= 0 and right < n else "")
        elif right == n:
            pass
        else:
            ws = before + after
            breaks = ws.count("\n")
            if breaks == 0:
                out.append(ws)
            else:
                if "\n" in before and "\n" in after:
                    breaks -= 1  # the block's own line goes with it
                out.append("\n" * min(breaks, 2) + ws[ws.rfind("\n") + 1 :])
        prev = right
    out.append(text[prev:])
    return "".join(out)
