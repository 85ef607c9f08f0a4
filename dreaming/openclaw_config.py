"""OpenClaw as it is configured: what `openclaw.json` says that dreaming must follow.

- Where each agent reads its MEMORY.md, in OpenClaw's own order (its
  `resolveAgentWorkspaceDir`): the agent's `workspace` in the roster; for the default agent
  `agents.defaults.workspace`, else `workspace` (`workspace-<profile>` under
  OPENCLAW_PROFILE); for the others `<agents.defaults.workspace>/<id>`, else
  `workspace-<id>`; the fallbacks in the state folder. The roster is `agents.list` (or the
  newer `agents.entries`, keyed by id); the default agent is the entry marked
  `default: true`, else the first, else `main`. Ids are normalised as OpenClaw does.
- How much of it OpenClaw loads (`bootstrapMaxChars`, the agent's, else
  `agents.defaults`', else 12,000).
- memory-core's admission policy (`plugins.entries.memory-core.config.memoryPolicy
  .excludeSessions`), which admission applies beside dreaming.toml's.
- Who already consolidates an agent's memory (`dreaming_owner`): one writer per MEMORY.md.

Paths in the file start with `~` (the home folder: OPENCLAW_HOME, else HOME) or are
absolute; a relative one is taken against the home folder (OpenClaw resolves it against the
gateway's working directory, which its service sets to the home folder). `${VAR}` in a path
is the environment variable, as OpenClaw substitutes it. A missing file means OpenClaw's
defaults; one that cannot be read, is not JSON5 or has a wrong type where dreaming reads is
a `ConfigError` naming the file, the problem and the key. Everything else in the file is
OpenClaw's business and is not looked at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dreaming.errors import ConfigError

CONFIG_PATH_ENV = "OPENCLAW_CONFIG_PATH"
PROFILE_ENV = "OPENCLAW_PROFILE"
HOME_ENV = "OPENCLAW_HOME"
CONFIG_FILENAME = "openclaw.json"
DEFAULT_AGENT_ID = "main"
MEMORY_CORE = "memory-core"
# What OpenClaw loads of a workspace file (MEMORY.md among them) when openclaw.json does not
# say (`bootstrapMaxChars`); it cuts the middle of a longer file.
BOOTSTRAP_MAX_CHARS = 12_000
DREAMING_SLOT = "memory.dreaming"
# Before a `memory.dreaming` slot existed, the plugin in these slots owned dreaming.
MEMORY_SLOTS = ("memory.recall", "memory")

_VALID_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.IGNORECASE)
_ENV_REF = re.compile(r"\$\$\{[A-Z_][A-Z0-9_]*\}|\$\{([A-Z_][A-Z0-9_]*)\}")


def normalize_agent_id(value: str | None) -> str:
    """OpenClaw's agent id: lower-case, path-safe; what is not becomes `-`, empty is main."""
    trimmed = (value or "").strip()
    if not trimmed:
        return DEFAULT_AGENT_ID
    if _VALID_ID.fullmatch(trimmed):
        return trimmed.lower()
    dashed = re.sub(r"[^a-z0-9_-]+", "-", trimmed.lower())
    return re.sub(r"-+$", "", re.sub(r"^-+", "", dashed))[:64] or DEFAULT_AGENT_ID


@dataclass(frozen=True)
class MemoryPolicy:
    """memory-core's `memoryPolicy.excludeSessions`: sessions kept out of memory."""

    hook_external_content_sources: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    chat_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class AgentEntry:
    """One agent of OpenClaw's roster, as far as dreaming cares."""

    id: str  # normalised
    key: str  # where it is in the file: `agents.list[1]`, `agents.entries.ops`
    workspace: Path | None = None
    default: bool = False
    bootstrap_max_chars: int | None = None
    dreaming_slot: str | None = None  # its own plugins.slots["memory.dreaming"]


@dataclass(frozen=True)
class PluginEntry:
    """`plugins.entries.<id>`: whether it is switched off, and whether its dreaming is on
    (None: not said)."""

    enabled: bool | None = None
    dreaming: bool | None = None


@dataclass(frozen=True)
class DreamingOwner:
    """A plugin that consolidates an agent's memory itself, and the setting that says so."""

    agent: str
    plugin: str
    because: str  # the setting, as it stands ("... = true", "... is not set")
    change: str  # what to set instead for dreaming to be the one writer
    file: Path

    def refusal(self) -> str:
        """The one line a run and `status` show for an agent dreaming does not write."""
        return (
            f"MEMORY.md and DREAMS.md not written: {self.plugin} dreaming consolidates agent"
            f" {self.agent} ({self.because} in {self.file}); one writer per MEMORY.md: set"
            f' {self.change} there, or [openclaw] coexist = "write" in dreaming.toml to write'
            " them as well"
        )


