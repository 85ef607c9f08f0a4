"""The Message type every transcript reader yields, and the facts known about a session file."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class Kind(StrEnum):
    """Who made a message. Only SPEECH can reach the corpus."""

    SPEECH = "speech"  # a person or the agent said it
    HARNESS = "harness"  # made by the tool: isMeta lines, compaction summaries, command caveats
    INJECTED = "injected"  # context/steering injected by structure (event log), never speech


class SessionKind(StrEnum):
    INTERACTIVE = "interactive"
    CRON = "cron"
    HEARTBEAT = "heartbeat"
    SUBAGENT = "subagent"
    DREAMING = "dreaming"
    COMPACTION = "compaction"  # a harness's own summarising run (Claude Code agent-acompact-*)


# Kinds whose transcripts are the machinery talking to itself, never ingested.
INTERNAL_KINDS = frozenset(
    {SessionKind.CRON, SessionKind.HEARTBEAT, SessionKind.DREAMING, SessionKind.COMPACTION}
)


class Format(StrEnum):
    OPENCLAW = "openclaw"  # OpenClaw / pi session JSONL, v1 and v3
    CLAUDE_CODE = "claude-code"
    EVENT_LOG = "event-log"


class SkipReason(StrEnum):
    MALFORMED_JSON = "malformed-json"
    NOT_AN_OBJECT = "not-an-object"
    INVALID_UTF8 = "invalid-utf8"
    OVERSIZED_LINE = "oversized-line"
    UNKNOWN_LINE_TYPE = "unknown-line-type"
    EMPTY_FILE = "empty-file"
    BINARY_FILE = "binary-file"
    UNKNOWN_FORMAT = "unknown-format"
    UNREADABLE_FILE = "unreadable-file"


# Reason -> count; readers add to it, the run summary reports it.
SkipCounts = Counter[str]


@dataclass(frozen=True, slots=True)
class Speaker:
    """A person a transcript names as a message's sender: a display name, and the id that
    tells two people of one name apart (the name itself where the transcript gives none)."""

    name: str
    id: str


@dataclass(frozen=True, slots=True)
class Message:
    """One utterance from a transcript, before tag stripping and admission."""

    agent: str
    session_id: str
    line: int  # 1-based line of the transcript file where the message starts
    timestamp: datetime | None  # timezone-aware UTC where the file says when
    role: Role
    kind: Kind
    blocks: tuple[str, ...]  # text blocks only: no thinking, tool calls, tool results, images
    source: str | None = None  # event log `data.source`, kept as metadata
    message_id: str | None = None
    # Files the agent wrote during this message (write/edit tool calls): reported by forget.
    writes: tuple[str, ...] = ()
    # Who sent it, where the transcript names a person (OpenClaw's inbound `Sender` block):
    # None for the agent's own words and wherever nothing names the sender.
    speaker: Speaker | None = None

    @property
    def text(self) -> str:
        return "\n\n".join(b for b in self.blocks if b)


@dataclass(frozen=True, slots=True)
class SessionFile:
    """One transcript file and what is known about its session."""

    agent: str
    session_id: str
    path: Path
    format: Format | None = None  # None: sniff it
    session_key: str | None = None
    channel: str | None = None
    chat_type: str | None = None
    external_source: str | None = None  # hook external content source, e.g. "gmail"
    participants: tuple[str, ...] = ()
    kind: SessionKind = SessionKind.INTERACTIVE
    created_at: datetime | None = None
    # When the session started is in its header, not read yet: discovery leaves that line to
    # the read that opens the file anyway (`TranscriptReader.header_time`), or to whoever
    # needs it without reading (`transcripts.with_start`). A night opens an unchanged file
    # not at all, and a new one once.
    start_unread: bool = False
    extra: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    # What says who this session is with (`dreaming.ingest.admission.Evidence`); None: nothing does,
    # and an unclassified session is never taken for the owner's own.
    classified_by: str | None = None
    # The operator lists it among their own chats (`[admission] owner_sessions`): a group chat
    # so listed is people the agent works for, whose lines count as the owner's (each named).
    vouched: bool = False
