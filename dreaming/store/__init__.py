"""Agent state: the tables (declared as SQLModel classes in `models`, queried through the Core
tables generated from them in `tables`), append-only migrations, engines, the agent lock.

The face: the engine and migration functions below, and the submodules other packages
import by name (`cursors`, `models`, `state` load when first asked for; `engine` and
`migrations` are loaded already).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from dreaming.store.engine import (
    advisory_lock,
    agent_lock,
    open_engine,
    open_shared_engine,
    redact,
)
from dreaming.store.migrations import MIGRATIONS, migrate, schema_version

__all__ = [
    "MIGRATIONS",
    "advisory_lock",
    "agent_lock",
    "cursors",
    "engine",
    "migrate",
    "migrations",
    "models",
    "open_engine",
    "open_shared_engine",
    "redact",
    "schema_version",
    "state",
]
_SUBMODULES = frozenset({"cursors", "models", "state"})


def __getattr__(name: str) -> ModuleType:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
