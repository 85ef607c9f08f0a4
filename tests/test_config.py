from __future__ import annotations

from pathlib import Path

import pytest

from dreaming.config import Paths, Settings, find_config, load_settings
from dreaming.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "dreaming.toml"
    p.write_text(text)
    return p


def test_empty_file_is_valid_defaults(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, ""))
    assert s.read_state_dir is True
    assert s.exclude_sessions.hook_external_content_sources == ()


def test_unknown_top_level_key_names_file_and_key(tmp_path: Path) -> None:
    p = write(tmp_path, "excludeSesions = {}\n")
    with pytest.raises(ConfigError) as err:
        load_settings(p)
    assert str(p) in str(err.value)
    assert "excludeSesions" in str(err.value)


def test_unknown_nested_key_is_named(tmp_path: Path) -> None:
    p = write(tmp_path, "[excludeSessions]\nhookSources = ['gmail']\n")
    with pytest.raises(ConfigError, match=r"excludeSessions\.hookSources"):
        load_settings(p)


def test_policy_keys_in_camel_case(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "[excludeSessions]\nhookExternalContentSources = ['gmail']\nchannels = ['discord']\n"
        "chatTypes = ['group']\n",
    )
    s = load_settings(p)
    assert s.exclude_sessions.hook_external_content_sources == ("gmail",)
    assert s.exclude_sessions.channels == ("discord",)
    assert s.exclude_sessions.chat_types == ("group",)


def test_wrong_type_is_reported(tmp_path: Path) -> None:
    p = write(tmp_path, "[corpus]\nmax_line_chars = 'many'\n")
    with pytest.raises(ConfigError, match=r"corpus\.max_line_chars"):
        load_settings(p)


def test_invalid_toml(tmp_path: Path) -> None:
    p = write(tmp_path, "[[[")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(p)


def test_relative_paths_resolve_against_the_file(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "[[sources]]\nkind = 'claude-code'\npath = 'cc'\nagent = 'claude'\n"
        "[agents.main]\nworkspace = 'ws'\n",
    )
    s = load_settings(p)
    assert s.sources[0].path == tmp_path / "cc"
    assert s.agents["main"].workspace == tmp_path / "ws"


def test_find_config_order(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    assert find_config(None, state, {}) is None
    (state / "dreaming.toml").write_text("")
    assert find_config(None, state, {}) == state / "dreaming.toml"
    assert find_config(None, state, {"DREAMING_CONFIG": "/x.toml"}) == Path("/x.toml")
    assert find_config(Path("/y.toml"), state, {"DREAMING_CONFIG": "/x.toml"}) == Path("/y.toml")


def test_workspace_follows_openclaw_convention(tmp_path: Path) -> None:
    paths = Paths(tmp_path, Settings())
    assert paths.workspace("main") == tmp_path / "workspace"
    assert paths.workspace("bob") == tmp_path / "workspace-bob"
    assert (
        paths.corpus_dir("bob")
        == tmp_path / "workspace-bob" / "memory" / ".dreams" / "session-corpus"
    )
