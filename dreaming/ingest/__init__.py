"""Ingest: what the agents heard, turned into admitted corpus lines and scored candidates.

In the order a night reads them: `sources` (which transcript files belong to which agent),
`transcripts` (the readers, one per format), `tags` (injected blocks stripped through the
registry), `admission` and `tombstones` (whose words may enter, and what never may again),
`sessions` (each session file's record: its admission and metadata),
`corpus` (the admitted lines and their dated files), `claims` (the statements a line makes),
`salience` and `scoring` (what a claim tells, and its score), `candidates` (claims folded
across sessions, with their evidence). The light phase (`dreaming.phases.light`) drives them.
Deep reads `slots` (the facts a statement fills) and `statements` (the statements an entry
is made of) to keep memory current.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = [
    "candidates",
    "claims",
    "corpus",
    "grouping",
    "salience",
    "sessions",
    "slots",
    "sources",
    "statements",
    "tags",
    "tombstones",
]


def __getattr__(name: str) -> ModuleType:
    # The face is the submodules; each loads when first asked for, so importing the package
    # (as `dreaming.cli` does, through its commands) costs nothing until a stage needs one.
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
