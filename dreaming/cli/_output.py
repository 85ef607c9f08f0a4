"""Printing: one JSON document on stdout with --json, readable text otherwise."""

from __future__ import annotations

import json
import sys
from typing import Any

import click


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def is_tty() -> bool:
    return sys.stderr.isatty()


def note(message: str) -> None:
    """Diagnostics go to stderr so stdout stays machine-readable."""
    click.echo(message, err=True)


# Exit statuses a cron line can alert on (the README lists them): 2 is a usage, settings
# or state-folder error (click's own usage errors exit 2 too).
EXIT_FAILED = 1
EXIT_DEGRADED = 3
