"""Transcript readers (OpenClaw/pi, Claude Code, event log) and session discovery.

Each format is one module holding one `TranscriptFormat` (`FORMAT`), registered below with
one line; everything format-specific is looked up in `FORMATS`.

Every reader yields `dreaming.messages.Message` and counts per-line problems in a
`SkipCounts`; bad input is skipped and counted, never raised. Reading is incremental: a
`Cursor` says where the next read of a file starts and `cursor_is_valid` whether it still can.
"""

from __future__ import annotations

from . import _claude_code, _event_log, _openclaw
from ._cursor import Cursor, cursor_is_valid
from ._detect import detect_format
from ._discovery import (
    claude_projects,
    discover_claude_code,
    discover_claude_project,
    discover_event_log,
    discover_openclaw,
    openclaw_agents,
    with_start,
)
from ._format import FORMATS, SourceRoot, TranscriptFormat, format_named, register
from ._inbound import ChatFacts, chat_facts, head_senders
from ._lines import DEFAULT_MAX_LINE_BYTES
from ._reader import TranscriptReader
from ._session_keys import session_kind_from_key

# The formats, one registration line each (claims are disjoint, so the order is not a rule).
register(_openclaw.FORMAT)
register(_claude_code.FORMAT)
register(_event_log.FORMAT)

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "FORMATS",
    "ChatFacts",
    "Cursor",
    "SourceRoot",
    "TranscriptFormat",
    "TranscriptReader",
    "chat_facts",
    "claude_projects",
    "cursor_is_valid",
    "detect_format",
    "discover_claude_code",
    "discover_claude_project",
    "discover_event_log",
    "discover_openclaw",
    "format_named",
    "head_senders",
    "openclaw_agents",
    "session_kind_from_key",
    "with_start",
]
