"""Progress ticks: what a long phase reports while it works, for whoever shows it.

Phases call a `Progress` with a `Tick` after each unit of work (a transcript file in light,
a batch in deep). The library never prints; the CLI turns ticks into a bar on a terminal
and one summary line per phase elsewhere (`dreaming.cli._progress`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Tick:
    phase: str  # "light" | "deep"
    agent: str
    done: int  # units finished so far, of `total`
    total: int
    unit: str  # "files" | "batches"
    bytes_done: int = 0  # light: transcript bytes of the files finished so far
    bytes_total: int = 0
    item: str = ""  # what was just finished (a session id), for the display


Progress = Callable[[Tick], None]
