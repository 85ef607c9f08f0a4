"""The night's phases, in the order they run: `light` (transcripts into the corpus and
candidates, never an LLM), `rem` (recurring themes and the dream diary), `deep` (candidates
decided into memory). Each drives the stages in `dreaming.ingest` and `dreaming.memory`.

`Phase` names them once, for the runner, the jobs and the CLI alike."""

from enum import StrEnum


class Phase(StrEnum):
    """The phases, in the order a night runs them."""

    LIGHT = "light"
    REM = "rem"
    DEEP = "deep"


PHASES: tuple[Phase, ...] = tuple(Phase)

__all__ = ["PHASES", "Phase"]
