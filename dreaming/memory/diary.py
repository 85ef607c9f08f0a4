"""DREAMS.md: dated diary entries inside managed markers; operator text kept byte for byte.

    <!-- dreaming:diary 2026-03-14 -->
    ## 2026-03-14
    ...
    <!-- /dreaming:diary -->

Writing the entry of a date that already has one replaces it, so re-running REM for the same
night is idempotent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dreaming.memory.memory_file import atomic_write, load_text

ENTRY_RE = re.compile(
    r"<!-- dreaming:diary (?P<day>\d{4}-\d{2}-\d{2}) -->\n(?P<body>.*?)\n"
    r"<!-- /dreaming:diary -->\n?",
    re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class DiaryEntry:
    day: str
    body: str


def entries(text: str) -> list[DiaryEntry]:
    return [DiaryEntry(m["day"], m["body"]) for m in ENTRY_RE.finditer(text)]


def render_entry(day: str, body: str) -> str:
    return f"<!-- dreaming:diary {day} -->\n{body}\n<!-- /dreaming:diary -->\n"


def with_entry(text: str, day: str, body: str) -> str:
    """`text` with the diary entry for `day` set to `body` (in place, or appended)."""
    block = render_entry(day, body)
    for m in ENTRY_RE.finditer(text):
        if m["day"] == day:
            return text[: m.start()] + block + text[m.end() :]
    if text and not text.endswith("\n"):
        text += "\n"
    return text + block


def read(path: Path) -> str:
    return load_text(path) or ""


def write_entry(path: Path, day: str, body: str) -> bool:
    """Set the day's entry in DREAMS.md. Returns whether the file changed."""
    current = read(path)
    new = with_entry(current or "# DREAMS.md\n\n", day, body)
    if new == current:
        return False
    atomic_write(path, new)
    return True
