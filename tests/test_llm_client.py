"""LLMClient against the loopback fake OpenAI server, over real HTTP (no patching)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from email.utils import formatdate
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

import dreaming.llm
from dreaming.errors import (
    EndpointDownError,
    InvalidReplyError,
    LLMConfigError,
    LLMRequestError,
    TransientError,
)
from dreaming.llm import (
    Budget,
    CallOutcome,
    CircuitBreaker,
    LLMClient,
    LLMProfile,
    RetryPolicy,
    calls_of,
    raw_text_of,
    retry_after_s,
    strict_schema,
)
from tests.fake_openai import (
    DEFAULT_KEY,
    DEFAULT_MODEL,
    Delay,
    Disconnect,
    ErrorReply,
    FakeOpenAI,
    Reply,
    closed_port_url,
    running_fake_openai,
)

KEY_ENV = "TEST_LLM_KEY"


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Literal["add", "skip"]
    reason: str
    confidence: float | None = None


SCHEMA = Verdict.model_json_schema()
GOOD = {"action": "add", "reason": "stated twice", "confidence": 0.9}


class FakeTime:
    """A monotonic clock that only moves when the client sleeps; records every sleep."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    yield from running_fake_openai()


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


def make_client(
    base_url: str,
    fake_time: FakeTime,
    *,
    env: dict[str, str] | None = None,
    **profile: Any,
) -> LLMClient:
    settings: dict[str, Any] = {
        "base_url": base_url,
        "model": DEFAULT_MODEL,
        "api_key_env": KEY_ENV,
        "timeout_s": 5.0,
        **profile,
    }
    prof = LLMProfile(**settings)
    return LLMClient(
        prof,
        env={KEY_ENV: DEFAULT_KEY} if env is None else env,
        retry_policy=RetryPolicy.from_profile(prof, jitter_s=0),
        clock=fake_time.clock,
        sleep=fake_time.sleep,
    )


def ask(client: LLMClient, **kwargs: Any) -> Any:
    return client.complete_json(
        "Decide whether the candidate becomes memory.",
        '{"candidate": "c1"}',
        SCHEMA,
        "verdict",
        Verdict,
        **kwargs,
    )


def test_public_api_is_exactly_the_intended_names() -> None:
    assert sorted(dreaming.llm.__all__) == [
        "Budget",
        "BudgetSettings",
        "CallOutcome",
        "CallRecord",
        "CircuitBreaker",
        "Completion",
        "LLMClient",
        "LLMProfile",
        "Ledger",
        "RateLimiter",
        "Reservation",
        "RetryPolicy",
        "StructuredMode",
        "StructuredOutput",
        "UNCHARGED_OUTCOMES",
        "calls_of",
        "cost_usd",
        "estimate_prompt_tokens",
        "estimate_tokens",
        "raw_text_of",
        "retry_after_s",
        "strict_schema",
        "utc_today",
    ]
    for name in dreaming.llm.__all__:
        assert hasattr(dreaming.llm, name)


