"""A package's names that load their module when first used (PEP 562): what only some
commands need (the HTTP client stack, deep's model machinery) stays out of every start-up.
Imports nothing of dreaming, so any package's `__init__` may use it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: each name of `where` comes from the module it
    maps to, imported on first use."""

    def getattr_(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return getattr_
