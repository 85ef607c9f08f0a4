"""A run's circuit breaker: after a transport failure that retries did not cure, the run
sends nothing more to that endpoint.

A dead endpoint would otherwise cost every remaining batch its full retry loop (minutes of
backoff per batch, and a charge per attempt that was sent). One breaker lives for one run
and is shared by every client the run makes; the next run tries the endpoint afresh.
"""

from __future__ import annotations

import logging
import threading

from dreaming.errors import EndpointDownError

_log = logging.getLogger("dreaming.llm")


class CircuitBreaker:
    """Endpoints (base URLs) this run has given up on, with the failure that opened each."""

    def __init__(self) -> None:
        self._open: dict[str, str] = {}
        self._lock = threading.Lock()

    def check(self, endpoint: str) -> None:
        """Raise EndpointDownError when `endpoint` failed for good earlier in this run."""
        with self._lock:
            reason = self._open.get(endpoint)
        if reason is not None:
            raise EndpointDownError(
                f"{endpoint} is not asked again in this run (it failed earlier: {reason})"
            )

    def trip(self, endpoint: str, reason: str) -> None:
        with self._lock:
            if endpoint in self._open:
                return
            self._open[endpoint] = reason
        _log.warning("%s: circuit open for the rest of this run: %s", endpoint, reason)

    @property
    def opened(self) -> dict[str, str]:
        """Each open endpoint and the failure that opened it."""
        with self._lock:
            return dict(self._open)
