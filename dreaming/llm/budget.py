"""The spending budget of a run: checked before every LLM attempt, charged after it.

`BudgetSettings` are its limits as settings and job files give them; the settings compose
them, as they compose `LLMProfile`, so the LLM layer never imports the settings.

A `Budget` is a plain in-memory object. Persisting what was spent (per run, per day) is the
caller's job; `Budget.for_run` starts a run's budget from what the day has already spent.
In fleet mode a budget also carries the fleet's shared `Ledger` (ledger.py): `check()`
reserves the attempt's worst case there and `charge()` settles it with the actual, so every
checked attempt must end in exactly one `charge()` (sent) or `release()` (not sent).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from dreaming.errors import BudgetExceededError, LLMConfigError
from dreaming.llm._pricing import cost_usd
from dreaming.llm._profile import LLMProfile

if TYPE_CHECKING:
    from dreaming.llm.ledger import Ledger, Reservation

# Float sums of prices drift in the last bits; a call that exactly fills the budget is allowed.
_USD_EPSILON = 1e-12


# The largest caps a setting may give: far above any real night, far below a typo.
MAX_USD = 100_000.0
MAX_TOKENS = 10**12
MAX_CALLS = 10**9


class BudgetSettings(BaseModel):
    """Per run and per day; the daily figures persist in each agent's database."""

    # Finite and bounded: `max_usd = 1e308` or `1e999` (infinity) is no cap but a typo,
    # and would read as one in every report.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    max_usd: float | None = Field(default=None, ge=0, le=MAX_USD)
    max_tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)
    max_calls: int | None = Field(default=None, ge=0, le=MAX_CALLS)
    daily_max_usd: float | None = Field(default=None, ge=0, le=MAX_USD)
    daily_max_tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)


def _remaining_cap(run_max: float | None, day_max: float | None, day_spent: float) -> float | None:
    caps = [c for c in (run_max, None if day_max is None else day_max - day_spent) if c is not None]
    return max(0, min(caps)) if caps else None


