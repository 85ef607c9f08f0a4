"""Pieces every format reader shares: timestamps, text blocks, files written by tool calls."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dreaming.messages import SkipCounts

# The longest first line read for a session header's start time: a header is small, this
# only bounds a pathological first line.
HEADER_LIMIT = 64 * 1024
# Epoch numbers above this are milliseconds: as seconds they would be past the year 5000.
_EPOCH_MS_THRESHOLD = 1e11


@dataclass(frozen=True, slots=True)
class ParseContext:
    """What a format parser needs besides the lines: whose session it is and where to count."""

    agent: str
    session_id: str
    skips: SkipCounts


def parse_timestamp(value: object) -> datetime | None:
    """An ISO string or epoch number (seconds or milliseconds) as an aware UTC datetime."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        if parsed.tzinfo is None:
            # Harnesses write UTC; a naive stamp is read as UTC rather than the reader's zone.
            return parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if abs(value) > _EPOCH_MS_THRESHOLD else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def header_time(first_line: bytes) -> datetime | None:
    """The session start an OpenClaw header (`{"type": "session", "timestamp": ...}`, the
    file's first line) gives, or None when the line is no such header."""
    try:
        header = json.loads(first_line)
    except (ValueError, RecursionError):
        return None
    if isinstance(header, dict) and header.get("type") == "session":
        return parse_timestamp(header.get("timestamp"))
    return None


def text_blocks(content: object) -> tuple[str, ...]:
    """The text of `content` (a string or a list of blocks): only `text` blocks count.

    Whitespace-only text is dropped, so a reply made only of tool calls has no blocks.
    """
    if isinstance(content, str):
        return (content,) if content.strip() else ()
    if type(content) is not list:
        return ()
    out: list[str] = []
    for block in content:
        if type(block) is dict and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str) and text.strip():
                out.append(text)
    return tuple(out)


# Tools whose calls write files, by lower-cased name across harnesses (pi/OpenClaw, Claude
# Code, Codex-style apply_patch, editor tools). Reads and shell commands are not writes.
_WRITE_TOOLS = frozenset(
    {
        "write",
        "edit",
        "multiedit",
        "multi_edit",
        "notebookedit",
        "apply_patch",
        "applypatch",
        "write_file",
        "edit_file",
        "create_file",
        "str_replace_editor",
        "str_replace_based_edit_tool",
    }
)
_PATH_ARGS = ("file_path", "path", "filePath", "notebook_path")
# apply_patch carries its targets inside the patch text (`*** Update File: a/b.py`).
_PATCH_ARGS = ("input", "patch")
_PATCH_MARKERS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")
# Tool-call block shapes: pi/OpenClaw `toolCall` + `arguments`, Anthropic `tool_use` + `input`.
_CALL_ARGS = {"toolCall": "arguments", "tool_use": "input"}


def tool_writes(content: object) -> tuple[str, ...]:
    """Paths written by the write/edit-like tool calls among `content`'s blocks."""
    if type(content) is not list:
        return ()
    out: list[str] = []
    for block in content:
        if type(block) is not dict:
            continue
        kind = block.get("type")
        arg_key = _CALL_ARGS.get(kind) if isinstance(kind, str) else None
        if arg_key is None:
            continue
        name = block.get("name")
        if not isinstance(name, str) or name.lower() not in _WRITE_TOOLS:
            continue
        args = block.get(arg_key)
        if isinstance(args, str):
            # Some providers leave the arguments as the raw JSON string the model produced.
            args = _loads_or_none(args)
        if type(args) is not dict or args.get("command") == "view":
            continue
        out.extend(_paths_from_args(args))
    return tuple(dict.fromkeys(out))


def _paths_from_args(args: dict[str, Any]) -> list[str]:
    for key in _PATH_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return [value]
    for key in _PATCH_ARGS:
        value = args.get(key)
        if isinstance(value, str):
            return [
                line[len(marker) :].strip()
                for line in value.splitlines()
                for marker in _PATCH_MARKERS
                if line.startswith(marker) and line[len(marker) :].strip()
            ]
    return []


def _loads_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
