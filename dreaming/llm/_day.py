"""The UTC day LLM spending is counted in: the per-agent spend (calls.py), the fleet ledger
(ledger.py) and `status` all use this one definition of "today"."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_today(now: datetime | None = None) -> str:
    """The UTC day ('YYYY-MM-DD') of `now` (default: the current time)."""
    return (now or datetime.now(UTC)).astimezone(UTC).date().isoformat()