@dataclass(frozen=True)
class OpenClawConfig:
    """What openclaw.json says (or, `found` False, OpenClaw's defaults)."""

    path: Path
    state_dir: Path
    found: bool = False
    profile: str | None = None
    agents: tuple[AgentEntry, ...] = ()
    defaults_workspace: Path | None = None
    defaults_bootstrap_max_chars: int | None = None
    exclude_sessions: MemoryPolicy = MemoryPolicy()
    plugins_enabled: bool = True
    plugins_deny: frozenset[str] = frozenset()
    slots: Mapping[str, str] = field(default_factory=dict)
    plugins: Mapping[str, PluginEntry] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The file's name, as exclusion reasons name it."""
        return self.path.name

    def entry(self, agent: str) -> AgentEntry | None:
        wanted = normalize_agent_id(agent)
        return next((e for e in self.agents if e.id == wanted), None)

    def default_agent(self) -> str:
        if not self.agents:
            return DEFAULT_AGENT_ID
        return next((e for e in self.agents if e.default), self.agents[0]).id

    def workspace(self, agent: str) -> Path | None:
        """The agent's workspace in OpenClaw's order; None for OpenClaw's last default
        (`<state-dir>/workspace-<id>`), which `Paths` names as it names every agent file."""
        entry = self.entry(agent)
        if entry is not None and entry.workspace is not None:
            return entry.workspace
        aid = normalize_agent_id(agent)
        if aid == self.default_agent():
            if self.defaults_workspace is not None:
                return self.defaults_workspace
            return self.state_dir / (f"workspace-{self.profile}" if self.profile else "workspace")
        if self.defaults_workspace is not None:
            return self.defaults_workspace / aid
        return None

    def bootstrap_max_chars(self, agent: str) -> int:
        entry = self.entry(agent)
        own = entry.bootstrap_max_chars if entry is not None else None
        return own or self.defaults_bootstrap_max_chars or BOOTSTRAP_MAX_CHARS

    def dreaming_agents(self) -> frozenset[str]:
        """The agents OpenClaw's memory dreaming visits: the roster, else the default one."""
        return frozenset(e.id for e in self.agents) or frozenset({self.default_agent()})

    def dreaming_owner(self, agent: str) -> DreamingOwner | None:
        """The plugin that consolidates the agent's memory, or None. The plugin is the one in
        the agent's `memory.dreaming` slot, else the global one, else the memory plugin
        (`memory.recall`, `memory` slots), else memory-core; "none" in the slot means no
        plugin dreams. A plugin switched off does not dream; memory-core dreams unless its
        `config.dreaming.enabled` is false (builds differ on the default: taken as on, so
        two writers never meet); another memory plugin dreams when it says so."""
        if not self.found or normalize_agent_id(agent) not in self.dreaming_agents():
            return None
        if not self.plugins_enabled:
            return None
        entry = self.entry(agent)
        named: tuple[str, str] | None = None  # (setting, plugin) of a memory.dreaming slot
        if entry is not None and entry.dreaming_slot is not None:
            named = (f"{entry.key}.plugins.slots{_seg(DREAMING_SLOT)}", entry.dreaming_slot)
        elif DREAMING_SLOT in self.slots:
            named = (f"plugins.slots{_seg(DREAMING_SLOT)}", self.slots[DREAMING_SLOT])
        if named is not None:
            plugin = named[1]
        else:
            plugin = next((self.slots[s] for s in MEMORY_SLOTS if s in self.slots), MEMORY_CORE)
        if plugin.lower() == "none" or plugin in self.plugins_deny:
            return None
        state = self.plugins.get(plugin, PluginEntry())
        if state.enabled is False or state.dreaming is False:
            return None
        enabled = f"plugins.entries{_seg(plugin)}.config.dreaming.enabled"
        if state.dreaming is True:
            return DreamingOwner(
                agent, plugin, f"{enabled} = true", f"{enabled} = false", self.path
            )
        if named is not None:
            return DreamingOwner(
                agent, plugin, f'{named[0]} = "{plugin}"', f'{named[0]} = "none"', self.path
            )
        if plugin == MEMORY_CORE:
            return DreamingOwner(
                agent,
                plugin,
                f"{enabled} is not set (on by default)",
                f"{enabled} = false",
                self.path,
            )
        return None


def _seg(name: str) -> str:
    """One step of a key as openclaw.json's keys are written: `.name`, or `["a.b"]`."""
    return f'["{name}"]' if "." in name or " " in name else f".{name}"


def config_path(state_dir: Path, explicit: Path | None, env: Mapping[str, str]) -> Path:
    """`explicit` ([openclaw] config), else OPENCLAW_CONFIG_PATH, else
    `<state-dir>/openclaw.json`."""
    if explicit is not None:
        return explicit
    override = env.get(CONFIG_PATH_ENV, "").strip()
    if override:
        return _user_path(override, home_dir(env))
    return state_dir / CONFIG_FILENAME


