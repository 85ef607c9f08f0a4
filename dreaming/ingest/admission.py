"""What may enter the corpus, and whose words it is: classification, tombstones, internal
session kinds, and the exclusion policy.

A session is classified from every piece of evidence, in order: the index entry (OpenClaw's
sessions.json, or the source the operator configured), this project's record of it from an
earlier night, the transcript's own inbound metadata, and last the operator's word. A session
nothing classifies is *unclassified*: admitted as untrusted evidence, never as the owner's own
(admission fails closed). Admission is decided per session before any of its lines is read,
every night again; a session that is not admitted is recorded with its reason and never read.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from dreaming.config import CONFIG_FILENAME, AdmissionSettings, ExcludeSessions, Settings
from dreaming.ingest.transcripts import ChatFacts, chat_facts
from dreaming.messages import INTERNAL_KINDS, Format, Message, Role, SessionFile, SessionKind


class Status(StrEnum):
    ADMITTED = "admitted"
    EXCLUDED = "excluded"
    INTERNAL = "internal"
    FORGOTTEN = "forgotten"


class Evidence(StrEnum):
    """What classified a session (`SessionFile.classified_by`)."""

    INDEX = "index"  # OpenClaw's sessions.json entry
    SOURCE = "source"  # a source whose sessions are all the operator's own (Claude Code)
    RECORD = "record"  # what an earlier night learnt while the index still described it
    TRANSCRIPT = "transcript"  # the transcript's inbound metadata blocks
    OPERATOR = "operator"  # [admission] owner_sessions, or unclassified = "owner"


UNCLASSIFIED = "unclassified"


def classify(
    session: SessionFile,
    record: Mapping[str, Any] | None,
    policy: AdmissionSettings,
    *,
    scan: bool = True,
    facts_of: Callable[[Path], ChatFacts | None] = chat_facts,
) -> SessionFile:
    """`session` with what the best evidence says about its chat filled in; unchanged (and
    `classified_by` None) when nothing says anything. `scan=False` skips reading the
    transcript's metadata (the caller knows the file has not changed since it found none);
    `facts_of` reads it (`chat_facts`, or the answers a caller worked out beforehand)."""
    if session.classified_by is not None or "skip" in session.extra:
        return session
    # The operator's word is read from the settings each night, never from the record, so
    # taking a session off `owner_sessions` takes effect.
    if record is not None and _learnt(record):
        # An index entry that later disappears (a reset, /new) does not erase what was known.
        return dataclasses.replace(
            session,
            session_key=record.get("session_key"),
            channel=record.get("channel"),
            chat_type=record.get("chat_type"),
            external_source=record.get("external_source"),
            participants=tuple(json.loads(record.get("participants") or "[]")),
            kind=SessionKind(record.get("kind") or SessionKind.INTERACTIVE.value),
            classified_by=Evidence.RECORD.value,
        )
    if scan and session.format in (Format.OPENCLAW, None):
        facts = facts_of(session.path)
        if facts is not None:
            return dataclasses.replace(
                session,
                chat_type=facts.chat_type,
                kind=facts.kind,
                participants=facts.participants or session.participants,
                classified_by=Evidence.TRANSCRIPT.value,
            )
    if policy.unclassified == "owner" or _listed(session, policy):
        return dataclasses.replace(
            session, chat_type="direct", classified_by=Evidence.OPERATOR.value
        )
    return session


def reads_head(
    session: SessionFile, record: Mapping[str, Any] | None, *, scan: bool = True
) -> bool:
    """Whether `classify` reads `session`'s transcript head (`chat_facts`): what a caller
    admitting many sessions can read for all of them at once."""
    if session.classified_by is not None or "skip" in session.extra or _learnt(record):
        return False
    return scan and session.format in (Format.OPENCLAW, None)


def _learnt(record: Mapping[str, Any] | None) -> bool:
    """Whether an earlier night's record classifies the session (the operator's word
    aside: that is read from the settings each night)."""
    learnt = record.get("classified_by") if record is not None else None
    return bool(learnt) and learnt != Evidence.OPERATOR.value


def _listed(session: SessionFile, policy: AdmissionSettings) -> bool:
    """Whether the operator names `session` (by id or key) among their own chats."""
    names = [session.session_id] + ([session.session_key] if session.session_key else [])
    return any(fnmatch.fnmatchcase(n, p) for p in policy.owner_sessions for n in names)


class OriginClass(StrEnum):
    OWNER = "owner"  # the person the agent works for
    AGENT = "agent"  # the agent itself
    UNTRUSTED = "untrusted"  # third parties: email, webhooks, other people in group chats
    SYSTEM = "system"  # system-role speech


@dataclass(frozen=True, slots=True)
class Decision:
    status: Status
    reason: str | None = None

    @property
    def admitted(self) -> bool:
        return self.status is Status.ADMITTED


def _matches(value: str | None, excluded: tuple[str, ...]) -> bool:
    return value is not None and value.casefold() in {e.casefold() for e in excluded}


# Each exclusion policy with the file it comes from (`Settings.exclusion_policies`).
Policies = Sequence[tuple[str, ExcludeSessions]]


def decide(
    session: SessionFile, policy: ExcludeSessions | Policies, *, tombstoned: bool
) -> Decision:
    """Tombstones first (a forgotten session never comes back, whatever the policy says),
    then internal kinds, then the operator's exclusions: dreaming.toml's, then
    openclaw.json's (memory-core's `memoryPolicy`), each in the order the config lists
    them. A session either excludes is excluded; the reason names the file."""
    if tombstoned:
        return Decision(Status.FORGOTTEN, "forgotten")
    if session.kind in INTERNAL_KINDS:
        return Decision(Status.INTERNAL, f"internal:{session.kind.value}")
    policies = [(CONFIG_FILENAME, policy)] if isinstance(policy, ExcludeSessions) else policy
    for origin, each in policies:
        excluded = _excluded_by(session, each)
        if excluded is not None:
            return Decision(Status.EXCLUDED, f"policy:{excluded} ({origin})")
    if session.classified_by is None:
        return Decision(Status.ADMITTED, UNCLASSIFIED)
    return Decision(Status.ADMITTED)


def _excluded_by(session: SessionFile, policy: ExcludeSessions) -> str | None:
    """`<field>=<value>` of the first exclusion of `policy` the session matches."""
    if _matches(session.external_source, policy.hook_external_content_sources):
        return f"hookExternalContentSources={session.external_source}"
    if _matches(session.channel, policy.channels):
        return f"channels={session.channel}"
    if _matches(session.chat_type, policy.chat_types):
        return f"chatTypes={session.chat_type}"
    return None


GROUP_CHATS = frozenset({"group", "channel", "supergroup", "room"})


def origin_class(session: SessionFile, message: Message) -> OriginClass:
    """Who a line speaks for. External content and other people's words are untrusted:
    they can be remembered as evidence but never promoted as the owner's facts."""
    if message.role is Role.ASSISTANT:
        return OriginClass.AGENT
    if message.role is Role.SYSTEM:
        return OriginClass.SYSTEM
    return speaker_class(session)


