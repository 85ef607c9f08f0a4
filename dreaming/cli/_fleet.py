"""What the fleet-aware commands share: the --executor option and the fleet check."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from dreaming.errors import StateError

if TYPE_CHECKING:
    from dreaming.app import App

F = TypeVar("F", bound=Callable[..., Any])


def executor_option(here: str) -> Callable[[F], F]:
    """--executor in-process|procrastinate; `here` says what in-process does."""
    return click.option(
        "--executor",
        type=click.Choice(["in-process", "procrastinate"]),
        default="in-process",
        show_default=True,
        help=f"in-process: {here}. procrastinate: enqueue one task per agent for fleet "
        "workers (`dreaming worker`; needs database_url and the fleet extra).",
    )


def require_fleet(app: App, what: str) -> str:
    """The fleet database URL, or a clear error naming `what` needed it."""
    if app.settings.database_url is None:
        raise StateError(f"{what} needs database_url in the settings (docs/fleet.md)")
    return app.settings.database_url
