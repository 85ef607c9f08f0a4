from __future__ import annotations

from pathlib import Path

import pytest

from dreaming.config import Settings, find_config, load_settings
from dreaming.errors import ConfigError
from dreaming.paths import Paths
from dreaming.scheduler import load_job


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


@pytest.mark.parametrize(
    ("toml", "key", "hint"),
    [
        ("[deep]\nbatchsize = 4\n", "deep.batchsize", "batch_size"),
        ("[deep]\nbatchSize = 4\n", "deep.batchSize", "batch_size"),
        ("excludeSesions = {}\n", "excludeSesions", "excludeSessions"),
        ("[excludeSessions]\nchat_type = ['group']\n", "excludeSessions.chat_type", "chat_types"),
        ("[[sources]]\nkind = 'openclaw'\npath = 'x'\nagnet = 'a'\n", "sources.0.agnet", "agent"),
        ("[agents.bob]\nworkspce = 'ws'\n", "agents.bob.workspce", "workspace"),
        (
            "[llm.profiles.local]\nbase_url = 'http://localhost:1'\nmodel = 'm'\ntimeout = 5\n",
            "llm.profiles.local.timeout",
            "timeout_s",
        ),
    ],
)
def test_unknown_key_suggests_the_closest_known_one_at_its_level(
    tmp_path: Path, toml: str, key: str, hint: str
) -> None:
    p = write(tmp_path, toml)
    with pytest.raises(ConfigError) as err:
        load_settings(p)
    assert str(err.value) == f"{p}: unknown key '{key}' (did you mean '{hint}'?)"


def test_unknown_key_with_nothing_close_suggests_nothing(tmp_path: Path) -> None:
    p = write(tmp_path, "[deep]\nzebra = 1\n")
    with pytest.raises(ConfigError) as err:
        load_settings(p)
    assert str(err.value) == f"{p}: unknown key 'deep.zebra'"


def test_validator_messages_lose_pydantics_value_error_prefix(tmp_path: Path) -> None:
    p = write(tmp_path, "[[sources]]\nkind = 'openclaw'\npath = 'x'\nagent = 'a/b'\n")
    with pytest.raises(ConfigError) as err:
        load_settings(p)
    assert str(err.value) == (
        f"{p}: key 'sources.0.agent': 'a/b' is not a valid agent id (a name, not a path)"
    )
    p = write(tmp_path, "[salience]\nfact = ['(']\n")
    with pytest.raises(ConfigError) as err:
        load_settings(p)
    assert "Value error" not in str(err.value)
    assert str(err.value).startswith(f"{p}: key 'salience': fact: '(' is not a regular expression")


def test_job_files_share_the_suggestions_and_plain_messages(tmp_path: Path) -> None:
    job = tmp_path / "nightly.toml"
    job.write_text("[trigger]\ncron = '0 3 * * *'\ntimezon = 'UTC'\n[budget]\ndailymaxusd = 1\n")
    with pytest.raises(ConfigError) as err:
        load_job(job)
    assert str(err.value) == (
        f"{job}: unknown key 'trigger.timezon' (did you mean 'timezone'?); "
        f"{job}: unknown key 'budget.dailymaxusd' (did you mean 'daily_max_usd'?)"
    )
    job.write_text("[trigger]\ncron = '0 3 * *'\n")
    with pytest.raises(ConfigError) as err:
        load_job(job)
    assert str(err.value) == (
        f"{job}: key 'trigger': cron '0 3 * *' must have 5 fields: minute hour day month weekday"
    )


@pytest.mark.parametrize("variable", ["HOME", "PATH", "USER"])
def test_a_key_variable_must_look_like_one(tmp_path: Path, variable: str) -> None:
    """`api_key_env = "HOME"` would send the home folder as a bearer token."""
    p = write(
        tmp_path,
        f'[llm.profiles.x]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        f'api_key_env = "{variable}"\n',
    )
    with pytest.raises(ConfigError, match="does not look like a variable that holds an API key"):
        load_settings(p)


@pytest.mark.parametrize("variable", ["OPENAI_API_KEY", "GROQ_KEY", "HF_TOKEN", "MY_SECRET", ""])
def test_key_variables_that_say_so_are_accepted(tmp_path: Path, variable: str) -> None:
    p = write(
        tmp_path,
        f'[llm.profiles.x]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        f'api_key_env = "{variable}"\n',
    )
    assert load_settings(p).llm.profiles["x"].api_key_env == variable


def test_every_cue_list_of_the_lexicon_can_be_extended_in_settings() -> None:
    """A cue list the lexicon has but `[salience]` does not know could not be extended."""
    import tomllib
    from importlib import resources

    from dreaming.config_cues import SalienceSettings

    lexicon = tomllib.loads(
        resources.files("dreaming.ingest").joinpath("lexicon.toml").read_text("utf-8")
    )
    # `[[groups]]` is MEMORY.md's groups, which name cue lists; every other key is a list.
    lists = {key: value for key, value in lexicon.items() if key != "groups"}
    assert set(lists) <= set(SalienceSettings.model_fields)
