"""All retry policy in one place: what is worth retrying, how long to wait, when to stop.

Failures from the `openai` package are mapped onto dreaming's hierarchy here: rate limits,
timeouts, connection errors and 5xx become TransientError (retried); other 4xx become
LLMRequestError (never retried); a server that cannot do json_schema is recognised so the
client can fall back to json_object.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import httpx2
import openai
import tenacity

from dreaming.errors import InvalidReplyError, LLMError, LLMRequestError, TransientError
from dreaming.llm._profile import LLMProfile, StructuredMode

_log = logging.getLogger("dreaming.llm")

# llama.cpp-style servers validate response_format with pydantic and answer
# "Input should be 'text' or 'json_object'"; others say json_schema is unsupported.
_SCHEMA_UNSUPPORTED = re.compile(
    r"'text' or 'json_object'"
    r"|json_schema.{0,80}\b(not supported|unsupported|not implemented|unknown|not one of"
    r"|not allowed|invalid type)"
    r"|\b(not supported|unsupported|unknown)\b[^.]{0,80}json_schema",
    re.IGNORECASE | re.DOTALL,
)
_SCHEMA_REJECTION_STATUSES = frozenset({400, 422, 500})
# 408 is the server saying it timed out; the rest of 4xx will fail the same way again.
_TRANSIENT_4XX = frozenset({408, 429})
# Transport failures raised before a request leaves this machine: no connection was made
# (refused, DNS, TLS handshake, proxy), or none could be had in time.
_NOT_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout, httpx2.ProxyError)
# A 429 that means "no money left" is not worth waiting for.
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})


@dataclass(frozen=True)
class RetryPolicy:
    """When and how often a failed attempt is retried.

    Waits honour the server's Retry-After when it gives one, else back off exponentially
    with jitter. The loop stops after `max_attempts`, or before a wait that would carry it
    past `deadline_s` since the first attempt.
    """

    max_attempts: int = 4
    deadline_s: float = 120.0
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    jitter_s: float = 1.0
    transient_exceptions: tuple[type[BaseException], ...] = field(default=(TransientError,))

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.deadline_s <= 0:
            raise ValueError(f"deadline_s must be positive, got {self.deadline_s}")
        if self.initial_backoff_s < 0 or self.jitter_s < 0:
            raise ValueError("backoff and jitter must not be negative")
        if self.max_backoff_s < self.initial_backoff_s:
            raise ValueError(
                f"max_backoff_s ({self.max_backoff_s}) is below initial_backoff_s "
                f"({self.initial_backoff_s})"
            )

    @classmethod
    def from_profile(cls, profile: LLMProfile, **overrides: Any) -> RetryPolicy:
        settings: dict[str, Any] = {
            "max_attempts": profile.max_attempts,
            "deadline_s": profile.deadline_s,
        }
        settings.update(overrides)
        return cls(**settings)

    def wait_s(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, TransientError) and exc.retry_after is not None:
            return max(0.0, exc.retry_after)
        backoff = tenacity.wait_exponential_jitter(
            multiplier=self.initial_backoff_s, max=self.max_backoff_s, jitter=self.jitter_s
        )
        return float(backoff(retry_state))

    def retrying(
        self,
        *,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        started: float,
        label: str,
    ) -> tenacity.Retrying:
        """A tenacity loop for one call; `clock` and `sleep` are injectable for tests."""

        def stop(retry_state: tenacity.RetryCallState) -> bool:
            if retry_state.attempt_number >= self.max_attempts:
                return True
            return clock() - started + retry_state.upcoming_sleep >= self.deadline_s

        def before_sleep(retry_state: tenacity.RetryCallState) -> None:
            outcome = retry_state.outcome
            _log.info(
                "%s: attempt %d failed (%s); retrying in %.2fs",
                label,
                retry_state.attempt_number,
                outcome.exception() if outcome is not None else "?",
                retry_state.upcoming_sleep,
            )

        return tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(self.transient_exceptions),
            wait=self.wait_s,
            stop=stop,
            sleep=sleep,
            before_sleep=before_sleep,
            reraise=True,
        )

    def remaining_s(self, clock: Callable[[], float], started: float) -> float:
        return self.deadline_s - (clock() - started)


def retry_after_s(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, `Retry-After` seconds or date).

    `now` is the wall clock (epoch seconds), needed for the HTTP-date form.
    """
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            value = float(millis) / 1000
        except ValueError:
            pass
        else:
            if math.isfinite(value):
                return max(0.0, value)
    text = headers.get("retry-after")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - now)
    return max(0.0, value) if math.isfinite(value) else None


@dataclass(frozen=True)
class Failure:
    """One failed attempt, classified: the error to raise and what the server said."""

    error: LLMError
    status: int | None = None
    body: str | None = None
    schema_unsupported: bool = False
    # False when the request never left this machine (refused, DNS, TLS, no connection
    # slot): nothing was sent, so nothing is charged.
    reached_server: bool = True

    @property
    def transient(self) -> bool:
        return isinstance(self.error, TransientError)


