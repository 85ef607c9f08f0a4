"""What may enter the corpus: tombstones, internal session kinds, and the exclusion policy.

Admission is decided per session before any of its lines is read; a session that is not
admitted is recorded with its reason and never read into the corpus.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dreaming.config import ExcludeSessions
from dreaming.messages import INTERNAL_KINDS, Message, Role, SessionFile


class Status(StrEnum):
    ADMITTED = "admitted"
    EXCLUDED = "excluded"
    INTERNAL = "internal"
    FORGOTTEN = "forgotten"


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


def decide(session: SessionFile, policy: ExcludeSessions, *, tombstoned: bool) -> Decision:
    """Tombstones first (a forgotten session never comes back, whatever the policy says),
    then internal kinds, then the operator's exclusions in the order the config lists them."""
    if tombstoned:
        return Decision(Status.FORGOTTEN, "forgotten")
    if session.kind in INTERNAL_KINDS:
        return Decision(Status.INTERNAL, f"internal:{session.kind.value}")
    if _matches(session.external_source, policy.hook_external_content_sources):
        return Decision(
            Status.EXCLUDED, f"policy:hookExternalContentSources={session.external_source}"
        )
    if _matches(session.channel, policy.channels):
        return Decision(Status.EXCLUDED, f"policy:channels={session.channel}")
    if _matches(session.chat_type, policy.chat_types):
        return Decision(Status.EXCLUDED, f"policy:chatTypes={session.chat_type}")
    return Decision(Status.ADMITTED)


_GROUP_CHATS = frozenset({"group", "channel", "supergroup", "room"})


def origin_class(session: SessionFile, message: Message) -> OriginClass:
    """Who a line speaks for. External content and other people's words are untrusted:
    they can be remembered as evidence but never promoted as the owner's facts."""
    if message.role is Role.ASSISTANT:
        return OriginClass.AGENT
    if message.role is Role.SYSTEM:
        return OriginClass.SYSTEM
    if session.external_source is not None:
        return OriginClass.UNTRUSTED
    if session.chat_type is not None and session.chat_type.casefold() in _GROUP_CHATS:
        return OriginClass.UNTRUSTED
    return OriginClass.OWNER
