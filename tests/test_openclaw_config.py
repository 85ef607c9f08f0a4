"""OpenClaw as it is configured (openclaw.json): each agent's MEMORY.md lands where OpenClaw
reads it, memory-core's admission policy keeps sessions out beside dreaming.toml's, and an
agent whose memory OpenClaw's own dreaming consolidates is left to it (one writer)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dreaming import runner
from dreaming.app import App
from dreaming.cli import cli
from dreaming.config import Settings, load_settings
from dreaming.errors import ConfigError
from dreaming.ingest.admission import Status, decide
from dreaming.memory.memory_file import read
from dreaming.messages import SessionFile
from dreaming.openclaw_config import (
    load_openclaw,
    normalize_agent_id,
)
from dreaming.paths import Paths
from tests.openclaw_builder import FakeOpenClaw

DAY = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

OPENCLAW_JSON = """\
// OpenClaw's own configuration: JSON5, with comments and trailing commas.
{
  agents: {
    defaults: {
      workspace: "~/oc/default",   // the default agent's; the others' are under it
      bootstrapMaxChars: 8000,
    },
    list: [
      { id: "main" },                                  // the first: the default agent
      { id: "alice", workspace: "ALICE_WS", },         // its own workspace
      {
        id: "ops",
        // this one agent is consolidated by memory-core's own dreaming
        plugins: { slots: { "memory.dreaming": "memory-core" } },
      },
      { id: "bob" },
    ],
  },
  plugins: {
    slots: { "memory.dreaming": "none" },   // nobody else dreams
    entries: {
      "memory-core": {
        config: {
          dreaming: { enabled: true },
          memoryPolicy: { excludeSessions: { channels: ["discord"], }, },
        },
      },
    },
  },
}
"""


def _config(tmp_path: Path, data: dict[str, Any] | str, env: dict[str, str] | None = None) -> Any:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    text = data if isinstance(data, str) else json.dumps(data)
    (state / "openclaw.json").write_text(text)
    return load_openclaw(state, None, {"HOME": str(tmp_path / "home"), **(env or {})})


def _paths(tmp_path: Path, data: dict[str, Any], settings: Settings | None = None) -> Paths:
    oc = _config(tmp_path, data)
    return Paths(tmp_path / "state", settings or Settings(), oc)


# --- where MEMORY.md lands: OpenClaw's order --------------------------------------------


def test_an_agents_own_workspace_wins_over_the_defaults(tmp_path: Path) -> None:
    paths = _paths(
        tmp_path,
        {
            "agents": {
                "defaults": {"workspace": "/srv/ws"},
                "list": [{"id": "main"}, {"id": "alice", "workspace": "/data/alice"}],
            }
        },
    )
    assert paths.memory_file("alice") == Path("/data/alice/MEMORY.md")
    assert paths.workspace("main") == Path("/srv/ws")  # the default agent: the defaults'
    assert paths.workspace("bob") == Path("/srv/ws/bob")  # the others: under it, by id


def test_the_default_agent_is_the_marked_one_else_the_first(tmp_path: Path) -> None:
    state = tmp_path / "state"
    marked = _paths(
        tmp_path, {"agents": {"list": [{"id": "work"}, {"id": "home", "default": True}]}}
    )
    assert marked.workspace("home") == state / "workspace"
    assert marked.workspace("work") == state / "workspace-work"
    # `main` is not the default agent here: it gets a workspace of its own.
    assert marked.workspace("main") == state / "workspace-main"
    first = _paths(tmp_path, {"agents": {"list": [{"id": "work"}, {"id": "home"}]}})
    assert first.workspace("work") == state / "workspace"
    assert first.workspace("home") == state / "workspace-home"
    nothing = _paths(tmp_path, {"agents": {}})
    assert nothing.workspace("main") == state / "workspace"


def test_ids_are_normalised_as_openclaw_does(tmp_path: Path) -> None:
    assert normalize_agent_id("Ops") == "ops"
    assert normalize_agent_id("  Ops Team!  ") == "ops-team"
    assert normalize_agent_id("") == "main"
    paths = _paths(
        tmp_path, {"agents": {"list": [{"id": "main"}, {"id": "Ops Team", "workspace": "/o"}]}}
    )
    assert paths.workspace("ops-team") == Path("/o")


def test_the_newer_keyed_roster_is_read_too(tmp_path: Path) -> None:
    paths = _paths(
        tmp_path,
        {
            "agents": {
                "defaults": {"workspace": "/ws"},
                "entries": {"ops": {"workspace": "/ops"}, "main": {"default": True}},
            }
        },
    )
    assert paths.workspace("ops") == Path("/ops")
    assert paths.workspace("main") == Path("/ws")


def test_paths_expand_home_and_relative_ones_are_under_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = _paths(
        tmp_path,
        {
            "agents": {
                "defaults": {"workspace": "~/claw"},
                "list": [
                    {"id": "main"},
                    {"id": "rel", "workspace": "projects/rel"},
                    {"id": "env", "workspace": "${HOME}/from-env"},
                ],
            }
        },
    )
    assert paths.workspace("main") == home / "claw"
    assert paths.workspace("other") == home / "claw" / "other"
    assert paths.workspace("rel") == home / "projects" / "rel"
    assert paths.workspace("env") == home / "from-env"


def test_a_profile_names_the_default_workspace_unless_the_file_does(tmp_path: Path) -> None:
    state = tmp_path / "state"
    oc = _config(tmp_path, {"agents": {"list": [{"id": "main"}]}}, {"OPENCLAW_PROFILE": "work"})
    assert Paths(state, Settings(), oc).workspace("main") == state / "workspace-work"
    default = _config(tmp_path, {}, {"OPENCLAW_PROFILE": "default"})
    assert Paths(state, Settings(), default).workspace("main") == state / "workspace"
    configured = _config(
        tmp_path, {"agents": {"defaults": {"workspace": "/ws"}}}, {"OPENCLAW_PROFILE": "work"}
    )
    assert Paths(state, Settings(), configured).workspace("main") == Path("/ws")
    # No openclaw.json at all: OpenClaw's defaults, the profile's among them.
    (state / "openclaw.json").unlink()
    bare = load_openclaw(state, None, {"OPENCLAW_PROFILE": "work"})
    assert not bare.found
    assert Paths(state, Settings(), bare).workspace("main") == state / "workspace-work"
    assert Paths(state, Settings(), bare).workspace("bob") == state / "workspace-bob"


def test_dreaming_toml_still_wins_then_the_fleet_root(tmp_path: Path) -> None:
    (tmp_path / "dreaming.toml").write_text('[agents.alice]\nworkspace = "mine"\n')
    settings = load_settings(tmp_path / "dreaming.toml")
    data = {"agents": {"list": [{"id": "main"}, {"id": "alice", "workspace": "/oc/alice"}]}}
    paths = _paths(tmp_path, data, settings)
    assert paths.workspace("alice") == tmp_path / "mine"
    assert paths.workspace("main") == tmp_path / "state" / "workspace"
    fleet = settings.model_copy(
        update={"fleet": settings.fleet.model_copy(update={"workspace_root": Path("/mnt")})}
    )
    assert _paths(tmp_path, data, fleet).workspace("main") == Path("/mnt/main")


def test_bootstrap_max_chars_per_agent_else_defaults_else_12000(tmp_path: Path) -> None:
    assert _paths(tmp_path, {}).bootstrap_max_chars("main") == 12_000
    assert Paths(tmp_path, Settings()).bootstrap_max_chars("main") == 12_000
    paths = _paths(
        tmp_path,
        {
            "agents": {
                "defaults": {"bootstrapMaxChars": 9000},
                "list": [{"id": "main", "bootstrapMaxChars": 4000}, {"id": "bob"}],
            }
        },
    )
    assert paths.bootstrap_max_chars("main") == 4000
    assert paths.bootstrap_max_chars("bob") == 9000


def test_which_file_is_read(tmp_path: Path) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    (home / "cfg").mkdir(parents=True)
    (home / "cfg" / "oc.json").write_text('{agents: {defaults: {workspace: "/from-env"}}}')
    oc = load_openclaw(state, None, {"HOME": str(home), "OPENCLAW_CONFIG_PATH": "~/cfg/oc.json"})
    assert oc.found and oc.path == home / "cfg" / "oc.json"
    assert oc.workspace("main") == Path("/from-env")
    (tmp_path / "dreaming.toml").write_text('[openclaw]\nconfig = "home/cfg/oc.json"\n')
    settings = load_settings(tmp_path / "dreaming.toml")
    assert load_openclaw(state, settings.openclaw.config, {}).path == home / "cfg" / "oc.json"
    assert not load_openclaw(state, None, {}).found  # no <state>/openclaw.json: defaults
    with pytest.raises(ConfigError, match=r"missing\.json: no such file.*\[openclaw\] config"):
        load_openclaw(state, tmp_path / "missing.json", {})


# --- errors: one line naming the file, the problem and the key --------------------------


def test_invalid_json5_names_the_file_and_where(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _config(tmp_path, "{\n  agents: {list: [,]},\n}\n")
    message = str(err.value)
    assert message.startswith(str(tmp_path / "state" / "openclaw.json") + ": not valid JSON5:")
    assert "line 2" in message and "\n" not in message


def test_a_wrong_type_names_the_key(tmp_path: Path) -> None:
    cases = {
        "agents.list": ({"agents": {"list": {"id": "main"}}}, "expected a list, got an object"),
        "agents.list[1].workspace": (
            {"agents": {"list": [{"id": "main"}, {"id": "a", "workspace": 3}]}},
            "expected a string, got a number",
        ),
        "agents.list[0].id": (
            {"agents": {"list": [{"workspace": "/x"}]}},
            "missing: every agent in the list needs an id",
        ),
        "agents.defaults.bootstrapMaxChars": (
            {"agents": {"defaults": {"bootstrapMaxChars": "lots"}}},
            "expected a positive number, got a string",
        ),
        "plugins.entries.memory-core.config.memoryPolicy.excludeSessions.channels": (
            {
                "plugins": {
                    "entries": {
                        "memory-core": {
                            "config": {"memoryPolicy": {"excludeSessions": {"channels": "x"}}}
                        }
                    }
                }
            },
            "expected a list of strings, got a string",
        ),
        "plugins.entries.memory-core.config.dreaming.enabled": (
            {"plugins": {"entries": {"memory-core": {"config": {"dreaming": {"enabled": 1}}}}}},
            "expected true or false, got a number",
        ),
    }
    for key, (data, problem) in cases.items():
        with pytest.raises(ConfigError) as err:
            _config(tmp_path, data)
        assert str(err.value) == f"{tmp_path / 'state' / 'openclaw.json'}: key '{key}': {problem}"
    with pytest.raises(ConfigError, match=r"openclaw\.json: the top level is a list"):
        _config(tmp_path, "[1, 2]")


def test_an_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "state" / "openclaw.json").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"openclaw\.json: cannot read OpenClaw config"):
        load_openclaw(tmp_path / "state", None, {})


def test_the_cli_exits_as_for_other_config_errors(tmp_path: Path) -> None:
    from dreaming.cli import _status  # noqa: F401  (registers the command)

    state = tmp_path / "state"
    FakeOpenClaw(state).session("main", "s1", [("user", "hello")])
    (state / "openclaw.json").write_text('{agents: {list: "main"}}')
    result = CliRunner().invoke(cli, ["--state-dir", str(state), "status"])
    assert result.exit_code == 2
    assert "openclaw.json: key 'agents.list': expected a list, got a string" in result.stderr


# --- who consolidates: one writer per MEMORY.md -----------------------------------------


def _owner(tmp_path: Path, plugins: dict[str, Any], agent: str = "main", **agents: Any) -> Any:
    oc = _config(tmp_path, {"plugins": plugins, "agents": agents})
    return oc.dreaming_owner(agent)


def test_memory_core_dreams_unless_switched_off(tmp_path: Path) -> None:
    core = "plugins.entries.memory-core.config.dreaming.enabled"
    unset = _owner(tmp_path, {})
    assert unset is not None and unset.plugin == "memory-core"
    assert f"{core} is not set" in unset.refusal() and f"set {core} = false" in unset.refusal()
    on = _owner(tmp_path, {"entries": {"memory-core": {"config": {"dreaming": {"enabled": True}}}}})
    assert on is not None and f"{core} = true" in on.refusal()
    assert _owner(tmp_path, {"entries": {"memory-core": {"config": {"dreaming": {}}}}})
    for off in (
        {"entries": {"memory-core": {"config": {"dreaming": {"enabled": False}}}}},
        {"entries": {"memory-core": {"config": {"dreaming": {"enabled": " FALSE "}}}}},
        {"entries": {"memory-core": {"enabled": False}}},
        {"enabled": False},
        {"deny": ["memory-core"]},
        {"slots": {"memory.dreaming": "none"}},
        {"slots": {"memory": "none"}},
        {"slots": {"memory": "memory-lancedb"}},  # another memory plugin, no dreaming said
    ):
        assert _owner(tmp_path, off) is None, off


def test_another_plugin_in_the_dreaming_slot_owns_it(tmp_path: Path) -> None:
    owner = _owner(tmp_path, {"slots": {"memory.dreaming": "memory-dreamer"}})
    assert owner is not None and owner.plugin == "memory-dreamer"
    assert 'plugins.slots["memory.dreaming"] = "none"' in owner.refusal()
    lancedb = {
        "slots": {"memory": "memory-lancedb"},
        "entries": {"memory-lancedb": {"config": {"dreaming": {"enabled": True}}}},
    }
    assert _owner(tmp_path, lancedb).plugin == "memory-lancedb"


def test_only_the_agents_openclaw_dreams_for(tmp_path: Path) -> None:
    per_agent = {
        "list": [
            {"id": "main"},
            {"id": "ops", "plugins": {"slots": {"memory.dreaming": "memory-core"}}},
        ]
    }
    plugins = {"slots": {"memory.dreaming": "none"}}
    assert _owner(tmp_path, plugins, "main", **per_agent) is None
    ops = _owner(tmp_path, plugins, "ops", **per_agent)
    assert ops is not None
    assert 'agents.list[1].plugins.slots["memory.dreaming"] = "none"' in ops.refusal()
    # memory-core visits the roster (or main without one), not every folder with transcripts.
    assert _owner(tmp_path, {}, "stray", **per_agent) is None
    assert _owner(tmp_path, {}, "main") is not None
    assert _owner(tmp_path, {}, "bob") is None
    assert load_openclaw(tmp_path / "nowhere", None, {}).dreaming_owner("main") is None


def test_coexist_write_lets_dreaming_write_too(tmp_path: Path) -> None:
    (tmp_path / "dreaming.toml").write_text('[openclaw]\ncoexist = "write"\n')
    both = _paths(tmp_path, {}, load_settings(tmp_path / "dreaming.toml"))
    assert both.dreaming_owner("main") is not None and both.not_written("main") is None
    refused = _paths(tmp_path, {}).not_written("main")
    assert refused is not None and '[openclaw] coexist = "write"' in refused
    with pytest.raises(ConfigError, match=r"openclaw\.coexist"):
        (tmp_path / "dreaming.toml").write_text('[openclaw]\ncoexist = "both"\n')
        load_settings(tmp_path / "dreaming.toml")


# --- admission: either policy excludes, and says which file -----------------------------


def test_either_policy_excludes_and_the_reason_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "dreaming.toml").write_text("[excludeSessions]\nchatTypes = ['group']\n")
    settings = load_settings(tmp_path / "dreaming.toml")
    data = {
        "plugins": {
            "entries": {
                "memory-core": {
                    "config": {
                        "memoryPolicy": {
                            "excludeSessions": {
                                "channels": ["discord"],
                                "hookExternalContentSources": ["gmail"],
                            }
                        }
                    }
                }
            }
        }
    }
    policies = _paths(tmp_path, data, settings).settings.exclusion_policies()

    def session(**facts: Any) -> SessionFile:
        return SessionFile(
            agent="main", session_id="s", path=tmp_path, classified_by="index", **facts
        )

    def reason(**facts: Any) -> str | None:
        decision = decide(session(**facts), policies, tombstoned=False)
        return decision.reason if decision.status is Status.EXCLUDED else None

    assert reason(channel="discord") == "policy:channels=discord (openclaw.json)"
    assert reason(external_source="gmail") == (
        "policy:hookExternalContentSources=gmail (openclaw.json)"
    )
    assert reason(chat_type="group") == "policy:chatTypes=group (dreaming.toml)"
    assert reason(channel="telegram", chat_type="direct") is None


# --- a real night ------------------------------------------------------------------------


def _said(oc: FakeOpenClaw, agent: str, sid: str, text: str, day: int, **index: Any) -> None:
    index.setdefault("chatType", "direct")
    oc.session(
        agent,
        sid,
        [("user", text), ("assistant", "Noted.")],
        key=f"agent:{agent}:{sid}",
        start=DAY + timedelta(days=day),
        **index,
    )


def _memory(path: Path) -> str:
    return "\n".join(b.text for b in read(path).blocks)


def test_a_night_follows_openclaw_json(tmp_path: Path) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    alice_ws = tmp_path / "elsewhere" / "alice"
    oc = FakeOpenClaw(state)
    _said(oc, "main", "m1", "My sister Anna lives in Lisbon.", 0)
    _said(oc, "main", "m2", "I keep my bees in Alentejo.", 1, channel="discord")
    _said(oc, "alice", "a1", "I'm allergic to peanuts.", 0)
    _said(oc, "ops", "o1", "Never deploy on Fridays.", 0)
    _said(oc, "bob", "b1", "By the way, my daughter Emma is allergic to shellfish.", 0)
    (state / "openclaw.json").write_text(OPENCLAW_JSON.replace("ALICE_WS", str(alice_ws)))
    env = {"HOME": str(home), "OPENCLAW_PROFILE": "work"}

    app = App.open(state, None, env=env)
    try:
        results = {r.agent: r for r in runner.run(app, ["light", "rem", "deep"], None)}
    finally:
        app.close()

    default_ws = home / "oc" / "default"  # the file's default workspace beats the profile's
    assert "Lisbon" in _memory(default_ws / "MEMORY.md")
    assert "peanuts" in _memory(alice_ws / "MEMORY.md")
    assert "shellfish" in _memory(default_ws / "bob" / "MEMORY.md")
    for nowhere in ("workspace", "workspace-work", "workspace-alice", "workspace-bob"):
        assert not (state / nowhere / "MEMORY.md").exists(), nowhere

    # memory-core consolidates ops: its night read the transcripts, wrote no memory.
    ops = results["ops"]
    assert ops.refused is not None and "memory-core dreaming consolidates agent ops" in ops.refused
    assert ops.light is not None and ops.light.corpus_lines > 0
    assert ops.deep is None and ops.rem is None
    assert not (default_ws / "ops" / "MEMORY.md").exists()
    assert not (default_ws / "ops" / "DREAMS.md").exists()
    assert results["main"].refused is None and results["main"].deep is not None

    # memory-core's policy kept the discord session out of the corpus and the memory.
    assert results["main"].light is not None
    assert dict(results["main"].light.not_admitted) == {
        "policy:channels=discord (openclaw.json)": 1
    }
    corpus = default_ws / "memory" / ".dreams" / "session-corpus"
    text = "".join(p.read_text() for p in corpus.glob("*.txt"))
    assert "Lisbon" in text and "bees" not in text
    assert "bees" not in _memory(default_ws / "MEMORY.md")


def test_status_and_run_say_where_memory_goes_and_who_writes_it(tmp_path: Path) -> None:
    from dreaming.cli import _run, _status  # noqa: F401  (registers the commands)

    state, home = tmp_path / "state", tmp_path / "home"
    oc = FakeOpenClaw(state)
    _said(oc, "main", "m1", "My sister Anna lives in Lisbon.", 0)
    _said(oc, "ops", "o1", "Never deploy on Fridays.", 0)
    (state / "openclaw.json").write_text(OPENCLAW_JSON.replace("ALICE_WS", "/tmp/unused"))
    env = {"HOME": str(home)}
    base = ["--state-dir", str(state)]

    ran = CliRunner(env=env).invoke(cli, [*base, "run"], catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    refusal = [line for line in ran.stdout.splitlines() if "not written" in line]
    assert len(refusal) == 1 and refusal[0].startswith("agent ops: MEMORY.md and DREAMS.md")
    assert "set plugins.entries.memory-core.config.dreaming.enabled = false" in refusal[0]

    shown = CliRunner(env=env).invoke(cli, [*base, "status", "--json"], catch_exceptions=False)
    report = json.loads(shown.stdout)
    assert report["openclaw_config"] == str(state / "openclaw.json")
    memory = {a["agent"]: a["memory"] for a in report["agents"]}
    fill = memory["main"].pop("fill")
    assert memory["main"] == {
        "file": str(home / "oc" / "default" / "MEMORY.md"),
        "claude_code_project": None,
        "lines": None,
        "bootstrap_max_chars": 8000,
        "max_lines": None,
        "written_by_dreaming": True,
        "other_writer": None,
        "not_written": None,
        "no_longer_read": None,
    }
    # bootstrapMaxChars is MEMORY.md's budget too.
    assert fill["max_chars"] == 8000 and fill["max_chars_from"] == "bootstrapMaxChars"
    assert memory["ops"]["written_by_dreaming"] is False
    assert memory["ops"]["other_writer"] == "memory-core"
    text = CliRunner(env=env).invoke(cli, [*base, "status"], catch_exceptions=False).stdout
    assert "OpenClaw loads up to 8000 characters" in text
    assert "MEMORY.md and DREAMS.md not written: memory-core dreaming consolidates" in text