def home_dir(env: Mapping[str, str]) -> Path:
    """OpenClaw's home folder: OPENCLAW_HOME (a `~` in it is HOME), else HOME."""
    home = env.get("HOME", "").strip() or env.get("USERPROFILE", "").strip()
    base = Path(home) if home else Path.home()
    explicit = env.get(HOME_ENV, "").strip()
    if not explicit:
        return base
    if explicit == "~" or explicit.startswith(("~/", "~\\")):
        return base / explicit[2:]
    return Path(explicit).absolute()


def _user_path(raw: str, home: Path) -> Path:
    text = raw.strip().replace("\0", "")
    if text == "~" or text.startswith(("~/", "~\\")):
        return home / text[2:]
    path = Path(text)
    return path if path.is_absolute() else home / path


def _profile(env: Mapping[str, str]) -> str | None:
    profile = env.get(PROFILE_ENV, "").strip()
    if not profile or profile.lower() == "default":
        return None
    if any(c in profile for c in "/\\\0") or profile in {".", ".."}:
        raise ConfigError(f"{PROFILE_ENV}={profile!r} is not a profile name")
    return profile


def load_openclaw(state_dir: Path, explicit: Path | None, env: Mapping[str, str]) -> OpenClawConfig:
    """What the installation's openclaw.json says; OpenClaw's defaults when there is none
    (an [openclaw] config, `explicit`, that names a missing file is an error: a typo)."""
    path = config_path(state_dir, explicit, env)
    profile = _profile(env)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if explicit is not None:
            raise ConfigError(
                f"{path}: no such file (named by [openclaw] config in dreaming.toml)"
            ) from None
        return OpenClawConfig(path, state_dir, profile=profile)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read OpenClaw config: {err.strerror}") from None
    try:
        data = _loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON5: not UTF-8 ({err.reason})") from None
    except ValueError as err:
        raise ConfigError(f"{path}: not valid JSON5: {_json5_message(err)}") from None
    return parse_openclaw(data, path, state_dir=state_dir, env=env)


def _loads(text: str) -> Any:
    """JSON5, read as plain JSON when it is that (JSON5 is a superset: the same values).
    The json5 parser is imported only for a file with comments or trailing commas: it costs
    ~25 ms of start-up, and every run reads this file."""
    try:
        return json.loads(text)
    except ValueError:
        import json5

        return json5.loads(text)


def _json5_message(err: ValueError) -> str:
    return re.sub(r"^<string>:(\d+) ", r"line \1: ", str(err))


def parse_openclaw(
    data: Any, path: Path, *, state_dir: Path, env: Mapping[str, str]
) -> OpenClawConfig:
    """The parts of a parsed openclaw.json dreaming follows (see the module's docstring)."""
    doc = _Doc(path, env)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level is {_kind(data)}, not an object")
    root: dict[str, Any] = data
    agents = doc.obj(root.get("agents"), "agents") or {}
    defaults = doc.obj(agents.get("defaults"), "agents.defaults") or {}
    plugins = doc.obj(root.get("plugins"), "plugins") or {}
    entries = doc.obj(plugins.get("entries"), "plugins.entries") or {}
    core = doc.obj(entries.get(MEMORY_CORE), f"plugins.entries{_seg(MEMORY_CORE)}") or {}
    core_key = f"plugins.entries{_seg(MEMORY_CORE)}.config"
    core_config = doc.obj(core.get("config"), core_key) or {}
    policy_key = f"{core_key}.memoryPolicy"
    policy = doc.obj(core_config.get("memoryPolicy"), policy_key) or {}
    excluded_key = f"{policy_key}.excludeSessions"
    excluded = doc.obj(policy.get("excludeSessions"), excluded_key) or {}
    return OpenClawConfig(
        path,
        state_dir,
        found=True,
        profile=_profile(env),
        agents=_roster(doc, agents),
        defaults_workspace=doc.path(defaults.get("workspace"), "agents.defaults.workspace"),
        defaults_bootstrap_max_chars=doc.positive(
            defaults.get("bootstrapMaxChars"), "agents.defaults.bootstrapMaxChars"
        ),
        exclude_sessions=MemoryPolicy(
            hook_external_content_sources=doc.strings(
                excluded.get("hookExternalContentSources"),
                f"{excluded_key}.hookExternalContentSources",
            ),
            channels=doc.strings(excluded.get("channels"), f"{excluded_key}.channels"),
            chat_types=doc.strings(excluded.get("chatTypes"), f"{excluded_key}.chatTypes"),
        ),
        plugins_enabled=doc.boolean(plugins.get("enabled"), "plugins.enabled") is not False,
        plugins_deny=frozenset(doc.strings(plugins.get("deny"), "plugins.deny")),
        slots=_slots(doc, plugins.get("slots"), "plugins.slots"),
        plugins={
            name: _plugin(doc, value, f"plugins.entries{_seg(name)}")
            for name, value in entries.items()
        },
    )


