"""`dreaming demo`: where it writes, and that its night shows what the README promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dreaming.cli import cli
from dreaming.memory.memory_file import read


def test_demo_writes_demo_state_by_default_as_the_readme_and_make_demo_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dreaming.cli import _demo  # noqa: F401  (registers)

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["demo", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["state_dir"] == str(tmp_path / "demo-state")
    assert (tmp_path / "demo-state" / "dreaming.toml").is_file()
    assert not (tmp_path / "dreaming-demo").exists()

    # Bob says twice, in other words, that deploys wait for the QA sign-off: one entry.
    bob = next(a for a in report["agents"] if a["agent"] == "bob")
    lines = [b.text for b in read(Path(bob["memory"])).blocks]
    fridays = [line for line in lines if "Fridays" in line]
    assert fridays == ["2026-03-03 We deploy on Fridays only after the QA sign-off."]
