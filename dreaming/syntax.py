"""The on-disk syntax of the files dreaming writes into an agent's workspace, in one place.

MEMORY.md holds managed entries among the operator's text; each entry is identified by a
key derived from its text. DREAMS.md holds dated diary entries inside markers. This module
owns how all of that is spelled: the key and its pattern, an entry line, the legacy block
form, a group heading, the diary markers, what our own text looks like echoed back into a
transcript, and how a workspace file is read and written (atomically). Everything else
(`memory.memory_file`, `memory.diary`, `memory.sanitize`, `ingest.claims`,
`ingest.candidates`, `forget`) builds from it, so a change of syntax is a change here.

It is the ground floor: it imports nothing of the package but its errors.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from dreaming.errors import WorkspaceFileError

# -- the key --------------------------------------------------------------------------------

# The key carries its algorithm ("m:" = blake2b-64 of the normalized text) so a later change
# of hash shows up as a different prefix instead of silently splitting the data. The
# database holds the whole key; a file shows the shortest prefix of it, of at least
# SHOWN_DIGITS digits, that no other key of that file starts with (`shown_keys`): the
# agent pays for every character of MEMORY.md on every turn. A line's text hashes to its
# whole key, so the file maps back to the database exactly; only a line a person edited is
# known by its shown key alone (`matches`).
KEY_PREFIX = "m:"
KEY_DIGITS = 16
SHOWN_DIGITS = 6
_SHOWN_MIN = len(KEY_PREFIX) + SHOWN_DIGITS
# A whole key, and a key as a file may show it, as regular expressions (no groups).
KEY = rf"m:[0-9a-f]{{{KEY_DIGITS}}}"
SHOWN_KEY = rf"m:[0-9a-f]{{{SHOWN_DIGITS},{KEY_DIGITS}}}"
_WS = re.compile(r"\s+")


def normalize_entry_text(text: str) -> str:
    """The form an entry's key is computed from: identical facts share a key."""
    text = unicodedata.normalize("NFKC", text)
    return _WS.sub(" ", text).strip().rstrip(".!").casefold()


def entry_key(text: str) -> str:
    digest = hashlib.blake2b(normalize_entry_text(text).encode("utf-8"), digest_size=8)
    return KEY_PREFIX + digest.hexdigest()


def shown_keys(keys: Iterable[str], others: Iterable[str] = ()) -> dict[str, str]:
    """Whole key -> the key a file shows for it: its shortest prefix of at least
    SHOWN_DIGITS digits that none of the other `keys` starts with, nor any of `others` (keys
    as a file already shows them, of lines it keeps as they are). So two keys that share
    their first digits in one file both show more of them, and a file's keys depend only on
    which keys it holds."""
    wanted = set(keys)
    ordered = sorted(wanted | set(others))
    out: dict[str, str] = {}
    # In sorted order a key shares its longest prefix with a neighbour.
    for i, key in enumerate(ordered):
        if key not in wanted:
            continue
        near = [ordered[j] for j in (i - 1, i + 1) if 0 <= j < len(ordered)]
        common = max((_common_prefix(key, other) for other in near), default=0)
        out[key] = key[: max(_SHOWN_MIN, common + 1)]
    return out


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def matches(shown: str, key: str) -> bool:
    """Whether a key as a file shows it stands for the whole key `key`."""
    return len(shown) >= _SHOWN_MIN and key.startswith(shown)


class KeyIndex:
    """Whole keys, found by a key as a file shows it."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._by_head: dict[str, list[str]] = {}
        for key in keys:
            self._by_head.setdefault(key[:_SHOWN_MIN], []).append(key)

    def find(self, shown: str) -> list[str]:
        """The keys `shown` stands for (more than one only when a file showed a key before a
        key with the same first digits existed)."""
        return [k for k in self._by_head.get(shown[:_SHOWN_MIN], ()) if matches(shown, k)]


def mentions_key(content: str, key: str) -> bool:
    """Whether `content` may hold a managed entry of `key`, in any form (a fast test before
    parsing): every form shows at least the key's first SHOWN_DIGITS digits."""
    return key[:_SHOWN_MIN] in content


# -- MEMORY.md: entries, headings -------------------------------------------------------------

# The managed groups and their titles are data (`dreaming.ingest.grouping`); a heading's
# spelling is here.

_BLOCK_OPEN = "<!-- dreaming:entry {key} -->\n"
_BLOCK_CLOSE = "\n<!-- /dreaming:entry -->\n"
_GROUP_MARK = "<!-- dreaming:group -->"

