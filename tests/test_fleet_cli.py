"""Fleet settings and commands without a database: clear errors, paths as documented."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dreaming import demo
from dreaming.app import App
from dreaming.cli import cli
from dreaming.config import load_settings
from dreaming.errors import ConfigError


def invoke(root: Path, *args: str) -> tuple[int, str]:
    from dreaming.cli import _jobs, _scheduler, _status, _worker  # noqa: F401  (registers)

    result = CliRunner().invoke(cli, ["--state-dir", str(root), *args])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    "args",
    [
        ("worker", "--drain"),
        ("jobs", "run", "nightly", "--executor", "procrastinate"),
        ("scheduler", "--executor", "procrastinate"),
    ],
)
def test_fleet_commands_need_a_database_url(tmp_path: Path, args: tuple[str, ...]) -> None:
    root = demo.build(tmp_path / "s")
    code, output = invoke(root, *args)
    assert code != 0
    assert "database_url" in output


def test_database_url_must_be_postgresql(tmp_path: Path) -> None:
    root = demo.build(tmp_path / "s")
    config = root / "dreaming.toml"
    config.write_text('database_url = "mysql://x@y/z"\n' + config.read_text())
    code, output = invoke(root, "status")
    assert code != 0 and "postgresql://" in output


def test_fleet_settings_are_validated_and_workspace_root_resolved(tmp_path: Path) -> None:
    config = tmp_path / "dreaming.toml"
    config.write_text('[fleet]\nworkspace_root = "shared/ws"\nstalled_after_s = 5\n')
    settings = load_settings(config)
    assert settings.fleet.workspace_root == tmp_path / "shared" / "ws"
    app = App.open(tmp_path / "state", config, env={})
    assert app.paths.memory_file("a7") == tmp_path / "shared" / "ws" / "a7" / "MEMORY.md"
    config.write_text("[fleet]\nstaled_after_s = 5\n")
    with pytest.raises(ConfigError, match="staled_after_s"):
        load_settings(config)
    config.write_text("[fleet]\nheartbeat_s = 0\n")
    with pytest.raises(ConfigError, match="heartbeat_s"):
        load_settings(config)