def speaker_class(session: SessionFile) -> OriginClass:
    """Whose words a session's user lines are. Unknown is untrusted, never the owner."""
    if session.classified_by is None:
        return OriginClass.UNTRUSTED
    if session.external_source is not None:
        return OriginClass.UNTRUSTED
    if (
        session.chat_type is not None
        and session.chat_type.casefold() in GROUP_CHATS
        and not session.vouched
    ):
        return OriginClass.UNTRUSTED
    return OriginClass.OWNER


def admit(
    session: SessionFile,
    record: Mapping[str, Any] | None,
    settings: Settings,
    *,
    tombstoned: bool,
    scan: bool = True,
    facts_of: Callable[[Path], ChatFacts | None] = chat_facts,
) -> tuple[SessionFile, Decision, str | None]:
    """One session's admission tonight: classified, decided, and what its user lines are
    derived as. The light phase applies it; `verify` checks what was derived against it."""
    session = classify(session, record, settings.admission, scan=scan, facts_of=facts_of)
    if _listed(session, settings.admission) and not session.vouched:
        session = dataclasses.replace(session, vouched=True)
    decision = decide(session, settings.exclusion_policies(), tombstoned=tombstoned)
    return session, decision, trust_of(session, decision)


def trust_of(session: SessionFile, decision: Decision) -> str | None:
    """What a night derives a session's user lines as: the owner's, untrusted, or nothing
    (not admitted). A change between nights means what was derived must be derived again."""
    return speaker_class(session).value if decision.admitted else None