# One pass over a file finds the three managed segments. A legacy block may start anywhere
# (as it always could); lines and headings only at a line start. No two alternatives can
# start at the same character. A line's key is the last comment of the line (the text is
# matched lazily up to a comment that the end of the line follows): `<!--m:3f9a1c-->` now,
# `<!-- m:<16 digits> -->` in files of the first compact form (`okey`). A heading owns
# the blank line right before it, if there is one: the line that separates its group from
# what comes before goes with it when an empty group is removed, so adding and removing a
# group leaves the file as it was.
SEGMENT_RE = re.compile(
    rf"(?P<block><!-- dreaming:entry (?P<bkey>{KEY}) -->\n"
    r"(?P<btext>(?s:.*?))\n<!-- /dreaming:entry -->\n?)"
    rf"|^- (?P<ltext>.+?) <!--(?: (?P<okey>{KEY}) |(?P<lkey>{SHOWN_KEY}))-->$\n?"
    rf"|(?:^\n)?^## (?P<title>.+?) {_GROUP_MARK}$\n?",
    re.MULTILINE,
)
# The same spellings one by one, for a scrub that reads only the lines around what it
# removes (`forget._window`): where a legacy block (the one segment spanning lines) begins,
# an entry line and a heading line, each without its line break.
LEGACY_OPEN = _BLOCK_OPEN.split("{key}")[0]
ENTRY_LINE_RE = re.compile(rf"- .+? <!--(?: {KEY} |{SHOWN_KEY})-->")
GROUP_MARK = _GROUP_MARK
HEADING_LINE_RE = re.compile(rf"## .+? {_GROUP_MARK}")
# A key's first digits, as every form of an entry shows them (`shortest`, `mentions_key`).
KEY_HEAD_RE = re.compile(rf"{re.escape(KEY_PREFIX)}[0-9a-f]{{{SHOWN_DIGITS}}}")
# Anything entry text must never contain: our block markers, our heading marker and the
# compact form's key comment (whitespace and case tolerated: a near miss is as suspect).
MARKER_RE = re.compile(
    rf"<!--\s*(?:/?\s*dreaming:(?:entry|group)\b[^>]*|{SHOWN_KEY}\s*)-->", re.IGNORECASE
)
# Every marker of ours, DREAMS.md's included: never part of a claim read from a transcript.
OWN_MARKER_RE = re.compile(
    rf"<!--\s*(?:/?\s*dreaming:(?:entry|diary|group)\b[^>]*?|{SHOWN_KEY}\s*)-->", re.IGNORECASE
)
# A managed entry as it looks in a corpus line (whitespace collapsed to single spaces): a
# legacy block, or a line "- text <!--m:...-->" (its line break is gone, so it
# starts at a dash after a space or at the start; the text stops at the first "<", as
# entry text has no markup). The conditional closes a block only where one was opened.
# The text is possessive and bounded: each dash costs at most one scan of an entry's length.
QUOTED_ENTRY_RE = re.compile(
    r"(?:(?P<block><!--\s*dreaming:entry\s+)|(?<!\S)-\s[^<]{1,2000}+<!--\s*)"
    rf"(?P<key>{SHOWN_KEY})\s*-->"
    r"(?(block).*?<!--\s*/\s*dreaming:entry\s*-->)",
    re.IGNORECASE | re.DOTALL,
)


def one_line(text: str) -> str:
    """Entry text as a compact line shows it: every whitespace run one space. The key does
    not change (:func:`normalize_entry_text` collapses whitespace the same way)."""
    return " ".join(text.split())


def render_line(shown: str, text: str) -> str:
    """An entry as a file shows it, one line with its trailing newline; `shown` is its key
    as the file shows it (`shown_keys`; a whole key is shown whole)."""
    return f"- {one_line(text)} <!--{shown}-->\n"


def reshow_line(raw: str, shown: str) -> str:
    """An entry line (of either form) showing its key as `shown` in the current form, its
    text byte for byte."""
    head, end = raw[: raw.rindex(" <!--")], "\n" if raw.endswith("\n") else ""
    return f"{head} <!--{shown}-->{end}"


def shortest(key: str) -> str:
    """A key as a file shows it when no other key there shares its first digits."""
    return key[:_SHOWN_MIN]


def render_old_line(key: str, text: str) -> str:
    """The first compact form, of files written before keys were shown short (no longer
    written; read and rewritten once; tests of reading old files build them with it)."""
    return f"- {one_line(text)} <!-- {key} -->\n"


def render_block(key: str, text: str) -> str:
    """The legacy block form, of files written before the compact form (no longer written;
    tests of reading old files build them with it)."""
    return _BLOCK_OPEN.format(key=key) + text + _BLOCK_CLOSE


def render_heading(title: str) -> str:
    """A group's managed heading line, titled `title` (without the blank line before it)."""
    return f"## {title} {_GROUP_MARK}\n"


# -- DREAMS.md ------------------------------------------------------------------------------

DIARY_RE = re.compile(
    r"<!-- dreaming:diary (?P<day>\d{4}-\d{2}-\d{2}) -->\n(?P<body>.*?)\n"
    r"<!-- /dreaming:diary -->\n?",
    re.DOTALL,
)


def render_diary(day: str, body: str) -> str:
    return f"<!-- dreaming:diary {day} -->\n{body}\n<!-- /dreaming:diary -->\n"


# -- reading and writing workspace files ------------------------------------------------------


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
