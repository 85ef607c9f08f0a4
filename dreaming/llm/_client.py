"""LLMClient: one structured-output call to an OpenAI-compatible server.

A call is a tenacity loop of attempts (policy in `_retry.py`). Each attempt checks the
budget, waits for the fleet's rate limit if there is one, sends one request through the
`openai` package (its own retries off), charges what the server reports, and leaves a
CallRecord. An attempt that passed the budget check is charged exactly once whatever
happens next (or, if nothing was sent, its reservation is released). A server that cannot
do json_schema is answered by an immediate json_object re-send within the same attempt, and
remembered.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic

import httpx2
import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from dreaming.errors import (
    BudgetExceededError,
    EndpointDownError,
    LLMConfigError,
    LLMError,
    TransientError,
)
from dreaming.llm._pricing import (
    Usage,
    charged_usage,
    cost_usd,
    estimate_prompt_tokens,
    prompt_token_bound,
)
from dreaming.llm._profile import LLMProfile, StructuredMode
from dreaming.llm._records import CallOutcome, CallRecord, Completion, ReplyT
from dreaming.llm._reply import Reply, invalid_reply, parse_reply, reply_of, usage_of
from dreaming.llm._retry import RetryPolicy, classify
from dreaming.llm._schema import response_format, strict_schema, system_prompt
from dreaming.llm.budget import Budget

if TYPE_CHECKING:
    from dreaming.llm._breaker import CircuitBreaker
    from dreaming.llm.ledger import RateLimiter

_log = logging.getLogger("dreaming.llm")

# Sent when the profile says the server needs no key; the `openai` package insists on one.
_NO_KEY = "sk-no-key-required"
_SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Never send a request with less time than this left before the deadline.
_MIN_TIMEOUT_S = 0.05


class _SchemaUnsupportedError(Exception):
    """Internal: the server rejected json_schema; re-send as json_object."""


class LLMClient:
    """Structured-output calls to one OpenAI-compatible endpoint, as an LLMProfile describes.

    Raises LLMConfigError at construction when the profile names a key variable that `env`
    does not set. `clock`/`sleep`/`wall_clock` are injectable so tests never wait. A
    `rate_limiter` (fleet mode) is acquired right before every request. A `breaker` shared
    by a run's clients stops calls to an endpoint whose failure retries did not cure.
    """

    def __init__(
        self,
        profile: LLMProfile,
        *,
        env: Mapping[str, str] = os.environ,
        http_client: httpx2.Client | None = None,
        retry_policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        wall_clock: Callable[[], float] = time.time,
        rate_limiter: RateLimiter | None = None,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.profile = profile
        self.rate_limiter = rate_limiter
        self.breaker = breaker
        self.retry_policy = retry_policy or RetryPolicy.from_profile(profile)
        self._clock = clock
        self._sleep = sleep
        self._wall_clock = wall_clock
        self._learned_mode: StructuredMode | None = None
        self._openai = openai.OpenAI(
            api_key=_api_key(profile, env),
            base_url=profile.base_url,
            timeout=profile.timeout_s,
            max_retries=0,  # retries are ours: budgeted, logged, recorded
            default_headers=dict(profile.extra_headers) or None,
            http_client=http_client,
        )

    @property
    def structured_mode(self) -> StructuredMode:
        """The structured-output mode the next call starts with."""
        setting = self.profile.structured_output
        if setting != "auto":
            return setting
        return self._learned_mode or "json_schema"

    def complete_json(
        self,
        system: str,
        user: str,
        schema: Mapping[str, Any],
        schema_name: str,
        reply_model: type[ReplyT],
        *,
        max_output_tokens: int | None = None,
        budget: Budget | None = None,
    ) -> Completion[ReplyT]:
        """Ask for one JSON object matching `schema`, validated with `reply_model`.

        Raises BudgetExceededError (the call was not made), EndpointDownError (the breaker
        is open: not made either), LLMConfigError, LLMRequestError (not retried),
        TransientError (retries exhausted; opens the breaker) or InvalidReplyError (not
        retried: the caller may re-ask with the error shown). Every error carries the
        attempts' CallRecords as `.calls` (read them with `calls_of`).
        """
        if not _SCHEMA_NAME.match(schema_name):
            raise ValueError(f"schema_name must match {_SCHEMA_NAME.pattern}, got {schema_name!r}")
        if self.breaker is not None:
            try:
                self.breaker.check(self.profile.base_url)
            except EndpointDownError as exc:
                _attach_calls(exc, [])
                raise
        call = _Call(
            self,
            system=system,
            user=user,
            schema=strict_schema(schema),
            schema_name=schema_name,
            reply_model=reply_model,
            max_output_tokens=max_output_tokens or self.profile.max_output_tokens,
            budget=budget,
        )
        return call.run()

    def close(self) -> None:
        self._openai.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _api_key(profile: LLMProfile, env: Mapping[str, str]) -> str:
    if not profile.api_key_env:
        return _NO_KEY
    key = env.get(profile.api_key_env, "").strip()
    if not key:
        raise LLMConfigError(
            f"no API key for model {profile.model!r} (profile {profile.name!r}): set the "
            f'{profile.api_key_env} environment variable, or set api_key_env = "" for a '
            "local server that needs no key"
        )
    return key


class _Call(Generic[ReplyT]):
    """The attempts of one `complete_json` call and the records they leave."""

    def __init__(
        self,
        client: LLMClient,
        *,
        system: str,
        user: str,
        schema: dict[str, Any],
        schema_name: str,
        reply_model: type[ReplyT],
        max_output_tokens: int,
        budget: Budget | None,
    ) -> None:
        self.client = client
        self.profile = client.profile
        self.system = system
        self.user = user
        self.schema = schema
        self.schema_name = schema_name
        self.reply_model = reply_model
        self.max_output_tokens = max_output_tokens
        self.budget = budget
        self.records: list[CallRecord] = []
        self.attempt = 0
        self._owing = False  # a budget check passed and is not yet charged or released
        self._sent = False  # the attempt's request was handed to the HTTP client
        self.started = client._clock()
        self.label = f"llm {self.profile.name}/{self.profile.model}"

    def run(self) -> Completion[ReplyT]:
        if self.budget is not None:
            # Fails on an unpriced model under a USD-only budget before anything is sent.
            self.budget.worst_case(0, self.max_output_tokens, self.profile)
        retrying = self.client.retry_policy.retrying(
            clock=self.client._clock,
            sleep=self.client._sleep,
            started=self.started,
            label=self.label,
        )
        try:
            parsed, raw_text, mode, model = retrying(self._attempt)
        except TransientError as exc:
            self._mark_last_failed()
            error = TransientError(
                f"{exc} (gave up after {self.attempt} attempt(s) in "
                f"{self.client._clock() - self.started:.1f}s)",
                retry_after=exc.retry_after,
            )
            _attach_calls(error, self.records)
            if self.client.breaker is not None:
                self.client.breaker.trip(self.profile.base_url, str(exc))
            raise error from exc
        except (LLMError, BudgetExceededError) as exc:
            self._mark_last_failed()
            _attach_calls(exc, self.records)
            raise
        return Completion(
            parsed=parsed,
            raw_text=raw_text,
            input_tokens=sum(r.input_tokens for r in self.records),
            output_tokens=sum(r.output_tokens for r in self.records),
            cost_usd=self._total_cost(),
            attempts=self.attempt,
            duration_s=self.client._clock() - self.started,
            model=model,
            mode=mode,
            calls=list(self.records),
        )

    def _attempt(self) -> tuple[ReplyT, str, StructuredMode, str]:
        self.attempt += 1
        try:
            return self._send(self.client.structured_mode)
        except _SchemaUnsupportedError:
            self.client._learned_mode = "json_object"
            _log.warning(
                "%s: the server does not support json_schema; using json_object with the "
                "schema in the prompt from now on",
                self.label,
            )
            return self._send("json_object")

    def _send(self, mode: StructuredMode) -> tuple[ReplyT, str, StructuredMode, str]:
        """One request in `mode`, in four steps: reserve, request, account, parse."""
        request = self._request_in(mode)
        # The request slot first: a call waiting for the rate limit must not hold a fleet
        # budget reservation meanwhile (others would be refused for money nobody spends).
        # The price: a call the budget then refuses has used a slot it did not send.
        self._wait_for_rate_limit()
        self._reserve(request)
        # The check passed: from here the attempt owes the budget exactly one charge (one
        # release if nothing was sent). The request and account steps pay it on every
        # expected path; the handler below covers the unexpected ones, so a fleet
        # reservation is never left dangling and no sent request goes uncounted.
        self._owing = self.budget is not None
        self._sent = False
        try:
            answer = self._request(request)
            usage = self._account(request, answer)
        except BaseException:
            if self._owing:
                if self._sent:
                    self._charge(request.estimate, 0)
                else:
                    self._release()
            raise
        return self._parse(request, answer, usage)

    def _request_in(self, mode: StructuredMode) -> _Request:
        system = system_prompt(self.system, self.schema, mode)
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": system},
            {"role": "user", "content": self.user},
        ]
        plain = [{"role": "system", "content": system}, {"role": "user", "content": self.user}]
        schema = self.schema if mode == "json_schema" else None
        return _Request(
            mode=mode,
            messages=messages,
            text=json.dumps(plain, ensure_ascii=False),
            estimate=estimate_prompt_tokens(plain, schema),
            bound=prompt_token_bound(plain, schema),
            started_at=datetime.fromtimestamp(self.client._wall_clock(), UTC),
        )

    def _reserve(self, request: _Request) -> None:
        """Check the budget for this attempt's worst case (reserving it in a fleet ledger);
        a refusal is recorded and raised as BudgetExceededError."""
        if self.budget is None:
            return
        profile = self.profile
        worst_usd, worst_tokens = self.budget.worst_case(
            request.estimate, self.max_output_tokens, profile
        )
        # A shared ledger reserves a hard bound rather than the estimate: what one worker
        # settles above its reservation, another may already have spent.
        bound = (
            cost_usd(profile, request.bound, self.max_output_tokens),
            request.bound + self.max_output_tokens,
        )
        try:
            self.budget.check(worst_usd, worst_tokens, bound=bound)
        except BudgetExceededError as exc:
            self._record(request, CallOutcome.OVER_BUDGET, 0.0, error=str(exc))
            raise

    def _request(self, request: _Request) -> _Answer:
        """Send the request; a failure is accounted for and recorded, then raised."""
        profile = self.profile
        remaining = self.client.retry_policy.remaining_s(self.client._clock, self.started)
        timeout = max(_MIN_TIMEOUT_S, min(profile.timeout_s, remaining))
        limit = self.max_output_tokens
        t0 = self.client._clock()
        self._sent = True
        try:
            completion = self.client._openai.chat.completions.create(
                model=profile.model,
                messages=request.messages,
                temperature=profile.temperature,
                response_format=response_format(self.schema_name, self.schema, request.mode),
                max_tokens=limit if profile.max_tokens_param == "max_tokens" else openai.omit,
                max_completion_tokens=(
                    limit if profile.max_tokens_param == "max_completion_tokens" else openai.omit
                ),
                timeout=timeout,
            )
        except openai.OpenAIError as exc:
            duration = self.client._clock() - t0
            raise self._account_failure(request, exc, timeout, duration) from exc
        except json.JSONDecodeError as exc:  # a 200 whose body is not JSON at all
            duration = self.client._clock() - t0
            raise self._account_not_json(request, exc, duration) from exc
        duration = self.client._clock() - t0
        # The `openai` package does not validate responses: read them defensively, so an
        # odd server (null usage, no message) gives an invalid reply, not a crash.
        return _Answer(completion, reply_of(completion), duration)

    def _account_failure(
        self, request: _Request, exc: openai.OpenAIError, timeout: float, duration: float
    ) -> Exception:
        """Charge (or release) and record a request that got no answer or an error status;
        returns what to raise: the classified error, or the signal to fall back."""
        profile = self.profile
        failure = classify(
            exc, profile, request.mode, timeout_s=timeout, now=self.client._wall_clock()
        )
        fall_back = failure.schema_unsupported and profile.structured_output == "auto"
        charged_in, charged_out = request.estimate, 0
        if not failure.reached_server:  # never sent: nothing to pay, not a call
            self._sent = False
            charged_in = 0
            self._release()
            outcome = CallOutcome.UNREACHABLE
        else:
            if failure.status is None:
                # Sent, then no answer (a timeout, a dropped connection): the server may
                # have done all the work, so it costs its hard bound.
                charged_in = request.bound
                charged_out = self.max_output_tokens
            self._charge(charged_in, charged_out)
            outcome = CallOutcome.RETRIED if failure.transient or fall_back else CallOutcome.FAILED
        self._record(
            request,
            outcome,
            duration,
            input_tokens=charged_in,
            output_tokens=charged_out,
            usage_estimated=failure.reached_server,
            response=failure.body,
            http_status=failure.status,
            error=(
                "json_schema is not supported here; re-sending as json_object"
                if fall_back
                else str(failure.error)
            ),
        )
        return _SchemaUnsupportedError() if fall_back else failure.error

    def _account_not_json(
        self, request: _Request, exc: json.JSONDecodeError, duration: float
    ) -> Exception:
        """Charge and record a 200 whose body is not JSON; returns the error to raise."""
        error = invalid_reply(f"the server's response is not JSON: {exc}", exc.doc)
        self._charge(request.estimate, 0)
        self._record(
            request,
            CallOutcome.INVALID,
            duration,
            input_tokens=request.estimate,
            usage_estimated=True,
            response=exc.doc,
            http_status=200,
            error=str(error),
        )
        return error

    def _account(self, request: _Request, answer: _Answer) -> Usage:
        """Charge an answered request what the server reported, within the request's bounds."""
        usage = charged_usage(
            usage_of(answer.completion),
            prompt_estimate=request.estimate,
            prompt_bound=request.bound,
            reply_text=answer.text,
            max_output_tokens=self.max_output_tokens,
        )
        if usage.note:
            _log.warning("%s: %s", self.profile.name, usage.note)
        self._charge(usage.input_tokens, usage.output_tokens)
        return usage

    def _parse(
        self, request: _Request, answer: _Answer, usage: Usage
    ) -> tuple[ReplyT, str, StructuredMode, str]:
        """Validate the reply and record the attempt, as OK or as INVALID (raised)."""
        reply = answer.reply
        try:
            if reply is None:
                raise invalid_reply(
                    "the server's response is not a chat completion (no choices)", None
                )
            if reply.refusal:
                raise invalid_reply(f"the model declined to answer: {reply.refusal}", reply.text)
            parsed = parse_reply(
                reply.text,
                self.reply_model,
                schema_name=self.schema_name,
                finish_reason=reply.finish_reason,
                max_output_tokens=self.max_output_tokens,
            )
        except LLMError as exc:
            self._record_answer(request, answer, usage, CallOutcome.INVALID, str(exc))
            raise
        self._record_answer(request, answer, usage, CallOutcome.OK)
        model = getattr(answer.completion, "model", None)
        return (
            parsed,
            answer.text or "",
            request.mode,
            model if isinstance(model, str) and model else self.profile.model,
        )

    def _record_answer(
        self,
        request: _Request,
        answer: _Answer,
        usage: Usage,
        outcome: CallOutcome,
        error: str | None = None,
    ) -> None:
        notes = "; ".join(n for n in (error, usage.note) if n)
        self._record(
            request,
            outcome,
            answer.duration_s,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            usage_estimated=usage.estimated,
            response=answer.text,
            http_status=200,
            error=notes or None,
        )

    def _wait_for_rate_limit(self) -> None:
        """Take a request slot of the fleet's rate limit, waiting no longer than the call's
        deadline allows (TransientError otherwise: the retry policy decides what next)."""
        limiter = self.client.rate_limiter
        if limiter is None:
            return
        remaining = self.client.retry_policy.remaining_s(self.client._clock, self.started)
        limiter.acquire(max_wait_s=max(0.0, remaining - _MIN_TIMEOUT_S))

    def _charge(self, input_tokens: int, output_tokens: int) -> None:
        self._owing = False
        if self.budget is not None:
            usd = cost_usd(self.profile, input_tokens, output_tokens)
            self.budget.charge(usd, input_tokens + output_tokens)

    def _release(self) -> None:
        self._owing = False
        if self.budget is not None:
            self.budget.release()

    def _record(
        self,
        request: _Request,
        outcome: CallOutcome,
        duration_s: float,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        usage_estimated: bool = False,
        response: str | None = None,
        http_status: int | None = None,
        error: str | None = None,
    ) -> None:
        record = CallRecord(
            model=self.profile.model,
            mode=request.mode,
            attempt=self.attempt,
            outcome=outcome,
            request=request.text,
            response=response,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            usage_estimated=usage_estimated,
            cost_usd=cost_usd(self.profile, input_tokens, output_tokens),
            duration_s=duration_s,
            started_at=request.started_at,
            http_status=http_status,
            error=error,
        )
        self.records.append(record)
        # Every attempt is in the call log, and the run's summary says what failed: stderr
        # gets them with -v only (a failing model would print one line per batch).
        _log.log(
            logging.INFO,
            "%s attempt %d (%s): %s in %.2fs, %d+%d tokens%s%s",
            self.label,
            self.attempt,
            request.mode,
            outcome.value,
            duration_s,
            input_tokens,
            output_tokens,
            ": " if error else "",
            error or "",
        )

    def _mark_last_failed(self) -> None:
        if self.records and self.records[-1].outcome is CallOutcome.RETRIED:
            self.records[-1] = replace(self.records[-1], outcome=CallOutcome.FAILED)

    def _total_cost(self) -> float | None:
        if not self.profile.has_price:
            return None
        return sum(r.cost_usd for r in self.records if r.cost_usd is not None)


@dataclass(frozen=True)
class _Request:
    """One attempt's request in one structured-output mode: its messages (and as the call
    log stores them), its prompt tokens (estimate and hard bound), and when it began."""

    mode: StructuredMode
    messages: list[ChatCompletionMessageParam]
    text: str
    estimate: int
    bound: int
    started_at: datetime


@dataclass(frozen=True)
class _Answer:
    """A request the server answered: the completion, its reply read defensively, how long
    it took."""

    completion: ChatCompletion
    reply: Reply | None
    duration_s: float

    @property
    def text(self) -> str | None:
        return self.reply.text if self.reply is not None else None


def _attach_calls(exc: BaseException, records: list[CallRecord]) -> None:
    # errors.py does not declare `calls`; read it with dreaming.llm.calls_of().
    setattr(exc, "calls", list(records))  # noqa: B010
