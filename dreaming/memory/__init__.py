"""Memory: candidates decided into entries, and MEMORY.md kept in agreement with them.

`gates` (which candidates may be promoted), `decisions` (the model's reply schema, prompts and
validation), `lineage` (applying decisions: entries, origins, evidence; code alone owns
provenance), `entry_index` (the search index of live entries), `sanitize` (entry text
hygiene), `memory_file` and `memory_sync` (MEMORY.md parsed, rendered and written across
crashes and human edits), `journal` (undo images), `review` (proposals staged for a person),
`diary` (DREAMS.md). The REM and deep phases (`dreaming.phases`) drive them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = [
    "archive",
    "capacity",
    "diary",
    "entry_index",
    "gates",
    "journal",
    "lineage",
    "memory_file",
    "memory_sync",
    "review",
]


def __getattr__(name: str) -> ModuleType:
    # The face is the submodules; each loads when first asked for, so importing the package
    # (as `dreaming.cli` does, through its commands) costs nothing until a stage needs one.
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
