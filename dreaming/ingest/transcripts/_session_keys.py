"""What an OpenClaw session key says about its session.

Keys look like `agent:<agentId>:<rest>`, where rest is `main`, `<channel>[:<account>]:dm:<peer>`
(or `direct`), `<channel>:group:<id>`, `<channel>:channel:<id>`, optionally followed by
`:thread:<id>`/`:topic:<id>`, or names a machinery lane: `cron:<job>[:run:<id>]`,
`subagent:<uuid>`, `hook:gmail:<id>`, `hook:<name>:<id>`, `...:heartbeat`, `dreaming...`.
"""

from __future__ import annotations

from dataclasses import dataclass

from dreaming.messages import SessionKind

# Markers followed by an id, mapped to the chat type they mean (None: not a chat type).
_ID_MARKERS: dict[str, str | None] = {
    "dm": "direct",
    "direct": "direct",
    "group": "group",
    "channel": "channel",
    "thread": None,
    "topic": None,
    "cron": None,
    "run": None,
    "subagent": None,
    "gmail": None,  # hook:gmail:<message id>
}


@dataclass(frozen=True, slots=True)
class KeyFacts:
    agent_id: str | None
    kind: SessionKind
    channel: str | None = None
    chat_type: str | None = None
    peer: str | None = None  # the other side of a direct chat
    external_source: str | None = None  # "gmail" or "webhook" for hook sessions


def _rest(key: str) -> tuple[str | None, list[str]]:
    parts = key.strip().split(":")
    if len(parts) >= 3 and parts[0].lower() == "agent":
        return parts[1].lower() or None, parts[2:]
    return None, parts


def _structural(rest: list[str]) -> list[str]:
    """The lower-cased segments that name lanes, not ids (a peer named `cron` is an id)."""
    out: list[str] = []
    skip = False
    for part in rest:
        if skip:
            skip = False
            continue
        lowered = part.lower()
        out.append(lowered)
        skip = lowered in _ID_MARKERS
    return out


def session_kind_from_key(key: str) -> SessionKind:
    """The kind of session a key names. Internal lanes win over subagent, so they fail closed."""
    segments = _structural(_rest(key)[1])
    if any(s.startswith("dreaming") for s in segments):
        return SessionKind.DREAMING
    if "heartbeat" in segments:
        return SessionKind.HEARTBEAT
    if "cron" in segments:
        return SessionKind.CRON
    if "subagent" in segments:
        return SessionKind.SUBAGENT
    return SessionKind.INTERACTIVE


def parse_session_key(key: str) -> KeyFacts:
    agent_id, rest = _rest(key)
    kind = session_kind_from_key(key)
    lowered = [part.lower() for part in rest]
    external = None
    if lowered and lowered[0] == "hook":
        external = "gmail" if len(lowered) > 1 and lowered[1] == "gmail" else "webhook"
    channel = chat_type = peer = None
    skip = False
    for index, part in enumerate(lowered):
        if skip:
            skip = False
            continue
        if part not in _ID_MARKERS:
            continue
        skip = True
        marked = _ID_MARKERS[part]
        if marked is None or chat_type is not None:
            continue
        chat_type = marked
        # `<channel>[:<account>]:dm:<peer>`: the channel opens the rest; a bare `dm:<peer>`
        # (per-peer scope) has none.
        channel = lowered[0] if index > 0 and lowered[0] != "hook" else None
        if marked == "direct" and index + 1 < len(rest) and rest[index + 1]:
            peer = rest[index + 1]
    return KeyFacts(
        agent_id=agent_id,
        kind=kind,
        channel=channel,
        chat_type=chat_type,
        peer=peer,
        external_source=external,
    )
