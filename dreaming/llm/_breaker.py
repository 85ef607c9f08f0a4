"""The process's circuit breaker: after a transport failure that retries did not cure, no
agent in this process sends anything more to that endpoint for a while.

A dead endpoint would otherwise cost every remaining batch its full retry loop (seconds of
backoff per batch, and a charge per attempt that was sent), and every agent of a fleet the
same again: a thousand agents would sleep for hours. One breaker lives in each process (the
`App`), shared by every client every agent's run makes: once it opens, the rest of the run
falls back at once, and so does every task a fleet worker runs within `window_s`. A later
run (a new process, or a scheduled fire after the window) and `dreaming llm check` try the
endpoint afresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from dreaming.errors import EndpointDownError

_log = logging.getLogger("dreaming.llm")


class CircuitBreaker:
    """Endpoints (base URLs) given up on, with the failure that opened each; an endpoint is
    asked again once `window_s` has passed since it opened (None: never in this process)."""

    def __init__(
        self, window_s: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window_s = window_s
        self._clock = clock
        self._open: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def _reason(self, endpoint: str) -> str | None:
        """The failure that holds `endpoint` open now, if one does (lock held)."""
        found = self._open.get(endpoint)
        if found is None:
            return None
        reason, since = found
        if self.window_s is not None and self._clock() - since >= self.window_s:
            del self._open[endpoint]  # the window passed: the endpoint is tried again
            return None
        return reason

    def check(self, endpoint: str) -> None:
        """Raise EndpointDownError when `endpoint` failed for good within the window."""
        with self._lock:
            reason = self._reason(endpoint)
        if reason is not None:
            raise EndpointDownError(
                f"{endpoint} is not asked again for now (it failed earlier: {reason}); "
                "`dreaming llm check` tries it"
            )

    def trip(self, endpoint: str, reason: str) -> None:
        with self._lock:
            if self._reason(endpoint) is not None:
                return
            self._open[endpoint] = (reason, self._clock())
        _log.warning("%s: circuit open, every agent falls back: %s", endpoint, reason)

    @property
    def opened(self) -> dict[str, str]:
        """Each open endpoint and the failure that opened it."""
        with self._lock:
            return {e: r for e in list(self._open) if (r := self._reason(e)) is not None}


# How long an endpoint that failed for good stays unasked in a long-lived process (the
# scheduler, a fleet worker): long enough to spare a fleet's night, short enough that the
# next scheduled fire tries again.
WINDOW_S = 600.0
