"""Limits every worker of a fleet shares, kept in the database they all use.

    Ledger        a daily budget (USD / tokens / calls) over every worker: `budget_ledger`
    Reservation   one call's worst case, held in the ledger while the call is in flight
    RateLimiter   requests per minute per LLM profile over every worker: `rate_windows`

A `Budget` (budget.py) with a ledger reserves each attempt's worst case here before it is
sent and settles the actual afterwards, so workers on many machines never spend more than
the cap between them, however their calls interleave.

Why this is safe under concurrency: a reservation is ONE conditional UPDATE ("add my worst
case WHERE spent + reserved + worst <= cap"). On PostgreSQL the UPDATE takes the row lock; a
concurrent reservation blocks on it and, under READ COMMITTED, re-evaluates its WHERE
against the row as the first one committed it (never against a stale snapshot), so two
workers can never both take the last room. On SQLite the database-wide write lock
serialises the same statements outright. The rate windows work the same way.

A worker that dies between reserve and settle leaves its reservation counted: the fleet
then spends less than it could for the rest of that day, never more. The day's row is
replaced by the next day's at UTC midnight; an operator who knows that no worker is running
may also zero the *_reserved columns by hand.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, Update, case, delete, select, update

from dreaming.errors import BudgetExceededError, LLMConfigError, TransientError
from dreaming.llm._day import utc_today
from dreaming.store.dialect import upsert
from dreaming.store.tables import BUDGET_LEDGER, RATE_WINDOWS

_log = logging.getLogger("dreaming.llm")


# As in budget.py: float sums of prices drift in the last bits; exactly filling a cap is allowed.
_USD_EPSILON = 1e-12
WINDOW_S = 60
# Windows older than this are deleted when a profile opens a new one.
_KEEP_WINDOWS_S = 3600


@dataclass(frozen=True)
class Reservation:
    """One attempt's worst case, held in the ledger's (scope, day) row until it is settled."""

    scope: str
    day: str
    usd: float
    tokens: int


class Ledger:
    """A budget shared by every worker using `engine`: caps per UTC day (None = no cap).

    `scope` names the row family ("fleet"); `today` is injectable for tests.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        scope: str = "fleet",
        max_usd: float | None = None,
        max_tokens: int | None = None,
        max_calls: int | None = None,
        today: Callable[[], str] = utc_today,
    ) -> None:
        for name, value in (("max_usd", max_usd), ("max_tokens", max_tokens)):
            if value is not None and value < 0:
                raise ValueError(f"ledger {name} must not be negative, got {value}")
        if max_calls is not None and max_calls < 0:
            raise ValueError(f"ledger max_calls must not be negative, got {max_calls}")
        self.engine = engine
        self.scope = scope
        self.max_usd = max_usd
        self.max_tokens = max_tokens
        self.max_calls = max_calls
        self.today = today

    def __repr__(self) -> str:
        return (
            f"Ledger(scope={self.scope!r}, max_usd={self.max_usd}, "
            f"max_tokens={self.max_tokens}, max_calls={self.max_calls})"
        )

    @property
    def label(self) -> str:
        return f"{self.scope} daily budget"

    def reserve(self, worst_usd: float | None, worst_tokens: int) -> Reservation:
        """Hold one call's worst case, or raise BudgetExceededError (the call must not be made).

        `worst_usd` None means the model is unpriced: allowed only without a USD cap.
        """
        if worst_tokens < 0 or (worst_usd is not None and worst_usd < 0):
            raise ValueError("a worst case must not be negative")
        if worst_usd is None and self.max_usd is not None:
            raise LLMConfigError(
                f"the {self.label} caps USD (max_usd={self.max_usd}) but the model has no "
                "configured price: set price_input_per_mtok/price_output_per_mtok"
            )
        usd = worst_usd or 0.0
        day = self.today()
        c = BUDGET_LEDGER.c
        room = [c.scope == self.scope, c.day == day]
        if self.max_usd is not None:
            room.append(c.usd_spent + c.usd_reserved + usd <= self.max_usd + _USD_EPSILON)
        if self.max_tokens is not None:
            room.append(c.tokens_spent + c.tokens_reserved + worst_tokens <= self.max_tokens)
        if self.max_calls is not None:
            room.append(c.calls + c.calls_reserved + 1 <= self.max_calls)
        with self.engine.begin() as conn:
            self._ensure_row(conn, day)
            taken = conn.execute(
                update(BUDGET_LEDGER)
                .where(*room)
                .values(
                    usd_reserved=c.usd_reserved + usd,
                    tokens_reserved=c.tokens_reserved + worst_tokens,
                    calls_reserved=c.calls_reserved + 1,
                )
                .returning(c.calls_reserved)
            ).first()
            if taken is None:
                raise BudgetExceededError(self._refusal(conn, day, worst_usd, worst_tokens))
        return Reservation(scope=self.scope, day=day, usd=usd, tokens=worst_tokens)

    def settle(self, reservation: Reservation, usd: float | None, tokens: int) -> None:
        """Replace a reservation by what the attempt really spent (one call, on its day)."""
        c = BUDGET_LEDGER.c
        with self.engine.begin() as conn:
            changed = conn.execute(
                self._unreserve(reservation).values(
                    usd_spent=c.usd_spent + (usd or 0.0),
                    tokens_spent=c.tokens_spent + tokens,
                    calls=c.calls + 1,
                )
            ).rowcount
        if not changed:
            _log.warning(
                "%s: no ledger row for %s to settle a call in", self.label, reservation.day
            )

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back uncharged: its call was never sent."""
        with self.engine.begin() as conn:
            conn.execute(self._unreserve(reservation))

    def spent(self, day: str | None = None) -> dict[str, Any]:
        """The day's row (today by default) with the caps, for status and reports."""
        day = day or self.today()
        with self.engine.connect() as conn:
            row = conn.execute(
                select(BUDGET_LEDGER).where(
                    BUDGET_LEDGER.c.scope == self.scope, BUDGET_LEDGER.c.day == day
                )
            ).first()
        values = dict(row._mapping) if row is not None else {}
        return {
            "scope": self.scope,
            "day": day,
            "usd_spent": float(values.get("usd_spent", 0.0)),
            "tokens_spent": int(values.get("tokens_spent", 0)),
            "calls": int(values.get("calls", 0)),
            "usd_reserved": float(values.get("usd_reserved", 0.0)),
            "tokens_reserved": int(values.get("tokens_reserved", 0)),
            "calls_reserved": int(values.get("calls_reserved", 0)),
            "max_usd": self.max_usd,
            "max_tokens": self.max_tokens,
            "max_calls": self.max_calls,
        }

    # -- internals --------------------------------------------------------------------------

    def _ensure_row(self, conn: Connection, day: str) -> None:
        conn.execute(
            upsert(conn, BUDGET_LEDGER)
            .values(scope=self.scope, day=day)
            .on_conflict_do_nothing(index_elements=["scope", "day"])
        )

    def _unreserve(self, reservation: Reservation) -> Update:
        c = BUDGET_LEDGER.c
        # Clamped at zero: float sums drift, and an operator may have cleared reservations.
        usd_left = c.usd_reserved - reservation.usd
        tokens_left = c.tokens_reserved - reservation.tokens
        return (
            update(BUDGET_LEDGER)
            .where(c.scope == reservation.scope, c.day == reservation.day)
            .values(
                usd_reserved=case((usd_left > 0, usd_left), else_=0.0),
                tokens_reserved=case((tokens_left > 0, tokens_left), else_=0),
                calls_reserved=case((c.calls_reserved > 1, c.calls_reserved - 1), else_=0),
            )
        )

    def _refusal(self, conn: Connection, day: str, worst_usd: float | None, tokens: int) -> str:
        row = conn.execute(
            select(BUDGET_LEDGER).where(
                BUDGET_LEDGER.c.scope == self.scope, BUDGET_LEDGER.c.day == day
            )
        ).one()
        parts = []
        if self.max_usd is not None:
            parts.append(
                f"${row.usd_spent:.6f} spent + ${row.usd_reserved:.6f} reserved of "
                f"max_usd={self.max_usd}"
            )
        if self.max_tokens is not None:
            parts.append(
                f"{row.tokens_spent} spent + {row.tokens_reserved} reserved of "
                f"max_tokens={self.max_tokens} tokens"
            )
        if self.max_calls is not None:
            parts.append(
                f"{row.calls} made + {row.calls_reserved} in flight of "
                f"max_calls={self.max_calls} calls"
            )
        cost = f"${worst_usd:.6f} and " if worst_usd is not None else ""
        return (
            f"the {self.label} ({day} UTC) cannot cover this call (up to {cost}{tokens} "
            f"tokens): {'; '.join(parts)}; the call was not made"
        )


