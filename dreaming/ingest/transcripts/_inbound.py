"""What an OpenClaw transcript says about its own chat, for sessions no index describes.

OpenClaw prefixes each inbound user message with metadata blocks:

    Conversation info (untrusted metadata):
    ```json
    {"message_id": "30", "sender_id": "5540671995", "conversation_label": "Research id:-100…",
     "group_subject": "Research", "is_group_chat": true}
    ```
    Sender (untrusted metadata):
    ```json
    {"label": "Graeme (5540671995)", "id": "5540671995", "name": "Graeme"}
    ```

A group chat says so (`is_group_chat`, a group subject, channel or space); a direct chat
carries the blocks without any of that. Cron runs start with `[cron:<job> <name>]` (or carry a
`provenance` naming the cron tool) and heartbeats ask for `HEARTBEAT_OK`. Only the head of the
file is read: the chat a session is in does not change half-way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreaming.messages import SessionKind

# Enough for the first few dozen messages; a metadata block is a few hundred bytes.
HEAD_BYTES = 256 * 1024
# Only blocks the gateway put there count: they open the message (after any blocks that
# plugins injected in front, such as <relevant-memories>) and follow one another. A block
# quoted later in the text (inside a forwarded email, say) is content, and must not be able
# to vouch for the session it arrived in.
_LEADING_INJECTED = re.compile(r"\s*<([A-Za-z][\w-]*)[^>]*>.*?</\1>", re.S)
_BLOCK = re.compile(
    r"\s*(Conversation info|Sender) \(untrusted metadata\):\s*```json\s*(\{.*?\})\s*```", re.S
)
_GROUP_KEYS = ("group_subject", "group_channel", "group_space", "is_forum", "topic_id")


@dataclass(frozen=True, slots=True)
class ChatFacts:
    """What the transcript's own metadata shows."""

    chat_type: str | None = None  # "group" or "direct"
    kind: SessionKind = SessionKind.INTERACTIVE
    participants: tuple[str, ...] = ()


def chat_facts(path: Path) -> ChatFacts | None:
    """The chat an OpenClaw transcript's inbound metadata shows, or None when it shows none."""
    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return None
    lines = head.split(b"\n")
    if len(head) == HEAD_BYTES:
        lines = lines[:-1]  # the last one may be cut
    group = direct = False
    first = True
    participants: list[str] = []
    for raw in lines:
        message = _message(raw)
        if message is None or message.get("role") != "user":
            continue
        if first:  # only a run's opening prompt says it is a cron run or a heartbeat
            first = False
            kind = _internal_kind(message)
            if kind is not None:
                return ChatFacts(kind=kind)
        for name, body in _leading_blocks(_text(message.get("content"))):
            try:
                meta = json.loads(body)
            except ValueError:
                continue
            if not isinstance(meta, dict):
                continue
            direct = True
            if name == "Conversation info" and _is_group(meta):
                group = True
            for key in ("sender_id", "id", "name", "sender"):
                value = meta.get(key)
                if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
                    participants.append(str(value))
    if not (group or direct):
        return None
    return ChatFacts(
        chat_type="group" if group else "direct",
        participants=tuple(dict.fromkeys(participants))[:16],
    )


def _leading_blocks(text: str) -> list[tuple[str, str]]:
    pos = 0
    while m := _LEADING_INJECTED.match(text, pos):
        pos = m.end()
    found = []
    while m := _BLOCK.match(text, pos):
        found.append((m[1], m[2]))
        pos = m.end()
    return found


def _message(raw: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    message = obj.get("message", obj)
    return message if isinstance(message, dict) else None


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def _is_group(meta: dict[str, Any]) -> bool:
    if meta.get("is_group_chat") is True or any(k in meta for k in _GROUP_KEYS):
        return True
    chat_id = meta.get("chat_id")
    return isinstance(chat_id, str) and chat_id.split(":", 1)[0] in {"channel", "group"}


def _internal_kind(message: dict[str, Any]) -> SessionKind | None:
    provenance = message.get("provenance")
    if isinstance(provenance, dict):
        tool = provenance.get("sourceTool")
        if tool == "cron":
            return SessionKind.CRON
        if tool == "heartbeat":
            return SessionKind.HEARTBEAT
    text = _text(message.get("content")).lstrip()
    if text.startswith("[cron:"):
        return SessionKind.CRON
    if "HEARTBEAT_OK" in text or "HEARTBEAT.md" in text:
        return SessionKind.HEARTBEAT
    return None
