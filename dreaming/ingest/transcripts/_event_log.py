"""Durable event-log JSONL: `{"type": "<ns>/<event>", "data": {...}, "timestamp"|"ts": ...}`.

`user/message` and `assistant/message` are speech. `context/message` and `steering/message`
are content the runtime put in front of the model: they are always INJECTED, whatever their
text says, because structure is the one marking a text cannot forge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from dreaming.messages import Format, Kind, Message, Role, SessionFile, SkipReason

from ._common import ParseContext, parse_timestamp, str_or_none, text_blocks, tool_writes
from ._discovery import discover_event_log
from ._format import SourceRoot, TranscriptFormat

_MESSAGES = {
    "user/message": (Role.USER, Kind.SPEECH),
    "assistant/message": (Role.ASSISTANT, Kind.SPEECH),
    "context/message": (Role.SYSTEM, Kind.INJECTED),
    "steering/message": (Role.SYSTEM, Kind.INJECTED),
}
# Event namespaces the log uses for everything that is not a message (turns, steps, tool
# calls and results, streamed chunks, requests, compaction, retries, todos, ...).
_QUIET_NAMESPACES = frozenset(
    {
        "agent",
        "assistant",
        "compact",
        "compaction",
        "context",
        "goal",
        "llm",
        "mode",
        "model",
        "request",
        "session",
        "steering",
        "step",
        "todo",
        "tool",
        "turn",
        "user",
    }
)
_TIME_KEYS = ("timestamp", "ts", "time")
_UNKNOWN = SkipReason.UNKNOWN_LINE_TYPE.value


def parse_event_log(
    objects: Iterable[tuple[int, dict[str, Any]]], ctx: ParseContext
) -> Iterator[Message]:
    skips = ctx.skips
    for line, obj in objects:
        event_type = obj.get("type")
        kind = _MESSAGES.get(event_type) if isinstance(event_type, str) else None
        if kind is None:
            if not is_quiet_event(event_type):
                skips[_UNKNOWN] += 1
            continue
        data = obj.get("data")
        if type(data) is not dict:
            skips[_UNKNOWN] += 1
            continue
        content = data.get("content")
        blocks = text_blocks(content)
        role, message_kind = kind
        writes = tool_writes(content) if role is Role.ASSISTANT else ()
        if not blocks and not writes:
            continue
        yield Message(
            agent=ctx.agent,
            session_id=ctx.session_id,
            line=line,
            timestamp=_timestamp(obj, data),
            role=role,
            kind=message_kind,
            blocks=blocks,
            source=_source(data.get("source")),
            message_id=str_or_none(data.get("id")) or str_or_none(obj.get("id")),
            writes=writes,
        )


def is_quiet_event(event_type: object) -> bool:
    """Whether `event_type` is a known non-message event of the log."""
    if not isinstance(event_type, str):
        return False
    namespace, sep, _ = event_type.partition("/")
    return bool(sep) and namespace in _QUIET_NAMESPACES


def _timestamp(obj: dict[str, Any], data: dict[str, Any]) -> datetime | None:
    for holder in (obj, data):
        for key in _TIME_KEYS:
            value = holder.get(key)
            if value is not None:
                return parse_timestamp(value)
    return None


def _source(value: object) -> str | None:
    """`data.source` as a string: kept verbatim, or as compact JSON when structured."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _claims(line_type: str, obj: dict[str, Any]) -> bool:
    return line_type in _MESSAGES or ("data" in obj and is_quiet_event(line_type))


def _discover(root: SourceRoot) -> list[SessionFile]:
    if root.agent is None or (root.agents is not None and root.agent not in root.agents):
        return []
    return discover_event_log(root.path, root.agent)


FORMAT = TranscriptFormat(
    name=Format.EVENT_LOG,
    claims=_claims,
    discover=_discover,
    parse=parse_event_log,
    layout="*.jsonl files under <path> (or one file)",
)