def _roster(doc: _Doc, agents: Mapping[str, Any]) -> tuple[AgentEntry, ...]:
    """`agents.entries` (keyed by id) where there is one, else `agents.list`."""
    keyed = doc.obj(agents.get("entries"), "agents.entries")
    items: list[tuple[str | None, str, Any]]
    if keyed is not None:
        items = [(k, f"agents.entries{_seg(k)}", v) for k, v in keyed.items()]
    else:
        listed = agents.get("list")
        if listed is None:
            return ()
        if not isinstance(listed, list):
            raise doc.error("agents.list", f"expected a list, got {_kind(listed)}")
        items = [(None, f"agents.list[{i}]", v) for i, v in enumerate(listed)]
    out: list[AgentEntry] = []
    for given, key, value in items:
        entry = doc.obj(value, key)
        if entry is None:
            raise doc.error(key, f"expected an object, got {_kind(value)}")
        name = given if given is not None else doc.string(entry.get("id"), f"{key}.id")
        if name is None:
            raise doc.error(f"{key}.id", "missing: every agent in the list needs an id")
        own_plugins = doc.obj(entry.get("plugins"), f"{key}.plugins") or {}
        slots = _slots(doc, own_plugins.get("slots"), f"{key}.plugins.slots")
        out.append(
            AgentEntry(
                id=normalize_agent_id(name),
                key=key,
                workspace=doc.path(entry.get("workspace"), f"{key}.workspace"),
                default=doc.boolean(entry.get("default"), f"{key}.default") is True,
                bootstrap_max_chars=doc.positive(
                    entry.get("bootstrapMaxChars"), f"{key}.bootstrapMaxChars"
                ),
                dreaming_slot=slots.get(DREAMING_SLOT),
            )
        )
    return tuple(out)


def _slots(doc: _Doc, value: Any, key: str) -> dict[str, str]:
    slots = doc.obj(value, key) or {}
    out = {}
    for name, plugin in slots.items():
        text = doc.string(plugin, f"{key}{_seg(name)}")
        if text:
            out[name] = text
    return out


def _plugin(doc: _Doc, value: Any, key: str) -> PluginEntry:
    entry = doc.obj(value, key) or {}
    config = doc.obj(entry.get("config"), f"{key}.config") or {}
    dreaming = doc.obj(config.get("dreaming"), f"{key}.config.dreaming") or {}
    return PluginEntry(
        enabled=doc.boolean(entry.get("enabled"), f"{key}.enabled"),
        dreaming=doc.boolean(dreaming.get("enabled"), f"{key}.config.dreaming.enabled"),
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else type(value).__name__


class _Doc:
    """Typed reads from the parsed file; a wrong type is an error naming the key. JSON
    `null` is taken for absent, as OpenClaw does."""

    def __init__(self, path: Path, env: Mapping[str, str]) -> None:
        self.file = path
        self.env = env
        self.home = home_dir(env)

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.file}: key '{key}': {problem}")

    def obj(self, value: Any, key: str) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.error(key, f"expected an object, got {_kind(value)}")
        return value

    def string(self, value: Any, key: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {_kind(value)}")
        return value.strip() or None

    def boolean(self, value: Any, key: str) -> bool | None:
        """true/false, or the strings OpenClaw takes for them ("true", " FALSE ")."""
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
            return value.strip().lower() == "true"
        raise self.error(key, f"expected true or false, got {_kind(value)}")

    def positive(self, value: Any, key: str) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 1:
            raise self.error(key, f"expected a positive number, got {_kind(value)}")
        return int(value)

    def strings(self, value: Any, key: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(key, f"expected a list of strings, got {_kind(value)}")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(f"{key}[{i}]", f"expected a string, got {_kind(item)}")
            if item.strip():
                out.append(item.strip())
        return tuple(out)

    def path(self, value: Any, key: str) -> Path | None:
        text = self.string(value, key)
        if text is None:
            return None

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name is None:  # `$${VAR}` is the literal `${VAR}`
                return match.group(0)[1:]
            if name not in self.env:
                raise self.error(key, f"${{{name}}} is not set in the environment")
            return self.env[name]

        return _user_path(_ENV_REF.sub(substitute, text), self.home)


__all__ = [
    "CONFIG_FILENAME",
    "AgentEntry",
    "DreamingOwner",
    "MemoryPolicy",
    "OpenClawConfig",
    "config_path",
    "home_dir",
    "load_openclaw",
    "normalize_agent_id",
    "parse_openclaw",
]
