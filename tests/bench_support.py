"""What the bench scripts' tests share: a bench module imported by name, and one light run
over a benchmark set's transcripts."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from dreaming import runner
from dreaming.app import App

BENCH = Path(__file__).resolve().parents[1] / "bench"


def bench_module(name: str) -> ModuleType:
    """`bench/<name>.py`, imported as the scripts import each other: by name, from bench/."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


def light_over(agents: Path, state: Path) -> list[dict[str, Any]]:
    """Light over a copy of a set's `agents` folder in a fresh state: each agent's report."""
    shutil.copytree(agents, state / "agents")
    app = App.open(state, None, env={})
    try:
        return runner.run_light(app)
    finally:
        app.close()
