"""bench/night.py: agents' nights in a child process per revision, reported per agent-night
with the output each revision wrote; revisions whose output differs are flagged."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.bench_support import bench_module


@pytest.fixture(scope="module")
def night() -> ModuleType:
    return bench_module("night")


def test_the_work_tree_measured_in_a_child(
    night: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--tree", "--agents", "1", "--sessions", "3", "--rounds", "1", "--json"]
    code = night.main([*argv, "--work-dir", str(tmp_path)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["same_output"] is True
    [row] = report["revisions"]
    assert row["revision"] == "work tree" and row["ratio"] == 1.0
    assert row["counts"]["corpus_lines"] > 0 and len(row["fingerprints"]) == 1
    assert row["night"]["median_ms"] > 0
    assert row["light"]["median_ms"] > 0  # the phases as the night's summary recorded them


def _run(cpu_s: float, fingerprint: str) -> dict[str, Any]:
    nights = [{"cpu_s": cpu_s, "phases_s": {"light": cpu_s / 2}, "outcome": "ok"}]
    counts = {"corpus_lines": 10, "candidates": 3, "entries": 1}
    return {"nights": nights, "counts": counts, "fingerprint": fingerprint}


def test_ratios_to_the_first_revision_and_differing_output_flagged(night: ModuleType) -> None:
    same = night._report({"a": [_run(0.2, "x")], "b": [_run(0.1, "x")]}, ["a", "b"])
    assert same["same_output"] is True
    assert [r["ratio"] for r in same["revisions"]] == [1.0, 0.5]
    assert same["revisions"][1]["rest"]["median_ms"] == pytest.approx(50.0)

    differ = night._report({"a": [_run(0.2, "x")], "b": [_run(0.2, "y")]}, ["a", "b"])
    assert differ["same_output"] is False
    assert "OUTPUTS DIFFER" in night._table(differ)