@dataclass
class Budget:
    """Limits on USD, tokens and calls (None = unlimited) and what has been spent so far.

    Every HTTP attempt counts, failed ones included. Not thread-safe: one budget per run.
    """

    max_usd: float | None = None
    max_tokens: int | None = None
    max_calls: int | None = None
    spent_usd: float = 0.0
    spent_tokens: int = 0
    calls: int = 0
    # Which limit each cap came from ("run" or "daily"), for error messages.
    scopes: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    # The fleet's shared daily budget (fleet mode), checked after this budget's own limits.
    ledger: Ledger | None = field(default=None, repr=False, compare=False)
    # The ledger reservation of the attempt checked last and not yet charged or released.
    _pending: Reservation | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("max_usd", "max_tokens", "max_calls"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"budget {name} must not be negative, got {value}")
        if self.spent_usd < 0 or self.spent_tokens < 0 or self.calls < 0:
            raise ValueError("budget spent amounts must not be negative")

    @classmethod
    def for_run(
        cls,
        *,
        max_usd: float | None = None,
        max_tokens: int | None = None,
        max_calls: int | None = None,
        daily_max_usd: float | None = None,
        daily_max_tokens: int | None = None,
        daily_max_calls: int | None = None,
        spent_today_usd: float = 0.0,
        spent_today_tokens: int = 0,
        calls_today: int = 0,
    ) -> Budget:
        """A run's budget: the tighter of its own limits and what remains of the day's.

        The returned budget counts this run's spending only, from zero.
        """
        usd = _remaining_cap(max_usd, daily_max_usd, spent_today_usd)
        tokens = _remaining_cap(max_tokens, daily_max_tokens, spent_today_tokens)
        calls = _remaining_cap(max_calls, daily_max_calls, calls_today)
        scopes = {
            "usd": "daily" if usd is not None and usd != max_usd else "run",
            "tokens": "daily" if tokens is not None and tokens != max_tokens else "run",
            "calls": "daily" if calls is not None and calls != max_calls else "run",
        }
        return cls(
            max_usd=usd,
            max_tokens=None if tokens is None else int(tokens),
            max_calls=None if calls is None else int(calls),
            scopes=scopes,
        )

    @property
    def remaining_usd(self) -> float | None:
        return None if self.max_usd is None else max(0.0, self.max_usd - self.spent_usd)

    @property
    def remaining_tokens(self) -> int | None:
        return None if self.max_tokens is None else max(0, self.max_tokens - self.spent_tokens)

    @property
    def remaining_calls(self) -> int | None:
        return None if self.max_calls is None else max(0, self.max_calls - self.calls)

    def worst_case(
        self, prompt_tokens_estimate: int, max_output_tokens: int, profile: LLMProfile
    ) -> tuple[float | None, int]:
        """The most one call can cost: (USD or None when unpriced, tokens).

        Raises LLMConfigError when only a USD limit is set and the model has no price, since
        nothing would then bound the spending; and when the fleet ledger caps USD, since the
        fleet's spending in dollars could then not be counted.
        """
        tokens = prompt_tokens_estimate + max_output_tokens
        usd = cost_usd(profile, prompt_tokens_estimate, max_output_tokens)
        only_usd = self.max_usd is not None and self.max_tokens is None and self.max_calls is None
        if usd is None and only_usd:
            raise LLMConfigError(
                f"model {profile.model!r} (profile {profile.name!r}) has no configured "
                "price: set price_input_per_mtok/price_output_per_mtok or give a token "
                "or call budget"
            )
        if usd is None and self.ledger is not None and self.ledger.max_usd is not None:
            raise LLMConfigError(
                f"model {profile.model!r} (profile {profile.name!r}) has no configured "
                f"price but the {self.ledger.label} caps USD (max_usd={self.ledger.max_usd}): "
                "set price_input_per_mtok/price_output_per_mtok for every model the fleet "
                "uses, or cap the fleet by tokens or calls instead"
            )
        return usd, tokens

    def check(
        self,
        worst_usd: float | None,
        worst_tokens: int,
        bound: tuple[float | None, int] | None = None,
    ) -> None:
        """Raise BudgetExceededError if a call costing up to this could exceed what remains.

        With a ledger, a call that passes is reserved there at `bound` (a hard upper bound
        on its cost, when the caller has one) or else at this worst case: follow it with
        `charge()` once the attempt was sent, or `release()` if it was not.
        """
        if self._pending is not None:
            raise RuntimeError(
                "Budget.check() again before the last checked attempt was charged or released"
            )
        if self.max_calls is not None and self.calls + 1 > self.max_calls:
            raise BudgetExceededError(
                f"{self._scope('calls')} call budget is used up ({self.calls} of "
                f"max_calls={self.max_calls}); the call was not made"
            )
        if self.max_tokens is not None and self.spent_tokens + worst_tokens > self.max_tokens:
            raise BudgetExceededError(
                f"this call could use up to {worst_tokens} tokens but only "
                f"{self.remaining_tokens} of the {self._scope('tokens')} budget "
                f"(max_tokens={self.max_tokens}) remain; the call was not made"
            )
        if (
            self.max_usd is not None
            and worst_usd is not None
            and self.spent_usd + worst_usd > self.max_usd + _USD_EPSILON
        ):
            raise BudgetExceededError(
                f"this call could cost up to ${worst_usd:.6f} but only "
                f"${self.remaining_usd:.6f} of the {self._scope('usd')} budget "
                f"(max_usd={self.max_usd}) remains; the call was not made"
            )
        if self.ledger is not None:
            usd, tokens = bound if bound is not None else (worst_usd, worst_tokens)
            self._pending = self.ledger.reserve(usd, tokens)

    def charge(self, usd: float | None, tokens: int) -> None:
        """Record one attempt's real (or, without reported usage, estimated) spending, and
        settle its ledger reservation with it."""
        self.calls += 1
        self.spent_tokens += tokens
        if usd is not None:
            self.spent_usd += usd
        pending, self._pending = self._pending, None
        if pending is not None and self.ledger is not None:
            self.ledger.settle(pending, usd, tokens)

    def release(self) -> None:
        """The last checked attempt was not sent after all: give its reservation back."""
        pending, self._pending = self._pending, None
        if pending is not None and self.ledger is not None:
            self.ledger.release(pending)

    def _scope(self, dimension: str) -> str:
        return self.scopes.get(dimension, "run")
