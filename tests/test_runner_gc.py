"""A night collects young garbage less often (gc_tuning.fewer_young_collections): CPython's default
(every 700 container allocations) cost light 4% of its time for next to nothing freed."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from dreaming import runner
from dreaming.app import App
from dreaming.phases.light import LightPhase
from tests.openclaw_builder import FakeOpenClaw


def _session(root: Path) -> None:
    FakeOpenClaw(root).session("main", "s1", [("user", "I live in Lisbon.")])


def test_a_night_raises_the_young_threshold_and_restores_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[int, int, int]] = []

    class Spy(LightPhase):
        def run(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(gc.get_threshold())
            return super().run(*args, **kwargs)

    monkeypatch.setattr(runner, "LightPhase", Spy)
    _session(tmp_path)
    before = gc.get_threshold()
    app = App.open(tmp_path, None, env={})
    try:
        [light] = runner.run_light(app)
    finally:
        app.close()
    assert light["corpus_lines"] == 1
    assert seen == [(max(before[0], 20_000), *before[1:])]
    assert gc.get_threshold() == before


def test_the_threshold_is_restored_when_the_night_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken(LightPhase):
        def run(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("boom")

    monkeypatch.setattr(runner, "LightPhase", Broken)
    _session(tmp_path)
    before = gc.get_threshold()
    app = App.open(tmp_path, None, env={})
    try:
        with pytest.raises(RuntimeError, match="boom"):
            runner.run_light(app)
    finally:
        app.close()
    assert gc.get_threshold() == before


# -- start-up: no collection until the command has its App ----------------------------------


def _in_a_fresh_interpreter(code: str) -> dict[str, Any]:
    """Run `code` in a new Python (collection state is per process); it prints one JSON."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_command_line_collects_again_once_its_app_is_open(tmp_path: Path) -> None:
    """`dreaming` pauses collection while it imports the library, and turns it back on with
    what start-up made frozen (never walked again) once the command has its App."""
    _session(tmp_path)
    seen = _in_a_fresh_interpreter(
        "import gc, json, sys\n"
        "from dreaming.cli import _main\n"
        "from dreaming.app import App\n"
        "states = []\n"
        "opened = App.open.__func__\n"
        "def spy(cls, *a, **k):\n"
        "    states.append(gc.isenabled())\n"
        "    return opened(cls, *a, **k)\n"
        "App.open = classmethod(spy)\n"
        f"sys.argv = ['dreaming', '--state-dir', {str(tmp_path)!r}, 'run', '--phase', 'light']\n"
        "try:\n"
        "    _main.main()\n"
        "except SystemExit as stop:\n"
        "    code = stop.code\n"
        "print(json.dumps({'code': code, 'while_opening': states, 'after': gc.isenabled(),"
        " 'frozen': gc.get_freeze_count()}))\n"
    )
    assert seen["code"] in (0, None)
    assert seen["while_opening"] == [False]  # the imports and the opening: no collection
    assert seen["after"] is True
    assert seen["frozen"] > 10_000  # the modules, classes and settings start-up made


def test_a_night_never_runs_without_collection() -> None:
    """A caller that paused collection for start-up and never said it was done (the demo
    opens its App itself) still gets its night collected; one that disabled collection
    for its own reasons keeps it off."""
    seen = _in_a_fresh_interpreter(
        "import gc, json\n"
        "from dreaming import gc_tuning\n"
        "gc_tuning.pause_for_start_up()\n"
        "paused = gc.isenabled()\n"
        "states = []\n"
        "gc_tuning.fewer_young_collections(lambda: states.append(gc.isenabled()))()\n"
        "gc.disable()\n"
        "gc_tuning.pause_for_start_up()\n"
        "gc_tuning.start_up_done()\n"
        "print(json.dumps({'paused': paused, 'night': states, 'own': gc.isenabled()}))\n"
    )
    assert seen == {"paused": False, "night": [True], "own": False}
