"""Printing: one JSON document on stdout with --json, readable text otherwise."""

from __future__ import annotations

import json
import sys
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


def is_tty() -> bool:
    return sys.stderr.isatty()


def note(message: str) -> None:
    """Diagnostics go to stderr so stdout stays machine-readable."""
    click.echo(message, err=True)
