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
