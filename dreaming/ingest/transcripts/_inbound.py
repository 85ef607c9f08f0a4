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

The same blocks name each message's sender (`sender`): the `Sender` block's `name`, else the
conversation info's `sender`, else the label without its id. OpenClaw's own clients (the
control UI, the TUI, the CLI: `GATEWAY_CLIENT_IDS`) are the owner at a keyboard, not a
person the transcript names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreaming.messages import SessionKind, Speaker

from ._lines import loads

# Enough for the first few dozen messages; a metadata block is a few hundred bytes.
HEAD_BYTES = 256 * 1024
# In the text of every line that can name someone (`_may_name`)
_METADATA = b"(untrusted metadata)"
# Only blocks the gateway put there count: they open the message (after any blocks that
# plugins injected in front, such as <relevant-memories>) and follow one another. A block
# quoted later in the text (inside a forwarded email, say) is content, and must not be able
# to vouch for the session it arrived in.
_LEADING_INJECTED = re.compile(r"\s*<([A-Za-z][\w-]*)[^>]*>.*?</\1>", re.S)
_BLOCK = re.compile(
    r"\s*(Conversation info|Sender) \(untrusted metadata\):\s*```json\s*(\{.*?\})\s*```", re.S
)
_GROUP_KEYS = ("group_subject", "group_channel", "group_space", "is_forum", "topic_id")
# OpenClaw's gateway clients (src/gateway/protocol/client-info.ts): a sender of these ids is
# one of the owner's own front ends, never a person of its own.
GATEWAY_CLIENTS = frozenset(
    {
        "webchat-ui",
        "openclaw-control-ui",
        "openclaw-browser-copilot",
        "openclaw-tui",
        "webchat",
        "cli",
        "gateway-client",
        "openclaw-macos",
        "openclaw-linux",
        "openclaw-ios",
        "openclaw-watchos",
        "openclaw-android",
        "node-host",
        "openclaw-worker",
        "test",
        "fingerprint",
        "openclaw-probe",
    }
)
MAX_NAME_CHARS = 40
# What a name may hold once it is written into MEMORY.md ("Caroline: ..."): letters, digits,
# spaces and the marks names use. Anything else (markup, colons, brackets) is dropped.
_NAME_DROP = re.compile(r"[^\w .'\-]+")
_LABEL_ID = re.compile(r"\s*\([^()]*\)\s*$")


@dataclass(frozen=True, slots=True)
class ChatFacts:
    """What the transcript's own metadata shows."""

    chat_type: str | None = None  # "group" or "direct"
    kind: SessionKind = SessionKind.INTERACTIVE
    participants: tuple[str, ...] = ()
    senders: tuple[Speaker, ...] = ()  # the people the head's `Sender` blocks name


def _head_lines(path: Path) -> list[bytes] | None:
    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return None
    lines = head.split(b"\n")
    if len(head) == HEAD_BYTES:
        lines = lines[:-1]  # the last one may be cut
    return lines


def chat_facts(path: Path) -> ChatFacts | None:
    """The chat an OpenClaw transcript's inbound metadata shows, or None when it shows none."""
    lines = _head_lines(path)
    if lines is None:
        return None
    group = direct = False
    first = True
    participants: list[str] = []
    senders: dict[str, Speaker] = {}
    for raw in lines:
        if not first and not _may_name(raw):
            continue  # not parsed: every session's head is read, most lines name no one
        message = _message(raw)
        if message is None or message.get("role") != "user":
            continue
        if first:  # only a run's opening prompt says it is a cron run or a heartbeat
            first = False
            kind = _internal_kind(message)
            if kind is not None:
                return ChatFacts(kind=kind)
        text = _text(message.get("content"))
        who = sender(text)
        if who is not None:
            senders.setdefault(who.id, who)
        for name, body in _leading_blocks(text):
            meta = _json_object(body)
            if meta is None:
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
        senders=tuple(senders.values())[:16],
    )


def head_senders(path: Path) -> tuple[Speaker, ...]:
    """The people the `Sender` blocks at the head of an OpenClaw transcript name."""
    out: dict[str, Speaker] = {}
    for raw in _head_lines(path) or ():
        message = _message(raw) if _may_name(raw) else None
        if message is not None and message.get("role") == "user":
            who = sender(_text(message.get("content")))
            if who is not None:
                out.setdefault(who.id, who)
    return tuple(out.values())


def sender(text: str) -> Speaker | None:
    """The person an inbound message's leading metadata blocks name as its sender, or None
    (no blocks, one of OpenClaw's own clients, nothing that reads as a name)."""
    if "(untrusted metadata)" not in text:
        return None
    info: dict[str, Any] = {}
    who: dict[str, Any] = {}
    for block, body in _leading_blocks(text):
        meta = _json_object(body)
        if meta is not None:
            (who if block == "Sender" else info).update(meta)
    ident = _field(who, "id") or _field(info, "sender_id")
    label = _field(who, "label")
    if ident is not None and ident.casefold() in GATEWAY_CLIENTS:
        return None
    if label is not None and label.casefold().split(" ", 1)[0] in GATEWAY_CLIENTS:
        return None
    raw = (
        _field(who, "name")
        or _field(info, "sender")
        or (_LABEL_ID.sub("", label) if label else None)
        or _field(who, "username")
    )
    name = clean_name(raw) if raw else None
    if name is None:
        return None
    return Speaker(name=name, id=ident or name.casefold())


def clean_name(raw: str) -> str | None:
    """A sender's name as an entry may show it: one line of letters, digits, spaces and the
    marks names use, at most MAX_NAME_CHARS; None when nothing of it is left."""
    name = " ".join(_NAME_DROP.sub(" ", raw).split()).strip(" .'-")
    return name[:MAX_NAME_CHARS].rstrip() or None


def _field(meta: dict[str, Any], key: str) -> str | None:
    value = meta.get(key)
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value).strip()
    return text or None


def _json_object(body: str) -> dict[str, Any] | None:
    try:
        meta = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def _leading_blocks(text: str) -> list[tuple[str, str]]:
    pos = 0
    while m := _LEADING_INJECTED.match(text, pos):
        pos = m.end()
    found = []
    while m := _BLOCK.match(text, pos):
        found.append((m[1], m[2]))
        pos = m.end()
    return found


def _may_name(raw: bytes) -> bool:
    """Whether a transcript line's decoded text can hold "(untrusted metadata)", without
    which no block opens a message and `sender` names no one. JSON can escape its letters,
    spaces and parentheses only as a backslash, "u" and four hex digits, so a line holding
    neither the phrase nor such an escape cannot (a text's parts join on newlines, which
    the phrase does not hold)."""
    return _METADATA in raw or b"\\u" in raw


def _message(raw: bytes) -> dict[str, Any] | None:
    try:
        obj = loads(raw)  # every session's head is read: msgspec's speed, json.loads' values
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
