"""What an LLM call leaves behind: one CallRecord per HTTP attempt, one Completion per call."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Generic, TypeVar

from pydantic import BaseModel

from dreaming.llm._profile import StructuredMode

ReplyT = TypeVar("ReplyT", bound=BaseModel)


class CallOutcome(StrEnum):
    OK = "ok"
    RETRIED = "retried"  # failed, and another attempt followed
    FAILED = "failed"  # failed for good (last attempt, or not worth retrying)
    INVALID = "invalid"  # the server answered but the reply did not validate
    OVER_BUDGET = "over_budget"  # refused before sending: it could exceed the budget
    # Never reached a server (connection refused, DNS, TLS, no free connection): nothing
    # was sent, so nothing is charged, and it does not count as a call either.
    UNREACHABLE = "unreachable"

    @property
    def charged(self) -> bool:
        """Whether the attempt was sent, so counts as a call and costs what it used."""
        return self not in _UNCHARGED


_UNCHARGED = frozenset({CallOutcome.OVER_BUDGET, CallOutcome.UNREACHABLE})
# The stored outcome values of attempts that cost nothing (for SQL filters).
UNCHARGED_OUTCOMES: tuple[str, ...] = tuple(sorted(o.value for o in _UNCHARGED))


@dataclass(frozen=True)
class CallRecord:
    """One HTTP attempt (or one attempt the budget refused), as the call log stores it.

    `request` is the rendered chat messages as JSON text; it contains transcript text, so the
    log that stores it is within reach of purges. When the server reported no usage the
    tokens are the estimate that was charged, and `usage_estimated` says so.
    """

    model: str
    mode: StructuredMode
    attempt: int
    outcome: CallOutcome
    request: str
    response: str | None
    input_tokens: int
    output_tokens: int
    usage_estimated: bool
    cost_usd: float | None
    duration_s: float
    started_at: datetime
    http_status: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Completion(Generic[ReplyT]):
    """A validated structured reply and what getting it took.

    Tokens and cost are totals over every attempt of the call; `calls` has the details.
    """

    parsed: ReplyT
    raw_text: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    attempts: int
    duration_s: float
    model: str
    mode: StructuredMode
    calls: list[CallRecord]


def calls_of(exc: BaseException) -> list[CallRecord]:
    """The CallRecords attached to an error raised by `LLMClient.complete_json` (else [])."""
    calls = getattr(exc, "calls", None)
    return list(calls) if isinstance(calls, list) else []


def raw_text_of(exc: BaseException) -> str | None:
    """The reply text attached to an InvalidReplyError, if any."""
    raw = getattr(exc, "raw_text", None)
    return raw if isinstance(raw, str) else None
