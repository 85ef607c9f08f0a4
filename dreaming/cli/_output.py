"""Printing: one JSON document on stdout with --json, readable text otherwise."""

from __future__ import annotations

import json
import math
from datetime import date, datetime
from typing import Any

import click


def json_default(value: Any) -> Any:
    """What JSON has no type for: moments in ISO 8601 (`2026-03-10T03:00:00+00:00`, never
    str()'s space form), anything else as its text."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=json_default))


def usd(value: float | None) -> str:
    """Dollars for people: cents as usual, and a smaller amount to two significant digits
    ($0.002, $0.0013), so a cap or a spend that is not zero never reads as $0.00."""
    if value is None:
        return "-"
    if value == 0 or abs(value) >= 1:
        return f"${value:.2f}"
    places = max(2, 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{places}f}"
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents[:2]}{cents[2:].rstrip('0')}"


def note(message: str) -> None:
    """Diagnostics go to stderr so stdout stays machine-readable."""
    click.echo(message, err=True)


# Exit statuses a cron line can alert on (the README lists them): 2 is a usage, settings
# or state-folder error (click's own usage errors exit 2 too).
EXIT_FAILED = 1
EXIT_DEGRADED = 3
