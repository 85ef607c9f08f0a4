"""A package's face whose submodules load when first asked for.

`dreaming.ingest`, `dreaming.memory` and `dreaming.store` list what other packages may take
from them in `__all__`; importing the package (as `dreaming.cli` does, through its commands)
must cost nothing until a stage needs one of its modules, so each submodule on the face is
imported by the module `__getattr__` this builds (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection
from types import ModuleType


def lazy_submodules(package: str, names: Collection[str]) -> Callable[[str], ModuleType]:
    """The module `__getattr__` of `package`: `names` import on first use, anything else is
    the AttributeError a plain module raises."""
    known = frozenset(names)

    def load(name: str) -> ModuleType:
        if name in known:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return load
