"""Printing: one JSON document on stdout with --json, readable text otherwise."""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime
from typing import Any

import click

from dreaming.errors import ExitCode


def json_default(value: Any) -> Any:
    """What JSON has no type for: moments in ISO 8601 (`2026-03-10T03:00:00+00:00`, never
    str()'s space form), anything else as its text."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


# What a terminal acts on rather than shows: C0 controls but newline and tab (ESC starts CSI
# and OSC sequences: clearing the screen, setting the title, writing the clipboard; BEL ends
# OSC; CR overwrites a line), DEL, the C1 controls (U+009B is CSI on its own), and the
# bidirectional overrides and isolates that reorder what is shown.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """Text as it may reach a terminal: every control character it would act on shown as an
    escape (`\\x1b`, `\\x07`, `\\x9b`, `\\u202e`); newlines and tabs kept. Stored text (entry
    and candidate text, a model's reason, transcript lines) is untrusted: every command that
    prints it prints through `echo`."""
    return _CONTROLS.sub(_escaped, text)


def echo(message: str = "", *, err: bool = False, nl: bool = True) -> None:
    """`click.echo` of text made `printable`: what every command prints goes through here."""
    click.echo(printable(message), err=err, nl=nl)


_EMITTED: list[bool] = [False]  # whether this invocation printed its document yet


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=json_default))
    _EMITTED[0] = True


def emitted() -> bool:
    return _EMITTED[0]


def reset() -> None:
    """A new invocation (tests run many in one process): no document printed yet."""
    _EMITTED[0] = False


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
    echo(message, err=True)


# Exit statuses a cron line can alert on: `dreaming.errors.ExitCode` (the README's table).
EXIT_FAILED = ExitCode.FAILED
EXIT_DEGRADED = ExitCode.DEGRADED
EXIT_BUSY = ExitCode.BUSY
