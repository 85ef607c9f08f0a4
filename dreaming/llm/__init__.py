"""The LLM layer: structured-output calls to OpenAI-compatible servers, within a budget.

    LLMProfile      which endpoint and model, timeouts, prices, retry bounds
    LLMClient       complete_json(): one validated JSON reply, retried, budgeted, recorded
    Budget          USD / token / call limits, checked before every attempt
    BudgetSettings  those limits per run and per day, as settings and job files give them
    Ledger          a fleet's daily budget in the shared database; Budget reserves there
    Reservation     one attempt's worst case, held in the Ledger until it is settled
    RateLimiter     a fleet-wide requests-per-minute limit per profile
    RetryPolicy     what is retried, how long to wait, when to stop
    CircuitBreaker  a run's memory of endpoints that failed for good: no more calls to them
    CallRecord      one HTTP attempt, as the call log stores it
    Completion      the validated reply and what it took
    utc_today       the UTC day spending is counted in

Nothing else in dreaming depends on an LLM: every caller has a deterministic path for when
this layer raises.
"""

from typing import TYPE_CHECKING

from dreaming.lazy import lazy_names
from dreaming.llm._breaker import CircuitBreaker
from dreaming.llm._day import utc_today
from dreaming.llm._pricing import cost_usd, estimate_prompt_tokens, estimate_tokens
from dreaming.llm._profile import LLMProfile, StructuredMode, StructuredOutput
from dreaming.llm._records import (
    UNCHARGED_OUTCOMES,
    CallOutcome,
    CallRecord,
    Completion,
    calls_of,
    raw_text_of,
)
from dreaming.llm._schema import strict_schema
from dreaming.llm.budget import Budget, BudgetSettings

if TYPE_CHECKING:
    from dreaming.llm._client import LLMClient
    from dreaming.llm._retry import RetryPolicy, retry_after_s
    from dreaming.llm.ledger import Ledger, RateLimiter, Reservation

# The HTTP client stack (openai, httpx2) takes most of a second to import; every command
# would pay it. It loads on first use of the names that need it (so do the fleet limits,
# which import the store).
_LAZY = {
    "LLMClient": "dreaming.llm._client",
    "Ledger": "dreaming.llm.ledger",
    "RateLimiter": "dreaming.llm.ledger",
    "Reservation": "dreaming.llm.ledger",
    "RetryPolicy": "dreaming.llm._retry",
    "retry_after_s": "dreaming.llm._retry",
}

__getattr__ = lazy_names(__name__, _LAZY)


__all__ = [
    "UNCHARGED_OUTCOMES",
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
    "calls_of",
    "cost_usd",
    "estimate_prompt_tokens",
    "estimate_tokens",
    "raw_text_of",
    "retry_after_s",
    "strict_schema",
    "utc_today",
]
