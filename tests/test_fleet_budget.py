"""Limits a fleet shares in its database: the daily Ledger and the per-profile RateLimiter.

Every test runs on a SQLite file and on PostgreSQL (the `backend` fixture). The concurrency
tests start real processes (spawn: nothing inherited), each with its own engine, racing for
the same row: the totals must come out exact whatever the interleaving.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import Engine, select

from dreaming.errors import (
    BudgetExceededError,
    InvalidReplyError,
    LLMConfigError,
    TransientError,
)
from dreaming.llm import (
    Budget,
    BudgetSettings,
    CallOutcome,
    Ledger,
    LLMClient,
    LLMProfile,
    RateLimiter,
    Reservation,
    RetryPolicy,
    calls_of,
    cost_usd,
    estimate_prompt_tokens,
    strict_schema,
)
from dreaming.llm._pricing import prompt_token_bound
from dreaming.llm.calls import record_calls, run_budget, spent_today
from dreaming.store import open_engine, open_shared_engine
from dreaming.store.tables import RATE_WINDOWS as WINDOWS
from tests.backends import Backend
from tests.fake_openai import DEFAULT_KEY, DEFAULT_MODEL, ErrorReply, FakeOpenAI, Reply

DAY = "2030-01-02"
KEY_ENV = "TEST_LLM_KEY"
PRICED: dict[str, Any] = {"price_input_per_mtok": 1.0, "price_output_per_mtok": 4.0}
MAX_OUTPUT = 100


class Answer(BaseModel):
    ok: bool


SCHEMA = Answer.model_json_schema()


# -- engines: one per test, and one per child process -------------------------------------


def _target(backend: Backend, tmp_path: Path) -> str:
    """What a process needs to open the test's database: a PostgreSQL URL or a file path."""
    return backend.url if backend.url is not None else str(tmp_path / "x.sqlite")


def _open(target: str) -> Engine:
    if target.startswith("postgresql"):
        return open_shared_engine(target)
    return open_engine(Path(target))


@pytest.fixture
def target(backend: Backend, tmp_path: Path) -> str:
    return _target(backend, tmp_path)


@pytest.fixture
def engine(target: str) -> Iterator[Engine]:
    eng = _open(target)
    yield eng
    eng.dispose()


def ledger(engine: Engine, **caps: Any) -> Ledger:
    return Ledger(engine, today=lambda: DAY, **caps)


def totals(led: Ledger | None) -> tuple[float, int, int, float, int, int]:
    assert led is not None
    s = led.spent()
    return (
        s["usd_spent"],
        s["tokens_spent"],
        s["calls"],
        s["usd_reserved"],
        s["tokens_reserved"],
        s["calls_reserved"],
    )


# -- the ledger's arithmetic --------------------------------------------------------------


def test_reserve_then_settle_accounts_exactly(engine: Engine) -> None:
    led = ledger(engine, max_usd=1.0, max_tokens=1000, max_calls=5)
    assert totals(led) == (0.0, 0, 0, 0.0, 0, 0)  # no row yet: zeros

    first = led.reserve(0.25, 300)
    assert first == Reservation(scope="fleet", day=DAY, usd=0.25, tokens=300)
    assert totals(led) == (0.0, 0, 0, 0.25, 300, 1)
    second = led.reserve(0.5, 400)
    assert totals(led) == (0.0, 0, 0, 0.75, 700, 2)

    led.settle(first, 0.125, 120)  # the actual, smaller than the worst case
    assert totals(led) == (0.125, 120, 1, 0.5, 400, 1)
    led.release(second)  # never sent: reservation back, nothing spent
    assert totals(led) == (0.125, 120, 1, 0.0, 0, 0)

    # Another scope and another day are other rows.
    other = Ledger(engine, scope="eu", max_calls=1, today=lambda: DAY)
    other.settle(other.reserve(None, 10), None, 7)
    assert totals(other) == (0.0, 7, 1, 0.0, 0, 0)
    assert led.spent("2030-01-03")["calls"] == 0
    assert totals(led) == (0.125, 120, 1, 0.0, 0, 0)
    assert led.spent()["max_usd"] == 1.0 and led.spent()["day"] == DAY