def classify(
    exc: openai.OpenAIError,
    profile: LLMProfile,
    mode: StructuredMode,
    *,
    timeout_s: float,
    now: float,
) -> Failure:
    """Map an exception from the `openai` package onto dreaming's error hierarchy."""
    where = f"model {profile.model!r} at {profile.base_url} (profile {profile.name!r})"
    if isinstance(exc, openai.APIConnectionError):  # timeouts included: a subclass
        return _transport_failure(exc, profile, where, timeout_s)
    if isinstance(exc, openai.APIResponseValidationError):
        return Failure(
            InvalidReplyError(f"{where}: the server sent a malformed response: {exc.message}"),
            status=exc.status_code,
        )
    if not isinstance(exc, openai.APIStatusError):
        return Failure(LLMRequestError(f"{where}: {exc}"))
    return _status_failure(exc, profile, mode, where, now)


def _transport_failure(
    exc: openai.APIConnectionError, profile: LLMProfile, where: str, timeout_s: float
) -> Failure:
    """No HTTP answer: a timeout or a failed connection, sent or not (the httpx2 cause says)."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, openai.APITimeoutError):
        if isinstance(cause, _NOT_SENT):
            return Failure(
                TransientError(
                    f"cannot reach {profile.base_url}: no connection within"
                    f" {timeout_s:g}s ({type(cause).__name__})"
                ),
                reached_server=False,
            )
        return Failure(TransientError(f"{where}: no answer within {timeout_s:g}s"))
    detail = f"{exc.message} ({cause})" if cause else exc.message
    return Failure(
        TransientError(f"cannot reach {profile.base_url}: {detail}"),
        reached_server=not isinstance(cause, _NOT_SENT),
    )


def _status_failure(
    exc: openai.APIStatusError, profile: LLMProfile, mode: StructuredMode, where: str, now: float
) -> Failure:
    """An HTTP error status: a json_schema rejection (fall back), or what the status means."""
    status = exc.status_code
    body = _body_text(exc)
    message = _server_message(exc) or body or "(no message)"
    if (
        mode == "json_schema"
        and status in _SCHEMA_REJECTION_STATUSES
        and _SCHEMA_UNSUPPORTED.search(body or message)
    ):
        return Failure(
            LLMRequestError(
                f"{where}: the server does not support json_schema structured output "
                f'({message}); set structured_output = "json_object" or "auto"',
                status,
            ),
            status=status,
            body=body,
            schema_unsupported=True,
        )
    return Failure(_status_error(exc, profile, where, message, now), status=status, body=body)


def _status_error(
    exc: openai.APIStatusError, profile: LLMProfile, where: str, message: str, now: float
) -> LLMError:
    """The error an HTTP status stands for: transient ones are retried, the rest are not."""
    status = exc.status_code
    if status in (401, 403):
        return _access_error(profile, status, message)
    if status == 404:
        return LLMRequestError(
            f"{where}: not found (HTTP 404: {message}); check base_url and model", status
        )
    if status == 429 and _error_code(exc) in _QUOTA_CODES:
        return LLMRequestError(f"{where}: out of quota (HTTP 429: {message})", status)
    if status in _TRANSIENT_4XX or status >= 500:
        return TransientError(
            f"{where}: HTTP {status}: {message}",
            retry_after=retry_after_s(exc.response.headers, now),
        )
    return LLMRequestError(
        f"{where}: the server refused the request (HTTP {status}: {message})", status
    )


def _access_error(profile: LLMProfile, status: int, message: str) -> LLMRequestError:
    """A 401 (no key, or a wrong one) or a 403 (the key may not use this model): the error
    names the setting to fix."""
    if status == 401:
        if profile.api_key_env:
            text = (
                f"the server rejected the API key: set {profile.api_key_env} "
                f"(profile {profile.name!r}) [HTTP 401: {message}]"
            )
        else:
            text = (
                f"the server at {profile.base_url} requires an API key: set api_key_env in "
                f"profile {profile.name!r} to the environment variable that holds it "
                f"[HTTP 401: {message}]"
            )
        return LLMRequestError(text, status)
    env = profile.api_key_env or "api_key_env"
    return LLMRequestError(
        f"the server refused access to model {profile.model!r}: check the key in "
        f"{env} (profile {profile.name!r}) [HTTP 403: {message}]",
        status,
    )


def _body_text(exc: openai.APIStatusError) -> str | None:
    try:
        return exc.response.text
    except httpx2.StreamError:  # a closed or streamed response has no text to show
        return None


def _server_message(exc: openai.APIStatusError) -> str | None:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body:
        return body
    return None


def _error_code(exc: openai.APIStatusError) -> str | None:
    body = exc.body
    if isinstance(body, dict):
        for key in ("code", "type"):
            value = body.get(key)
            if isinstance(value, str) and value in _QUOTA_CODES:
                return value
    return exc.code
