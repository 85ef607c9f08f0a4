"""Budget: the arithmetic, and its enforcement before every attempt of a real call."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from dreaming.errors import BudgetExceededError, InvalidReplyError, LLMConfigError
from dreaming.llm import (
    Budget,
    CallOutcome,
    LLMClient,
    LLMProfile,
    RetryPolicy,
    calls_of,
    cost_usd,
    estimate_prompt_tokens,
    estimate_tokens,
    strict_schema,
)
from tests.fake_openai import (
    DEFAULT_KEY,
    DEFAULT_MODEL,
    ErrorReply,
    FakeOpenAI,
    Reply,
    running_fake_openai,
)

KEY_ENV = "TEST_LLM_KEY"
PRICED: dict[str, Any] = {"price_input_per_mtok": 1.0, "price_output_per_mtok": 4.0}


class Answer(BaseModel):
    ok: bool


SCHEMA = Answer.model_json_schema()


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    yield from running_fake_openai()


def profile(base_url: str = "http://127.0.0.1:9/v1", **settings: Any) -> LLMProfile:
    defaults: dict[str, Any] = {
        "model": DEFAULT_MODEL,
        "api_key_env": KEY_ENV,
        "max_output_tokens": 100,
    }
    return LLMProfile(base_url=base_url, **{**defaults, **settings})


def client_for(server: FakeOpenAI, sleeps: list[float] | None = None, **settings: Any) -> LLMClient:
    prof = profile(server.base_url, **settings)
    return LLMClient(
        prof,
        env={KEY_ENV: DEFAULT_KEY},
        retry_policy=RetryPolicy.from_profile(prof, jitter_s=0),
        sleep=(sleeps.append if sleeps is not None else lambda _s: None),
    )


def ask(client: LLMClient, budget: Budget) -> Any:
    return client.complete_json("system", "user", SCHEMA, "answer", Answer, budget=budget)


def request_estimate() -> int:
    """The client's prompt estimate for `ask` in json_schema mode."""
    messages = [{"role": "system", "content": "system"}, {"role": "user", "content": "user"}]
    return estimate_prompt_tokens(messages, strict_schema(SCHEMA))


# -- arithmetic ------------------------------------------------------------------------------


def test_estimates_are_deterministic() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    messages = [{"role": "user", "content": "abcdefgh"}]
    assert estimate_prompt_tokens(messages) == 3 + 4 + 2


def test_cost_formula() -> None:
    assert cost_usd(profile(**PRICED), 1_000_000, 1_000_000) == pytest.approx(5.0)
    assert cost_usd(profile(**PRICED), 2_000, 500) == pytest.approx(0.002 + 0.002)
    assert cost_usd(profile(), 10, 10) is None


def test_worst_case_uses_prompt_estimate_and_max_output() -> None:
    usd, tokens = Budget(max_usd=1.0).worst_case(1000, 500, profile(**PRICED))
    assert tokens == 1500
    assert usd == pytest.approx(1000 * 1.0 / 1e6 + 500 * 4.0 / 1e6)
    assert Budget(max_tokens=10).worst_case(1000, 500, profile()) == (None, 1500)


def test_check_refuses_what_could_exceed_each_limit() -> None:
    budget = Budget(max_usd=1.0, max_tokens=1000, max_calls=3, spent_usd=0.9, spent_tokens=400)
    budget.check(0.1, 600)  # exactly fills both: allowed
    with pytest.raises(BudgetExceededError, match=r"max_usd=1.0"):
        budget.check(0.11, 10)
    with pytest.raises(BudgetExceededError, match="max_tokens=1000"):
        budget.check(0.0, 601)
    budget.calls = 3
    with pytest.raises(BudgetExceededError, match="max_calls=3"):
        budget.check(0.0, 0)


def test_charge_counts_calls_tokens_and_usd() -> None:
    budget = Budget(max_usd=1.0)
    budget.charge(0.25, 100)
    budget.charge(None, 50)
    assert (budget.calls, budget.spent_tokens, budget.spent_usd) == (2, 150, 0.25)
    assert budget.remaining_usd == 0.75
    assert budget.remaining_tokens is None
    assert Budget().remaining_calls is None


def test_negative_limits_are_rejected() -> None:
    with pytest.raises(ValueError, match="max_usd"):
        Budget(max_usd=-1)
    with pytest.raises(ValueError, match="spent"):
        Budget(spent_tokens=-5)


def test_for_run_takes_the_tighter_of_run_and_remaining_daily() -> None:
    budget = Budget.for_run(
        max_usd=1.0,
        max_tokens=10_000,
        daily_max_usd=5.0,
        daily_max_calls=100,
        spent_today_usd=4.5,
        calls_today=98,
    )
    assert budget.max_usd == pytest.approx(0.5)
    assert budget.max_tokens == 10_000
    assert budget.max_calls == 2
    assert (budget.spent_usd, budget.spent_tokens, budget.calls) == (0.0, 0, 0)
    with pytest.raises(BudgetExceededError, match="daily budget"):
        budget.check(0.6, 1)
    with pytest.raises(BudgetExceededError, match="run budget"):
        budget.check(0.1, 20_000)
    overspent = Budget.for_run(daily_max_usd=1.0, spent_today_usd=3.0)
    assert overspent.max_usd == 0


