"""bench/bignight.py: one night on a copy of a grown state per revision, whole processes,
with what each night wrote; revisions whose nights wrote different things are flagged."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dreaming import runner
from dreaming.app import App
from tests.bench_support import bench_module
from tests.openclaw_builder import FakeOpenClaw
from tests.test_deep_readings import STATEMENTS, said


@pytest.fixture(scope="module")
def bignight() -> ModuleType:
    return bench_module("bignight")


def _grown(root: Path) -> Path:
    """A state after one night, with sessions said since for the next one."""
    oc = FakeOpenClaw(root)
    for n, statement in enumerate(STATEMENTS[:12]):
        said(oc, f"s{n}", statement, day=n)
        if n == 6:
            app = App.open(root, None, env={})
            runner.run(app, ["light", "rem", "deep"])
            app.close()
    return root


def test_a_night_on_a_copy_measured_in_a_child(
    bignight: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = _grown(tmp_path / "state")
    before = sorted(p.name for p in state.rglob("*"))
    argv = ["--state", str(state), "--tree", "--rounds", "1", "--budget", "400", "--json"]
    code = bignight.main([*argv, "--work-dir", str(tmp_path / "work")])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["same_output"] is True and report["budget"] == 400
    [row] = report["revisions"]
    assert row["revision"] == "work tree" and row["ratio"] == 1.0
    assert row["wall_s"]["median"] > 0 and row["deep_s"]["median"] > 0
    assert sum(row["did"]["actions"].values()) > 0 and row["did"]["archived"] > 0
    assert sorted(p.name for p in state.rglob("*")) == before  # the night ran on a copy


def _run(wall: float, fingerprint: str) -> dict[str, Any]:
    return {
        "wall_s": wall,
        "cpu_s": wall,
        "peak_rss_mb": 100.0,
        "phases_s": {"light": 0.1, "rem": 0.1, "deep": wall / 2},
        "actions": {"add": 1},
        "entries": 1,
        "archived": 0,
        "fingerprint": fingerprint,
    }


def test_ratios_to_the_first_revision_and_differing_output_flagged(bignight: ModuleType) -> None:
    args = bignight._parse(["--state", "x"])
    same = bignight._report({"a": [_run(2.0, "x")], "b": [_run(1.0, "x")]}, ["a", "b"], args)
    assert same["same_output"] is True
    assert [r["ratio"] for r in same["revisions"]] == [1.0, 0.5]
    differ = bignight._report({"a": [_run(2.0, "x")], "b": [_run(2.0, "y")]}, ["a", "b"], args)
    assert differ["same_output"] is False
    assert "OUTPUTS DIFFER" in bignight._table(differ)