class RateLimiter:
    """At most `requests_per_minute` requests per fixed one-minute window for one LLM
    profile, counted in `rate_windows` across every worker using `engine`.

    `acquire()` waits for the next window when this one is full; `clock` (wall clock, epoch
    seconds: every machine must agree on the window) and `sleep` are injectable for tests.
    """

    def __init__(
        self,
        engine: Engine,
        profile_name: str,
        requests_per_minute: int,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        max_wait_s: float | None = None,
        jitter_s: float = 0.5,
    ) -> None:
        if requests_per_minute < 1:
            raise ValueError(f"requests_per_minute must be at least 1, got {requests_per_minute}")
        if max_wait_s is not None and max_wait_s < 0:
            raise ValueError(f"max_wait_s must not be negative, got {max_wait_s}")
        self.engine = engine
        self.profile_name = profile_name
        self.requests_per_minute = requests_per_minute
        self.clock = clock
        self.sleep = sleep
        self.max_wait_s = max_wait_s
        self.jitter_s = jitter_s

    def __repr__(self) -> str:
        return f"RateLimiter({self.profile_name!r}, {self.requests_per_minute}/min)"

    def acquire(self, *, max_wait_s: float | None = None) -> int:
        """Take one request slot, waiting for a later window if need be; returns the slot's
        number in its window (1 = first).

        Raises TransientError (with `retry_after` = seconds to the next window) rather than
        wait longer than `max_wait_s` (the tighter of this argument and the constructor's).
        """
        limits = [w for w in (self.max_wait_s, max_wait_s) if w is not None]
        limit = min(limits) if limits else None
        started = self.clock()
        while True:
            now = self.clock()
            window = int(now // WINDOW_S) * WINDOW_S
            taken = self._take(window)
            if taken is not None:
                return taken
            wait = window + WINDOW_S - now + random.uniform(0, self.jitter_s)
            if limit is not None and now - started + wait > limit:
                raise TransientError(
                    f"profile {self.profile_name!r} has used its {self.requests_per_minute} "
                    f"requests per minute across the fleet; the next window opens in "
                    f"{wait:.1f}s, beyond the {max(0.0, limit - (now - started)):.1f}s this "
                    "call may still wait",
                    retry_after=wait,
                )
            _log.info(
                "rate limit of profile %r (%d/min) reached; waiting %.1fs for the next window",
                self.profile_name,
                self.requests_per_minute,
                wait,
            )
            self.sleep(wait)

    def _take(self, window: int) -> int | None:
        c = RATE_WINDOWS.c
        with self.engine.begin() as conn:
            opened = conn.execute(
                upsert(conn, RATE_WINDOWS)
                .values(profile=self.profile_name, window_start=window, requests=0)
                .on_conflict_do_nothing(index_elements=["profile", "window_start"])
            ).rowcount
            if opened:  # the first request of a window tidies away the profile's old ones
                conn.execute(
                    delete(RATE_WINDOWS).where(
                        c.profile == self.profile_name,
                        c.window_start < window - _KEEP_WINDOWS_S,
                    )
                )
            row = conn.execute(
                update(RATE_WINDOWS)
                .where(
                    c.profile == self.profile_name,
                    c.window_start == window,
                    c.requests < self.requests_per_minute,
                )
                .values(requests=c.requests + 1)
                .returning(c.requests)
            ).first()
        return None if row is None else int(row[0])


def server_clock(engine: Engine) -> Callable[[], float]:
    """The database server's clock (Unix seconds), for a RateLimiter shared by machines:
    windows must be the same minute for every worker, whatever their own clocks say."""

    def now() -> float:
        with engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                query = "SELECT extract(epoch FROM clock_timestamp())"
            else:
                query = "SELECT (julianday('now') - 2440587.5) * 86400.0"
            return float(conn.exec_driver_sql(query).scalar_one())

    return now