def test_unpriced_model_under_usd_only_budget_is_a_config_error() -> None:
    with pytest.raises(LLMConfigError, match="has no configured price") as caught:
        Budget(max_usd=1.0).worst_case(10, 10, profile(model="gpt-x"))
    assert "'gpt-x'" in str(caught.value)
    assert "price_input_per_mtok" in str(caught.value)
    # A token or call limit still bounds an unpriced model.
    assert Budget(max_usd=1.0, max_tokens=100).worst_case(10, 10, profile()) == (None, 20)
    assert Budget(max_usd=1.0, max_calls=1).worst_case(10, 10, profile()) == (None, 20)


# -- enforcement in the client ----------------------------------------------------------------


@pytest.mark.parametrize(
    "budget",
    [
        Budget(max_usd=0.0001),
        Budget(max_tokens=50),
        Budget(max_calls=0),
        Budget(max_usd=1.0, spent_usd=1.0),
    ],
    ids=["usd", "tokens", "calls", "already-spent"],
)
def test_a_call_that_could_exceed_the_budget_is_not_made(
    server: FakeOpenAI, budget: Budget
) -> None:
    server.enqueue({"ok": True})
    with pytest.raises(BudgetExceededError, match="the call was not made") as caught:
        ask(client_for(server, **PRICED), budget)
    assert server.requests == []
    [call] = calls_of(caught.value)
    assert call.outcome is CallOutcome.OVER_BUDGET
    assert call.http_status is None and call.input_tokens == 0
    assert budget.calls == 0 or budget.max_calls is None


def test_unpriced_model_with_usd_only_budget_sends_nothing(server: FakeOpenAI) -> None:
    with pytest.raises(LLMConfigError, match="no configured price"):
        ask(client_for(server), Budget(max_usd=5.0))
    assert server.requests == []


def test_success_charges_the_reported_usage(server: FakeOpenAI) -> None:
    server.enqueue(Reply({"ok": True}, prompt_tokens=120, completion_tokens=30))
    budget = Budget(max_usd=1.0, max_tokens=10_000)
    result = ask(client_for(server, **PRICED), budget)
    assert (budget.calls, budget.spent_tokens) == (1, 150)
    assert budget.spent_usd == pytest.approx(120 * 1.0 / 1e6 + 30 * 4.0 / 1e6)
    assert result.cost_usd == pytest.approx(budget.spent_usd)


def test_no_reported_usage_charges_the_estimate(server: FakeOpenAI) -> None:
    server.enqueue(Reply({"ok": True}, usage=False))
    budget = Budget(max_tokens=10_000)
    result = ask(client_for(server), budget)
    [call] = result.calls
    assert call.usage_estimated
    assert call.input_tokens == request_estimate()
    assert budget.spent_tokens == call.input_tokens + call.output_tokens


def test_retries_are_checked_against_the_budget_and_charged(server: FakeOpenAI) -> None:
    server.enqueue(*[ErrorReply(500)] * 5)
    budget = Budget(max_calls=2)
    sleeps: list[float] = []

    with pytest.raises(BudgetExceededError) as caught:
        ask(client_for(server, sleeps, max_attempts=5), budget)

    assert len(server.chat_requests) == 2
    assert [c.outcome for c in calls_of(caught.value)] == [
        CallOutcome.RETRIED,
        CallOutcome.RETRIED,
        CallOutcome.OVER_BUDGET,
    ]
    assert budget.calls == 2
    assert budget.spent_tokens == 2 * request_estimate()
    assert sleeps == [1.0, 2.0]


def test_token_budget_stops_a_retry_that_no_longer_fits(server: FakeOpenAI) -> None:
    per_attempt = request_estimate()
    worst = per_attempt + 100
    server.enqueue(ErrorReply(503), Reply({"ok": True}))
    # Room for one worst-case attempt, but not for a second after the first is charged.
    budget = Budget(max_tokens=worst + per_attempt - 1)
    with pytest.raises(BudgetExceededError, match="max_tokens"):
        ask(client_for(server), budget)
    assert len(server.chat_requests) == 1
    assert budget.spent_tokens == per_attempt


def test_failed_attempts_with_usage_count_too(server: FakeOpenAI) -> None:
    server.enqueue(Reply("not json", prompt_tokens=40, completion_tokens=3))
    budget = Budget(max_tokens=10_000)
    with pytest.raises(InvalidReplyError, match="not valid JSON"):
        ask(client_for(server), budget)
    assert (budget.calls, budget.spent_tokens) == (1, 43)