def test_success_reports_usage_cost_and_a_record(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(Reply(GOOD, prompt_tokens=300, completion_tokens=500))
    client = make_client(
        server.base_url, fake_time, price_input_per_mtok=2.0, price_output_per_mtok=8.0
    )

    result = ask(client)

    assert result.parsed == Verdict(**GOOD)
    assert json.loads(result.raw_text) == GOOD
    assert (result.input_tokens, result.output_tokens) == (300, 500)
    assert result.cost_usd == pytest.approx(300 * 2 / 1e6 + 500 * 8 / 1e6)
    assert result.attempts == 1
    assert result.mode == "json_schema"
    assert result.model == DEFAULT_MODEL
    [call] = result.calls
    assert call.outcome is CallOutcome.OK
    assert call.http_status == 200
    assert call.usage_estimated is False
    assert call.cost_usd == pytest.approx(result.cost_usd)
    assert json.loads(call.request)[1] == {"role": "user", "content": '{"candidate": "c1"}'}
    assert call.response == result.raw_text
    assert fake_time.sleeps == []


def test_usage_a_server_overstates_is_capped_at_what_the_request_could_use(
    server: FakeOpenAI, fake_time: FakeTime
) -> None:
    # A reply claiming a billion tokens once charged $750.
    server.enqueue(Reply(GOOD, prompt_tokens=10**9, completion_tokens=10**9))
    client = make_client(
        server.base_url, fake_time, price_input_per_mtok=2.0, price_output_per_mtok=8.0
    )
    result = ask(client)
    assert result.input_tokens < 10_000
    assert result.output_tokens < 100_000  # at most the output limit it was sent with
    assert result.cost_usd is not None and result.cost_usd < 0.1
    [call] = result.calls
    assert call.outcome is CallOutcome.OK
    assert "usage capped" in (call.error or "") and "1000000000" in (call.error or "")


def test_cost_is_none_without_a_price(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(GOOD)
    result = ask(make_client(server.base_url, fake_time))
    assert result.cost_usd is None
    assert result.calls[0].cost_usd is None
    assert result.input_tokens == server.prompt_tokens
    assert result.output_tokens == server.completion_tokens


def test_request_uses_strict_json_schema_and_profile_settings(
    server: FakeOpenAI, fake_time: FakeTime
) -> None:
    server.enqueue(GOOD)
    client = make_client(server.base_url, fake_time, temperature=0.2, max_output_tokens=300)

    ask(client)

    [request] = server.chat_requests
    body = request.json
    assert body["model"] == DEFAULT_MODEL
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 300
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": strict_schema(SCHEMA), "strict": True},
    }
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert request.headers["authorization"] == "Bearer [redacted]"
    assert DEFAULT_KEY not in json.dumps(request.headers)


def test_max_output_tokens_override_and_completion_tokens_param(
    server: FakeOpenAI, fake_time: FakeTime
) -> None:
    server.enqueue(GOOD)
    client = make_client(server.base_url, fake_time, max_tokens_param="max_completion_tokens")
    ask(client, max_output_tokens=77)
    body = server.chat_requests[0].json
    assert body["max_completion_tokens"] == 77
    assert "max_tokens" not in body


def test_extra_headers_are_sent(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(GOOD)
    ask(make_client(server.base_url, fake_time, extra_headers={"X-Team": "dreaming"}))
    assert server.chat_requests[0].headers["x-team"] == "dreaming"


def test_llama_cpp_rejection_falls_back_to_json_object_and_remembers(
    fake_time: FakeTime,
) -> None:
    with FakeOpenAI(json_schema_supported=False) as server:
        server.enqueue(GOOD, GOOD)
        client = make_client(server.base_url, fake_time)

        result = ask(client)

        assert result.parsed == Verdict(**GOOD)
        assert result.mode == "json_object"
        assert result.attempts == 1
        assert [c.outcome for c in result.calls] == [CallOutcome.RETRIED, CallOutcome.OK]
        assert [c.mode for c in result.calls] == ["json_schema", "json_object"]
        assert result.calls[0].http_status == 500
        first, second = server.chat_requests
        assert first.json["response_format"]["type"] == "json_schema"
        assert second.json["response_format"] == {"type": "json_object"}
        system = second.messages[0]["content"]
        assert system.startswith("Decide whether the candidate becomes memory.")
        assert "JSON Schema" in system
        assert json.dumps(strict_schema(SCHEMA), indent=2) in system
        assert fake_time.sleeps == []  # the fallback is immediate

        # Remembered: the next call goes straight to json_object.
        assert client.structured_mode == "json_object"
        assert ask(client).mode == "json_object"
        assert len(server.chat_requests) == 3


def test_json_schema_only_profile_fails_with_a_hint(fake_time: FakeTime) -> None:
    with FakeOpenAI(json_schema_supported=False) as server:
        client = make_client(server.base_url, fake_time, structured_output="json_schema")
        with pytest.raises(LLMRequestError, match="structured_output") as caught:
            ask(client)
        assert len(server.chat_requests) == 1
        assert [c.outcome for c in calls_of(caught.value)] == [CallOutcome.FAILED]


def test_json_object_profile_never_sends_a_schema(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(GOOD)
    result = ask(make_client(server.base_url, fake_time, structured_output="json_object"))
    assert result.mode == "json_object"
    assert server.chat_requests[0].json["response_format"] == {"type": "json_object"}


def test_reply_that_is_not_json_is_invalid_and_not_retried(
    server: FakeOpenAI, fake_time: FakeTime
) -> None:
    server.enqueue("Sure! Here is my answer: add")
    client = make_client(server.base_url, fake_time)

    with pytest.raises(InvalidReplyError, match="not valid JSON") as caught:
        ask(client)

    assert raw_text_of(caught.value) == "Sure! Here is my answer: add"
    [call] = calls_of(caught.value)
    assert call.outcome is CallOutcome.INVALID
    assert call.response == "Sure! Here is my answer: add"
    assert call.input_tokens > 0
    assert len(server.chat_requests) == 1


def test_reply_that_breaks_the_schema_is_invalid(server: FakeOpenAI, fake_time: FakeTime) -> None:
    bad = {"action": "maybe", "reason": "unsure", "confidence": None}
    server.enqueue(bad)
    with pytest.raises(InvalidReplyError, match="action") as caught:
        ask(make_client(server.base_url, fake_time))
    assert json.loads(raw_text_of(caught.value) or "") == bad
    assert "verdict" in str(caught.value)


def test_truncated_reply_says_it_was_cut_off(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue({**GOOD, "reason": "x" * 400})
    with pytest.raises(InvalidReplyError, match="cut off at max_output_tokens=20"):
        ask(make_client(server.base_url, fake_time), max_output_tokens=20)


def test_fenced_reply_is_accepted(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue("```json\n" + json.dumps(GOOD) + "\n```")
    assert ask(make_client(server.base_url, fake_time)).parsed.action == "add"


def test_refusal_is_invalid(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(Reply(None, refusal="I can't help with that."))
    with pytest.raises(InvalidReplyError, match="declined"):
        ask(make_client(server.base_url, fake_time))


def test_malformed_200_is_invalid(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(ErrorReply(200, body="<html>proxy error</html>"))
    with pytest.raises(InvalidReplyError, match="not JSON") as caught:
        ask(make_client(server.base_url, fake_time))
    assert calls_of(caught.value)[0].response == "<html>proxy error</html>"


def test_429_retry_after_seconds_is_honoured(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(ErrorReply(429, "Rate limit reached", headers={"Retry-After": "1"}), GOOD)

    result = ask(make_client(server.base_url, fake_time))

    assert fake_time.sleeps == [1.0]
    assert result.attempts == 2
    assert [c.outcome for c in result.calls] == [CallOutcome.RETRIED, CallOutcome.OK]
    assert [c.attempt for c in result.calls] == [1, 2]
    assert result.calls[0].http_status == 429


def test_retry_after_ms_and_http_date(server: FakeOpenAI, fake_time: FakeTime) -> None:
    wall = 1_700_000_000.0
    server.enqueue(
        ErrorReply(429, headers={"retry-after-ms": "250"}),
        ErrorReply(503, headers={"Retry-After": formatdate(wall + 30, usegmt=True)}),
        GOOD,
    )
    prof = LLMProfile(base_url=server.base_url, model=DEFAULT_MODEL, api_key_env=KEY_ENV)
    client = LLMClient(
        prof,
        env={KEY_ENV: DEFAULT_KEY},
        clock=fake_time.clock,
        sleep=fake_time.sleep,
        wall_clock=lambda: wall,
    )
    ask(client)
    assert fake_time.sleeps == [0.25, 30.0]


def test_retry_after_parsing() -> None:
    now = 1_700_000_000.0
    assert retry_after_s({"retry-after": "2.5"}, now) == 2.5
    assert retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}, now) == 1.5
    assert retry_after_s({"retry-after": formatdate(now + 12, usegmt=True)}, now) == 12
    assert retry_after_s({"retry-after": formatdate(now - 12, usegmt=True)}, now) == 0
    assert retry_after_s({"retry-after": "soon"}, now) is None
    assert retry_after_s({}, now) is None


def test_5xx_storm_then_success_backs_off_exponentially(
    server: FakeOpenAI, fake_time: FakeTime
) -> None:
    server.enqueue(ErrorReply(500), ErrorReply(503), ErrorReply(502), GOOD)

    result = ask(make_client(server.base_url, fake_time, max_attempts=4))

    assert result.attempts == 4
    assert fake_time.sleeps == [1.0, 2.0, 4.0]
    assert [c.http_status for c in result.calls] == [500, 503, 502, 200]


def test_storm_that_exhausts_attempts_raises_transient_with_all_records(
    server: FakeOpenAI, fake_time: FakeTime
) -> None:
    server.enqueue(*[ErrorReply(503, "overloaded")] * 3)

    with pytest.raises(TransientError, match="gave up after 3 attempt") as caught:
        ask(make_client(server.base_url, fake_time, max_attempts=3))

    calls = calls_of(caught.value)
    assert [c.outcome for c in calls] == [
        CallOutcome.RETRIED,
        CallOutcome.RETRIED,
        CallOutcome.FAILED,
    ]
    assert all(c.http_status == 503 and "overloaded" in (c.error or "") for c in calls)
    assert len(server.chat_requests) == 3
    assert len(fake_time.sleeps) == 2


def test_deadline_stops_before_a_wait_that_would_pass_it(
    server: FakeOpenAI, fake_time: FakeTime
) -> None:
    server.enqueue(ErrorReply(429, headers={"Retry-After": "300"}), GOOD)
    with pytest.raises(TransientError):
        ask(make_client(server.base_url, fake_time, deadline_s=120))
    assert fake_time.sleeps == []
    assert len(server.chat_requests) == 1


def test_timeout_is_retried(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(Delay(3.0, then=GOOD), GOOD)

    result = ask(make_client(server.base_url, fake_time, timeout_s=0.3))

    assert result.attempts == 2
    first = result.calls[0]
    assert first.outcome is CallOutcome.RETRIED
    assert first.http_status is None
    assert "no answer within 0.3s" in (first.error or "")


def test_disconnect_is_retried(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(Disconnect(), GOOD)
    assert ask(make_client(server.base_url, fake_time)).attempts == 2


def test_connection_refused_is_transient(fake_time: FakeTime) -> None:
    url = closed_port_url()
    with pytest.raises(TransientError, match="cannot reach") as caught:
        ask(make_client(url, fake_time, max_attempts=2))
    calls = calls_of(caught.value)
    assert [c.outcome for c in calls] == [CallOutcome.UNREACHABLE, CallOutcome.UNREACHABLE]
    assert all(c.http_status is None and c.input_tokens == 0 for c in calls)


def test_a_request_that_never_reached_a_server_costs_nothing(fake_time: FakeTime) -> None:
    budget = Budget(max_usd=1.0, max_calls=10)
    client = make_client(
        closed_port_url(),
        fake_time,
        max_attempts=3,
        price_input_per_mtok=1.0,
        price_output_per_mtok=1.0,
    )
    with pytest.raises(TransientError):
        ask(client, budget=budget)
    assert budget.spent_usd == 0 and budget.spent_tokens == 0 and budget.calls == 0
    assert budget.remaining_calls == 10


def test_a_timeout_after_sending_is_charged_its_hard_bound(
    server: FakeOpenAI, fake_time: FakeTime
) -> None:
    budget = Budget(max_usd=1.0)
    client = make_client(
        server.base_url,
        fake_time,
        timeout_s=0.3,
        max_attempts=1,
        max_output_tokens=100,
        price_input_per_mtok=1.0,
        price_output_per_mtok=1.0,
    )
    server.enqueue(Delay(3.0, then=GOOD))
    with pytest.raises(TransientError) as caught:
        ask(client, budget=budget)
    [call] = calls_of(caught.value)
    assert call.outcome is CallOutcome.FAILED and call.usage_estimated
    assert call.output_tokens == 100, "the output limit it was sent with"
    assert call.input_tokens >= len('{"candidate": "c1"}'), "the prompt's byte bound"
    assert budget.calls == 1
    assert budget.spent_tokens == call.input_tokens + call.output_tokens


def test_the_breaker_opens_after_retries_fail_and_later_calls_are_not_sent(
    server: FakeOpenAI, fake_time: FakeTime
) -> None:
    breaker = CircuitBreaker()
    url = closed_port_url()
    first = make_client(url, fake_time, max_attempts=2)
    first.breaker = breaker
    with pytest.raises(TransientError):
        ask(first)
    assert url in breaker.opened and "cannot reach" in breaker.opened[url]
    sleeps = len(fake_time.sleeps)
    second = make_client(url, fake_time, max_attempts=4)  # another client of the same run
    second.breaker = breaker
    with pytest.raises(EndpointDownError, match="not asked again") as caught:
        ask(second)
    assert calls_of(caught.value) == [] and len(fake_time.sleeps) == sleeps, "no retry loop"
    # Another endpoint is not affected, and a fresh run's breaker tries again.
    other = make_client(server.base_url, fake_time)
    other.breaker = breaker
    server.enqueue(GOOD)
    assert ask(other).parsed.action == "add"


def test_an_open_breaker_holds_for_its_window_then_the_endpoint_is_tried_again(
    server: FakeOpenAI, fake_time: FakeTime
) -> None:
    """A long-lived process (the scheduler, a fleet worker) shares one breaker across its
    agents' runs: within the window every later client falls back at once, after it the
    endpoint is asked again."""
    now = [1000.0]
    breaker = CircuitBreaker(window_s=600, clock=lambda: now[0])
    url = server.base_url
    server.enqueue(ErrorReply(503, "down"), ErrorReply(503, "down"))
    first = make_client(url, fake_time, max_attempts=2)
    first.breaker = breaker
    with pytest.raises(TransientError):
        ask(first)
    asked = len(server.chat_requests)
    now[0] += 599
    for _ in range(3):  # three more agents' runs within the window: nothing sent
        later = make_client(url, fake_time, max_attempts=4)
        later.breaker = breaker
        with pytest.raises(EndpointDownError, match="llm check"):
            ask(later)
    assert len(server.chat_requests) == asked
    now[0] += 2
    server.enqueue(GOOD)
    again = make_client(url, fake_time)
    again.breaker = breaker
    assert ask(again).parsed.action == "add"
    assert breaker.opened == {}


def test_errors_that_retries_do_not_address_leave_the_breaker_closed(
    server: FakeOpenAI, fake_time: FakeTime
) -> None:
    breaker = CircuitBreaker()
    client = make_client(server.base_url, fake_time)
    client.breaker = breaker
    server.enqueue(ErrorReply(400, "bad request"), "not json at all", GOOD)
    with pytest.raises(LLMRequestError):
        ask(client)
    with pytest.raises(InvalidReplyError):
        ask(client)
    assert breaker.opened == {}
    assert ask(client).parsed.action == "add"


def test_400_fails_fast(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(ErrorReply(400, "This model's maximum context length is 8192 tokens"), GOOD)
    with pytest.raises(LLMRequestError, match="maximum context length") as caught:
        ask(make_client(server.base_url, fake_time))
    assert caught.value.status == 400
    assert len(server.chat_requests) == 1
    assert [c.outcome for c in calls_of(caught.value)] == [CallOutcome.FAILED]
    assert fake_time.sleeps == []


def test_quota_429_fails_fast(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(ErrorReply(429, "You exceeded your current quota", code="insufficient_quota"))
    with pytest.raises(LLMRequestError, match="quota"):
        ask(make_client(server.base_url, fake_time))
    assert len(server.chat_requests) == 1


def test_401_names_the_environment_variable(server: FakeOpenAI, fake_time: FakeTime) -> None:
    client = make_client(server.base_url, fake_time, env={KEY_ENV: "sk-wrong-key-1234"})
    with pytest.raises(LLMRequestError) as caught:
        ask(client)
    message = str(caught.value)
    assert message.startswith(f"the server rejected the API key: set {KEY_ENV} (profile 'default')")
    assert caught.value.status == 401
    assert len(server.chat_requests) == 1


def test_403_names_the_environment_variable(server: FakeOpenAI, fake_time: FakeTime) -> None:
    server.enqueue(ErrorReply(403, "Project does not have access to model"))
    with pytest.raises(LLMRequestError, match=KEY_ENV):
        ask(make_client(server.base_url, fake_time))


def test_404_unknown_model(server: FakeOpenAI, fake_time: FakeTime) -> None:
    with pytest.raises(LLMRequestError, match="check base_url and model"):
        ask(make_client(server.base_url, fake_time, model="no-such-model"))


def test_missing_key_fails_before_any_request(server: FakeOpenAI, fake_time: FakeTime) -> None:
    with pytest.raises(LLMConfigError, match=f"set the {KEY_ENV} environment variable"):
        make_client(server.base_url, fake_time, env={})
    assert server.requests == []


def test_keyless_local_server(fake_time: FakeTime) -> None:
    with FakeOpenAI(api_key=None) as server:
        server.enqueue(GOOD)
        client = make_client(server.base_url, fake_time, api_key_env="", env={})
        assert ask(client).parsed.action == "add"


def test_every_attempt_is_logged(
    server: FakeOpenAI, fake_time: FakeTime, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(ErrorReply(500), GOOD)
    with caplog.at_level(logging.INFO, logger="dreaming.llm"):
        ask(make_client(server.base_url, fake_time))
    attempts = [r for r in caplog.records if r.name == "dreaming.llm" and " attempt " in r.msg]
    assert [r.args[1] for r in attempts if isinstance(r.args, tuple) and len(r.args) > 4] == [1, 2]


def test_strict_schema_is_idempotent_and_does_not_mutate() -> None:
    class Inner(BaseModel):
        text: str = "x"

    class Outer(BaseModel):
        items: list[Inner]
        note: Inner | None = None

    original = Outer.model_json_schema()
    snapshot = json.dumps(original, sort_keys=True)
    strict = strict_schema(original)
    assert json.dumps(original, sort_keys=True) == snapshot
    assert strict_schema(strict) == strict
    assert strict["additionalProperties"] is False
    assert strict["required"] == ["items", "note"]
    inner = strict["$defs"]["Inner"]
    assert inner["additionalProperties"] is False
    assert inner["required"] == ["text"]
    assert "default" not in inner["properties"]["text"]


def test_strict_schema_inlines_refs_with_siblings() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/X", "description": "an x"}},
        "$defs": {"X": {"type": "object", "properties": {"a": {"type": "integer"}}}},
    }
    strict = strict_schema(schema)
    assert strict["properties"]["x"] == {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "description": "an x",
        "additionalProperties": False,
        "required": ["a"],
    }


def test_profile_rejects_unknown_keys_and_half_prices() -> None:
    with pytest.raises(ValueError, match="extra"):
        LLMProfile(base_url="http://x/v1", model="m", nonsense=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="both"):
        LLMProfile(base_url="http://x/v1", model="m", price_input_per_mtok=1.0)
    with pytest.raises(ValueError, match="http"):
        LLMProfile(base_url="localhost:8080", model="m")


def test_bad_schema_name_is_a_programming_error(server: FakeOpenAI, fake_time: FakeTime) -> None:
    client = make_client(server.base_url, fake_time)
    with pytest.raises(ValueError, match="schema_name"):
        client.complete_json("s", "u", SCHEMA, "bad name!", Verdict)
