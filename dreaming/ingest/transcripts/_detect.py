"""Telling the transcript formats apart from their first object lines."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from dreaming.messages import Format

from ._format import FORMATS
from ._lines import DEFAULT_MAX_LINE_BYTES, LineSource

SNIFF_LINES = 20
_BINARY_SNIFF_BYTES = 8192


def classify_line(obj: dict[str, Any]) -> Format | None:
    """The format one object line belongs to, when it says so unambiguously (the table's
    formats claim disjoint line types, so the first claim is the only one)."""
    line_type = obj.get("type")
    if not isinstance(line_type, str):
        return None
    for fmt in FORMATS.values():
        if fmt.claims(line_type, obj):
            return fmt.name
    return None


def detect_format(path: Path, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Format | None:
    """Sniff the first object lines of `path`; None when they name no format we read.

    The first line that names a format decides. Unreadable, empty and binary files are None.
    """
    try:
        with path.open("rb") as f:
            head = f.read(_BINARY_SNIFF_BYTES)
            if b"\0" in head and not starts_as_json(head):
                return None  # binary; a NUL inside a later line costs only that line
            source = LineSource(
                f,
                offset=0,
                line=0,
                skips=Counter(),
                max_line_bytes=max_line_bytes,
                max_lines=SNIFF_LINES,
            )
            for _, obj in source:
                found = classify_line(obj)
                if found is not None:
                    return found
    except OSError:
        return None
    return None


def starts_as_json(head: bytes) -> bool:
    """Whether a file's first line is a JSON object (a NUL later on is a bad line, not a
    binary file)."""
    first = head.split(b"\n", 1)[0]
    try:
        return isinstance(json.loads(first), dict)
    except (ValueError, RecursionError):
        return False
