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
from pathlib import Path

from dreaming.errors import WorkspaceFileError

# -- the key --------------------------------------------------------------------------------

# The key carries its algorithm ("m:" = blake2b-64 of the normalized text) so a later change
# of hash shows up as a different prefix instead of silently splitting the data.
KEY_PREFIX = "m:"
KEY_DIGITS = 16
# A key, as a regular expression (no groups).
KEY = rf"m:[0-9a-f]{{{KEY_DIGITS}}}"
_WS = re.compile(r"\s+")


def normalize_entry_text(text: str) -> str:
    """The form an entry's key is computed from: identical facts share a key."""
    text = unicodedata.normalize("NFKC", text)
    return _WS.sub(" ", text).strip().rstrip(".!").casefold()


def entry_key(text: str) -> str:
    digest = hashlib.blake2b(normalize_entry_text(text).encode("utf-8"), digest_size=8)
    return KEY_PREFIX + digest.hexdigest()


def mentions_key(content: str, key: str) -> bool:
    """Whether `content` may hold a managed entry of `key` (a fast test before parsing)."""
    return f"dreaming:entry {key} " in content or f"<!-- {key} -->" in content


# -- MEMORY.md: entries, headings -------------------------------------------------------------

# Managed groups in render order, and the titles of their headings.
GROUPS: tuple[str, ...] = ("instructions", "people", "work", "preferences")
GROUP_TITLES: dict[str, str] = {g: g.capitalize() for g in GROUPS}

_BLOCK_OPEN = "<!-- dreaming:entry {key} -->\n"
_BLOCK_CLOSE = "\n<!-- /dreaming:entry -->\n"
_GROUP_MARK = "<!-- dreaming:group -->"

# One pass over a file finds the three managed segments. A legacy block may start anywhere
# (as it always could); lines and headings only at a line start. No two alternatives can
# start at the same character. A compact line's key is the last comment of the line (the
# text is matched lazily up to a comment that the end of the line follows). A heading owns
# the blank line right before it, if there is one: the line that separates its group from
# what comes before goes with it when an empty group is removed, so adding and removing a
# group leaves the file as it was.
SEGMENT_RE = re.compile(
    rf"(?P<block><!-- dreaming:entry (?P<bkey>{KEY}) -->\n"
    r"(?P<btext>(?s:.*?))\n<!-- /dreaming:entry -->\n?)"
    rf"|^- (?P<ltext>.+?) <!-- (?P<lkey>{KEY}) -->$\n?"
    rf"|(?:^\n)?^## (?P<title>.+?) {_GROUP_MARK}$\n?",
    re.MULTILINE,
)
# Anything entry text must never contain: our block markers, our heading marker and the
# compact form's key comment (whitespace and case tolerated: a near miss is as suspect).
MARKER_RE = re.compile(
    rf"<!--\s*(?:/?\s*dreaming:(?:entry|group)\b[^>]*|{KEY}\s*)-->", re.IGNORECASE
)
# Every marker of ours, DREAMS.md's included: never part of a claim read from a transcript.
OWN_MARKER_RE = re.compile(
    rf"<!--\s*(?:/?\s*dreaming:(?:entry|diary|group)\b[^>]*?|{KEY}\s*)-->", re.IGNORECASE
)
# A managed entry as it looks in a corpus line (whitespace collapsed to single spaces): a
# legacy block, or a compact line "- text <!-- m:... -->" (its line break is gone, so it
# starts at a dash after a space or at the start; the text stops at the first "<", as
# entry text has no markup). The conditional closes a block only where one was opened.
# The text is possessive and bounded: each dash costs at most one scan of an entry's length.
QUOTED_ENTRY_RE = re.compile(
    r"(?:(?P<block><!--\s*dreaming:entry\s+)|(?<!\S)-\s[^<]{1,2000}+<!--\s*)"
    rf"(?P<key>{KEY})\s*-->"
    r"(?(block).*?<!--\s*/\s*dreaming:entry\s*-->)",
    re.IGNORECASE | re.DOTALL,
)


def one_line(text: str) -> str:
    """Entry text as a compact line shows it: every whitespace run one space. The key does
    not change (:func:`normalize_entry_text` collapses whitespace the same way)."""
    return " ".join(text.split())


def render_line(key: str, text: str) -> str:
    """The compact form of an entry, one line with its trailing newline."""
    return f"- {one_line(text)} <!-- {key} -->\n"


def render_block(key: str, text: str) -> str:
    """The legacy block form, of files written before the compact form (no longer written;
    tests of reading old files build them with it)."""
    return _BLOCK_OPEN.format(key=key) + text + _BLOCK_CLOSE


def render_heading(group: str) -> str:
    """A group's managed heading line (without the blank line before it)."""
    return f"## {GROUP_TITLES.get(group, group)} {_GROUP_MARK}\n"


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
