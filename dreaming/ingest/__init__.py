"""Ingest: what the agents heard, turned into admitted corpus lines and scored candidates.

In the order a night reads them: `sources` (which transcript files belong to which agent),
`transcripts` (the readers, one per format), `tags` (injected blocks stripped through the
registry), `admission` and `tombstones` (whose words may enter, and what never may again),
`sessions` (each session file's record: its admission and metadata),
`corpus` (the admitted lines and their dated files), `claims` (the statements a line makes),
`salience` and `scoring` (what a claim tells, and its score), `candidates` (claims folded
across sessions, with their evidence). The light phase (`dreaming.phases.light`) drives them.
"""

from __future__ import annotations

from dreaming.faces import lazy_submodules

__all__ = [
    "candidates",
    "claims",
    "corpus",
    "grouping",
    "salience",
    "sessions",
    "slots",
    "sources",
    "tags",
    "tombstones",
]


# The face is the submodules; each loads when first asked for.
__getattr__ = lazy_submodules(__name__, __all__)


def __dir__() -> list[str]:
    return sorted(__all__)
