"""Corpus lines: normalization, references, and the dated corpus files in the workspace.

The database is the source of truth; a day's file is rewritten from it (atomically) after
the lines commit. Days touched by a commit are marked dirty in the same transaction and
cleared only after their file is written, so a crash in between is repaired by the next run.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from dreaming.memory_file import atomic_write

_WS = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def normalize(text: str, max_chars: int) -> str:
    """Collapse whitespace (a corpus line is one line), drop control characters, cap length."""
    text = _WS.sub(" ", _CONTROL.sub("", text)).strip()
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return text


def text_hash(text: str) -> str:
    return "b2:" + hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def reference(agent: str, session_id: str, line: int) -> str:
    return f"{agent}/sessions/{agent}/{session_id}#L{line}"


def day_of(ts: datetime | None, fallback: str) -> str:
    return ts.date().isoformat() if ts is not None else fallback


def render_day(agent: str, rows: Iterable[tuple[str, int, str]]) -> str:
    """rows: (session_id, line, text), already in file order."""
    return "".join(f"[{reference(agent, s, n)}] {t}\n" for s, n, t in rows)


def write_day(folder: Path, day: str, content: str) -> Path:
    path = folder / f"{day}.txt"
    if content:
        atomic_write(path, content)
    else:
        path.unlink(missing_ok=True)
    return path
