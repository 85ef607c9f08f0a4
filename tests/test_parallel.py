"""`dreaming run --workers N`: agents in worker processes give the same state as one by one."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dreaming import demo
from dreaming.cli import cli
from tests.deep_helpers import tree_hash


def run(root: Path, *args: str) -> dict:
    from dreaming.cli import _run  # noqa: F401

    result = CliRunner().invoke(
        cli,
        ["--state-dir", str(root), "--config", str(root / "dreaming.toml"), "run", *args, "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def comparable(root: Path) -> dict[str, str]:
    # The workspaces (MEMORY.md, DREAMS.md, corpus); databases hold wall-clock run times.
    return tree_hash(root / "workspace") | {
        "bob/" + k: v for k, v in tree_hash(root / "workspace-bob").items()
    }


def test_parallel_equals_sequential(tmp_path: Path) -> None:
    one, two = demo.build(tmp_path / "one"), demo.build(tmp_path / "two")
    seq = run(one)
    par = run(two, "--workers", "2")
    assert [r["outcome"] for r in par["runs"]] == ["ok", "ok"]
    assert comparable(one) == comparable(two)
    for agent in ("main", "bob"):
        assert seq["agents"][agent]["deep"]["entries"] == par["agents"][agent]["deep"]["entries"]