def test_a_worst_case_that_exactly_fills_the_cap_is_allowed(engine: Engine) -> None:
    led = ledger(engine, max_usd=1.0)
    for _ in range(10):  # 0.1 ten times sums to 0.9999999999999999 or a hair over 1.0
        led.settle(led.reserve(0.1, 0), 0.1, 0)
    with pytest.raises(BudgetExceededError):
        led.reserve(1e-9, 0)
    assert led.spent()["calls"] == 10


@pytest.mark.parametrize(
    ("caps", "worst", "names"),
    [
        ({"max_usd": 1.0}, (0.7, 10), "max_usd=1.0"),
        ({"max_tokens": 1000}, (0.0, 700), "max_tokens=1000"),
        ({"max_calls": 1}, (0.0, 1), "max_calls=1"),
    ],
    ids=["usd", "tokens", "calls"],
)
def test_refusal_changes_no_row_and_names_the_fleet_budget(
    engine: Engine, caps: dict[str, Any], worst: tuple[float, int], names: str
) -> None:
    led = ledger(engine, **caps)
    led.settle(led.reserve(*worst), worst[0] / 2, worst[1] // 2)
    held = led.reserve(0.0, 0) if "max_calls" not in caps else None
    before = led.spent()

    with pytest.raises(BudgetExceededError) as caught:
        led.reserve(*worst)

    assert led.spent() == before
    message = str(caught.value)
    assert "fleet daily budget" in message and DAY in message
    assert names in message and "the call was not made" in message
    if held is not None:
        led.release(held)


def _reserve_and_die(target: str) -> None:
    engine = _open(target)
    Ledger(engine, max_usd=1.0, today=lambda: DAY).reserve(0.5, 500)
    os._exit(0)  # no settle, no cleanup: a worker killed mid-call


def test_a_dead_workers_reservation_stays_counted(engine: Engine, target: str) -> None:
    child = multiprocessing.get_context("spawn").Process(target=_reserve_and_die, args=(target,))
    child.start()
    child.join(60)
    assert child.exitcode == 0

    led = ledger(engine, max_usd=1.0)
    assert totals(led) == (0.0, 0, 0, 0.5, 500, 1)
    with pytest.raises(BudgetExceededError, match=r"\$0\.500000 reserved"):
        led.reserve(0.6, 1)  # would fit if the dead worker's half were forgotten
    led.settle(led.reserve(0.5, 1), 0.5, 1)
    assert totals(led) == (0.5, 1, 1, 0.5, 500, 1)  # still never over 1.0 in all


def test_unpriced_model_under_a_fleet_usd_cap_is_a_config_error(engine: Engine) -> None:
    unpriced = profile()
    budget = Budget(max_tokens=10_000, ledger=ledger(engine, max_usd=5.0))
    with pytest.raises(LLMConfigError, match="fleet daily budget caps USD"):
        budget.worst_case(10, 10, unpriced)
    with pytest.raises(LLMConfigError, match="no configured price"):
        ledger(engine, max_usd=5.0).reserve(None, 10)
    # A fleet capped by tokens or calls only still bounds an unpriced model.
    capped = Budget(ledger=ledger(engine, max_tokens=100))
    assert capped.worst_case(10, 10, unpriced) == (None, 20)
    capped.check(None, 20)
    capped.charge(None, 15)
    assert totals(capped.ledger) == (0.0, 15, 1, 0.0, 0, 0)


def test_check_twice_without_charge_is_a_bug(engine: Engine) -> None:
    budget = Budget(ledger=ledger(engine, max_calls=10))
    budget.check(None, 1)
    with pytest.raises(RuntimeError, match="charged or released"):
        budget.check(None, 1)
    budget.release()
    assert totals(budget.ledger) == (0.0, 0, 0, 0.0, 0, 0)


def test_run_budget_attaches_the_ledger(engine: Engine) -> None:
    led = ledger(engine, max_calls=3)
    assert run_budget(engine, "main", BudgetSettings(), ledger=led).ledger is led
    assert run_budget(engine, "main", BudgetSettings()).ledger is None


# -- the ledger under concurrency ---------------------------------------------------------

WORST_USD = 0.01
WORST_TOKENS = 100
AFFORDABLE = 37  # max_usd = 0.37: 37 worst cases fit, the 38th does not
PER_PROCESS = 20
PROCESSES = 4


def _spend_worker(target: str, barrier: Any, results: Any) -> None:
    engine = _open(target)
    led = Ledger(
        engine, max_usd=AFFORDABLE * WORST_USD, max_tokens=10**6, max_calls=1000, today=lambda: DAY
    )
    made = refused = 0
    barrier.wait()
    for _ in range(PER_PROCESS):
        try:
            reservation = led.reserve(WORST_USD, WORST_TOKENS)
        except BudgetExceededError:
            refused += 1
            continue
        time.sleep(0.002)  # the call in flight: others reserve meanwhile
        led.settle(reservation, WORST_USD, WORST_TOKENS)
        made += 1
    engine.dispose()
    results.put((made, refused))


def _race(worker: Callable[..., None], *args: Any) -> list[tuple[int, int]]:
    """PROCESSES spawned processes run `worker(*args, barrier, results)`, released together
    by the barrier; returns what each put on `results`."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    workers = [ctx.Process(target=worker, args=(*args, barrier, results)) for _ in range(PROCESSES)]
    for w in workers:
        w.start()
    outcomes = [results.get(timeout=90) for _ in workers]
    for w in workers:
        w.join(30)
        assert w.exitcode == 0
    return outcomes


def test_concurrent_workers_make_exactly_the_affordable_calls(engine: Engine, target: str) -> None:
    outcomes = _race(_spend_worker, target)

    assert sum(made for made, _ in outcomes) == AFFORDABLE
    assert sum(refused for _, refused in outcomes) == PROCESSES * PER_PROCESS - AFFORDABLE
    s = ledger(engine).spent()
    assert s["calls"] == AFFORDABLE
    assert s["tokens_spent"] == AFFORDABLE * WORST_TOKENS
    assert s["usd_spent"] == pytest.approx(AFFORDABLE * WORST_USD)
    assert s["usd_spent"] <= AFFORDABLE * WORST_USD + 1e-12
    assert (s["usd_reserved"], s["tokens_reserved"], s["calls_reserved"]) == (
        pytest.approx(0.0, abs=1e-12),
        0,
        0,
    )


# -- the rate limiter ---------------------------------------------------------------------

T0 = 1_900_000_000 - 1_900_000_000 % 60  # a window start (unix seconds)


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def limiter(engine: Engine, clock: FakeClock, rpm: int = 3, **kw: Any) -> RateLimiter:
    return RateLimiter(engine, "default", rpm, clock=clock, sleep=clock.sleep, jitter_s=0, **kw)


def window_rows(engine: Engine) -> list[tuple[str, int, int]]:
    with engine.connect() as conn:
        rows = conn.execute(select(WINDOWS).order_by(WINDOWS.c.profile, WINDOWS.c.window_start))
        return [(r.profile, r.window_start, r.requests) for r in rows]


def test_rate_limiter_counts_a_window_and_waits_for_the_next(engine: Engine) -> None:
    clock = FakeClock(T0 + 15)
    rate = limiter(engine, clock)
    assert [rate.acquire() for _ in range(3)] == [1, 2, 3]
    assert clock.sleeps == []

    with pytest.raises(TransientError, match="3 requests per minute") as caught:
        rate.acquire(max_wait_s=10)  # the next window is 45 s away
    assert caught.value.retry_after == pytest.approx(45)
    assert clock.sleeps == []

    assert rate.acquire() == 1  # waited for the next window
    assert clock.sleeps == [pytest.approx(45)]
    assert clock.now == T0 + 60
    # Another profile has its own windows.
    assert RateLimiter(engine, "other", 1, clock=clock, sleep=clock.sleep).acquire() == 1
    assert window_rows(engine) == [
        ("default", T0, 3),
        ("default", T0 + 60, 1),
        ("other", T0 + 60, 1),
    ]


def test_rate_limiter_constructor_max_wait_bounds_too(engine: Engine) -> None:
    clock = FakeClock(T0)
    rate = limiter(engine, clock, rpm=1, max_wait_s=30)
    rate.acquire()
    with pytest.raises(TransientError):
        rate.acquire(max_wait_s=100)  # the tighter bound wins
    assert clock.sleeps == []


def test_old_windows_are_tidied_when_a_new_one_opens(engine: Engine) -> None:
    clock = FakeClock(T0)
    rate = limiter(engine, clock)
    rate.acquire()
    clock.now = T0 + 1800
    rate.acquire()
    clock.now = T0 + 3700  # T0's window is now more than an hour old
    rate.acquire()
    rate.acquire()
    assert window_rows(engine) == [
        ("default", T0 + 1800 - 1800 % 60, 1),
        ("default", T0 + 3700 - 3700 % 60, 2),
    ]


RPM = 13


def _acquire_worker(target: str, now: float, barrier: Any, results: Any) -> None:
    engine = _open(target)
    rate = RateLimiter(engine, "default", RPM, clock=lambda: now, max_wait_s=0)
    got = refused = 0
    barrier.wait()
    for _ in range(10):
        try:
            rate.acquire()
            got += 1
        except TransientError:
            refused += 1
    engine.dispose()
    results.put((got, refused))


def test_concurrent_acquirers_never_exceed_the_rate(engine: Engine, target: str) -> None:
    outcomes = _race(_acquire_worker, target, T0 + 30.0)

    assert sum(got for got, _ in outcomes) == RPM
    assert sum(refused for _, refused in outcomes) == PROCESSES * 10 - RPM
    assert window_rows(engine) == [("default", T0, RPM)]


# -- through LLMClient against the fake server --------------------------------------------


def profile(base_url: str = "http://127.0.0.1:9/v1", **settings: Any) -> LLMProfile:
    defaults: dict[str, Any] = {
        "model": DEFAULT_MODEL,
        "api_key_env": KEY_ENV,
        "max_output_tokens": MAX_OUTPUT,
    }
    return LLMProfile(base_url=base_url, **{**defaults, **settings})


def client_for(
    server: FakeOpenAI, *, rate_limiter: RateLimiter | None = None, **settings: Any
) -> LLMClient:
    prof = profile(server.base_url, **settings)
    return LLMClient(
        prof,
        env={KEY_ENV: DEFAULT_KEY},
        retry_policy=RetryPolicy.from_profile(prof, jitter_s=0),
        sleep=lambda _s: None,
        rate_limiter=rate_limiter,
    )


def ask(client: LLMClient, budget: Budget | None = None) -> Any:
    return client.complete_json("system", "user", SCHEMA, "answer", Answer, budget=budget)


def request_estimate() -> int:
    messages = [{"role": "system", "content": "system"}, {"role": "user", "content": "user"}]
    return estimate_prompt_tokens(messages, strict_schema(SCHEMA))


def request_bound() -> int:
    """What the ledger reserves for the prompt: a hard bound (UTF-8 bytes), not the estimate."""
    messages = [{"role": "system", "content": "system"}, {"role": "user", "content": "user"}]
    return prompt_token_bound(messages, strict_schema(SCHEMA))


def worst_reply() -> Reply:
    """A reply whose reported usage is exactly what the ledger reserved."""
    return Reply({"ok": True}, prompt_tokens=request_bound(), completion_tokens=MAX_OUTPUT)


def test_budgets_sharing_a_ledger_make_exactly_the_affordable_calls(
    engine: Engine, fake_openai: FakeOpenAI
) -> None:
    worst_usd = cost_usd(profile(**PRICED), request_bound(), MAX_OUTPUT)
    assert worst_usd is not None
    assert request_bound() > request_estimate()  # the bound is the safe side of the estimate
    led = ledger(engine, max_usd=3 * worst_usd)
    fake_openai.default = lambda _request: worst_reply()
    client = client_for(fake_openai, **PRICED)
    # Two runs (agents, workers) with generous budgets of their own, one fleet ledger.
    first, second = (Budget(max_usd=1.0, ledger=led) for _ in range(2))

    made = [ask(client, first), ask(client, second), ask(client, first)]
    with pytest.raises(BudgetExceededError, match="fleet daily budget") as caught:
        ask(client, second)

    assert len(fake_openai.chat_requests) == 3
    [refused] = calls_of(caught.value)
    assert refused.outcome is CallOutcome.OVER_BUDGET
    assert (first.calls, second.calls) == (2, 1)
    s = led.spent()
    assert s["calls"] == 3 and s["calls_reserved"] == 0
    assert s["usd_spent"] == pytest.approx(3 * worst_usd)
    assert s["tokens_spent"] == 3 * (request_bound() + MAX_OUTPUT)
    # The per-agent log and spend agree with the ledger (the refusal is logged, not spent).
    with engine.begin() as conn:
        record_calls(conn, "main", None, [c for r in made for c in r.calls] + [refused])
        usd, tokens, calls = spent_today(conn, "main")
    assert (usd, tokens, calls) == (pytest.approx(s["usd_spent"]), s["tokens_spent"], 3)


def test_every_checked_attempt_is_settled_whatever_the_server_sends(
    engine: Engine, fake_openai: FakeOpenAI
) -> None:
    led = ledger(engine, max_calls=100)
    budget = Budget(ledger=led)
    client = client_for(fake_openai, max_attempts=1)
    # A 200 with null usage fields, one with a body that is no completion, a 500.
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": DEFAULT_MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": '{"ok": true}'}}],
        "usage": {"prompt_tokens": None, "completion_tokens": None},
    }
    fake_openai.enqueue(ErrorReply(200, body=body), ErrorReply(200, body={"choices": {}}))
    fake_openai.enqueue(ErrorReply(500))
    assert ask(client, budget).parsed == Answer(ok=True)
    with pytest.raises(InvalidReplyError, match="not a chat completion"):
        ask(client, budget)
    with pytest.raises(TransientError):
        ask(client, budget)
    assert budget.calls == 3
    assert led.spent()["calls"] == 3 and led.spent()["calls_reserved"] == 0

    # Something no one expected, raised while the request was under way.
    def explode(**_kwargs: Any) -> Any:
        raise RuntimeError("boom")

    client._openai.chat.completions.create = explode
    with pytest.raises(RuntimeError, match="boom"):
        ask(client, budget)
    assert budget.calls == 4 and budget.spent_tokens > 0
    assert led.spent()["calls"] == 4 and led.spent()["calls_reserved"] == 0


def test_requests_per_minute_makes_the_client_wait_not_send(
    engine: Engine, fake_openai: FakeOpenAI
) -> None:
    clock = FakeClock(T0 + 10)
    seen_while_waiting: list[int] = []

    def sleep(seconds: float) -> None:
        seen_while_waiting.append(len(fake_openai.chat_requests))
        clock.sleep(seconds)

    prof = profile(fake_openai.base_url, requests_per_minute=2)
    assert prof.requests_per_minute == 2
    rate = RateLimiter(engine, prof.name, 2, clock=clock, sleep=sleep, jitter_s=0)
    fake_openai.default = lambda _request: worst_reply()
    client = client_for(fake_openai, rate_limiter=rate, requests_per_minute=2)
    led = ledger(engine, max_calls=10)

    for _ in range(3):
        ask(client, Budget(ledger=led))

    assert len(fake_openai.chat_requests) == 3
    assert clock.sleeps == [pytest.approx(50)]  # the third waited out the window
    assert seen_while_waiting == [2]  # and nothing was sent while it waited
    assert window_rows(engine) == [("default", T0, 2), ("default", T0 + 60, 1)]
    assert led.spent()["calls"] == 3


def test_a_rate_limit_wait_past_the_deadline_gives_up_and_releases(
    engine: Engine, fake_openai: FakeOpenAI
) -> None:
    clock = FakeClock(T0 + 10)
    rate = limiter(engine, clock, rpm=1)
    fake_openai.default = lambda _request: worst_reply()
    client = client_for(fake_openai, rate_limiter=rate, deadline_s=30)
    led = ledger(engine, max_calls=10)
    budget = Budget(ledger=led)

    ask(client, budget)
    with pytest.raises(TransientError, match="requests per minute"):
        ask(client, budget)  # the next window is 50 s away; the call may take 30

    assert clock.sleeps == []
    assert len(fake_openai.chat_requests) == 1
    assert budget.calls == 1
    assert totals(led)[2:] == (1, 0.0, 0, 0)  # the unsent attempt's reservation came back
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        profile(requests_per_minute=0)


def test_the_server_clock_is_the_databases_and_agrees_with_ours(engine: Engine) -> None:
    from dreaming.llm.ledger import server_clock

    clock = server_clock(engine)
    before = time.time()
    first, second = clock(), clock()
    after = time.time()
    # Same machine here, so within a second of ours; and it moves forward.
    assert before - 1 <= first <= second <= after + 1
