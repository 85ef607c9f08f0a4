"""OpenClaw / pi session JSONL (v1 linear files and v3 id/parentId trees).

Only `message` lines whose role is `user` or `assistant` are conversation; their `text` blocks
are the words. Tool calls are kept only as the files they wrote. Every other line type the
format defines carries no conversation and is passed over without counting. A user message's
sender is the person its inbound `Sender` block names (`_inbound.sender`), if any.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from dreaming.messages import Format, Kind, Message, Role, SessionFile, SkipReason

from ._common import ParseContext, parse_timestamp, str_or_none, text_blocks, tool_writes
from ._discovery import discover_openclaw, openclaw_agents
from ._format import SourceRoot, TranscriptFormat
from ._inbound import sender

# Line types of the format that carry no conversation text (and name it: format detection
# reads them too).
QUIET_TYPES = frozenset(
    {
        "session",
        "model_change",
        "thinking_level_change",
        "compaction",
        "custom",
        "custom_message",
        "branch_summary",
        "label",
        "session_info",
    }
)
# Roles that are speech. toolResult, bashExecution, custom (extension messages) and whatever
# a later version adds are not: they are the machinery's, not a person's or the agent's.
_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT}
_UNKNOWN = SkipReason.UNKNOWN_LINE_TYPE.value


def parse_openclaw(
    objects: Iterable[tuple[int, dict[str, Any]]], ctx: ParseContext
) -> Iterator[Message]:
    skips = ctx.skips
    for line, obj in objects:
        line_type = obj.get("type")
        if line_type != "message":
            if not isinstance(line_type, str) or line_type not in QUIET_TYPES:
                skips[_UNKNOWN] += 1
            continue
        msg = obj.get("message")
        if type(msg) is not dict:
            skips[_UNKNOWN] += 1  # a message line without a message: not a shape we know
            continue
        role_name = msg.get("role")
        role = _ROLES.get(role_name) if isinstance(role_name, str) else None
        if role is None:
            continue
        content = msg.get("content")
        blocks = text_blocks(content)
        writes = tool_writes(content) if role is Role.ASSISTANT else ()
        if not blocks and not writes:
            continue  # e.g. an error reply with content []
        timestamp = parse_timestamp(obj.get("timestamp"))
        if timestamp is None:
            timestamp = parse_timestamp(msg.get("timestamp"))
        yield Message(
            agent=ctx.agent,
            session_id=ctx.session_id,
            line=line,
            timestamp=timestamp,
            role=role,
            kind=Kind.SPEECH,
            blocks=blocks,
            message_id=str_or_none(obj.get("id")),
            writes=writes,
            speaker=sender(blocks[0]) if role is Role.USER and blocks else None,
        )


def _claims(line_type: str, obj: dict[str, Any]) -> bool:
    if line_type == "message":
        return type(obj.get("message")) is dict
    return line_type in QUIET_TYPES


def _discover(root: SourceRoot) -> list[SessionFile]:
    return discover_openclaw(root.path, root.agents, root.sessions)


def _agents(root: SourceRoot) -> list[str]:
    return openclaw_agents(root.path, root.agents)


FORMAT = TranscriptFormat(
    name=Format.OPENCLAW,
    claims=_claims,
    discover=_discover,
    parse=parse_openclaw,
    layout="<path>/agents/<agent>/sessions/*.jsonl",
    needs_agent=False,
    agents=_agents,
)
