"""Validated settings: `dreaming.toml`, where state lives, and per-agent paths.

Unknown keys are errors that name the file and the key, because a misspelt
policy key (say `excludeSesions`) would otherwise silently admit what the
operator meant to keep out.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from dreaming.errors import ConfigError, WorkspaceFileError
from dreaming.llm import BudgetSettings, LLMProfile
from dreaming.openclaw_config import CONFIG_FILENAME as OPENCLAW_CONFIG
from dreaming.openclaw_config import DreamingOwner, OpenClawConfig

CONFIG_ENV = "DREAMING_CONFIG"
STATE_DIR_ENV = "DREAMING_STATE_DIR"
CONFIG_FILENAME = "dreaming.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class SourceKind(StrEnum):
    OPENCLAW = "openclaw"
    CLAUDE_CODE = "claude-code"
    EVENT_LOG = "event-log"


class Source(_Strict):
    """A folder of transcripts. OpenClaw roots name their agents; the others need `agent`."""

    kind: SourceKind
    path: Path
    agent: str | None = None

    @field_validator("agent")
    @classmethod
    def _agent_is_a_name(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                check_agent_id(value, "sources")
            except ConfigError as err:
                raise ValueError(str(err).split(": ", 1)[1]) from None
        return value


class ExcludeSessions(_Strict):
    hook_external_content_sources: tuple[str, ...] = Field(
        default=(), alias="hookExternalContentSources"
    )
    channels: tuple[str, ...] = ()
    chat_types: tuple[str, ...] = Field(default=(), alias="chatTypes")


class AdmissionSettings(_Strict):
    """What to do with a session nothing classifies: no index entry, no record of an earlier
    night, no metadata in the transcript. Unknown is untrusted: its lines are kept as
    evidence but never promoted on their own, until the operator vouches for it here."""

    # Session ids (shell-style patterns: "2026-03-*") the operator says are their own chats.
    owner_sessions: tuple[str, ...] = ()
    # "owner" takes every unclassified session for the owner's own (a single-user machine
    # whose old transcripts carry no metadata); the default keeps them untrusted.
    unclassified: Literal["untrusted", "owner"] = "untrusted"


class TagsSettings(_Strict):
    plugin_dirs: tuple[Path, ...] = ()
    # An explicit list replaces every other source of declarations (see dreaming.ingest.tags).
    declarations: tuple[dict[str, Any], ...] | None = None


class CorpusSettings(_Strict):
    max_line_chars: int = Field(default=2000, ge=80)
    max_transcript_line_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)


class CandidateSettings(_Strict):
    min_claim_words: int = Field(default=4, ge=1)
    max_claim_words: int = Field(default=60, ge=4)
    similarity: float = Field(default=0.8, gt=0, le=1)
    recency_half_life_days: float = Field(default=14.0, gt=0)


class SalienceSettings(_Strict):
    """Extra cues for salience, appended to the built-in lists in `dreaming/ingest/lexicon.toml`.
    Each value is a list of regular expressions (matched case-insensitively; English ones
    within word boundaries, `*_cjk` ones as they are, for languages without spaces)."""

    instruction: tuple[str, ...] = ()
    instruction_cjk: tuple[str, ...] = ()
    remember: tuple[str, ...] = ()
    first_person: tuple[str, ...] = ()
    first_person_cjk: tuple[str, ...] = ()
    disclosure: tuple[str, ...] = ()
    disclosure_cjk: tuple[str, ...] = ()
    fact: tuple[str, ...] = ()
    fact_cjk: tuple[str, ...] = ()
    event: tuple[str, ...] = ()
    constraint: tuple[str, ...] = ()
    constraint_cjk: tuple[str, ...] = ()
    event_cjk: tuple[str, ...] = ()
    preference: tuple[str, ...] = ()
    preference_cjk: tuple[str, ...] = ()
    work: tuple[str, ...] = ()
    work_cjk: tuple[str, ...] = ()
    time: tuple[str, ...] = ()
    time_cjk: tuple[str, ...] = ()
    smalltalk_words: tuple[str, ...] = ()
    smalltalk_cjk: tuple[str, ...] = ()
    reaction: tuple[str, ...] = ()
    narration: tuple[str, ...] = ()
    narration_cjk: tuple[str, ...] = ()
    banner: tuple[str, ...] = ()
    request: tuple[str, ...] = ()
    technical: tuple[str, ...] = ()
    fact_named: tuple[str, ...] = ()
    request_cjk: tuple[str, ...] = ()
    fragment_starts: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _patterns_compile(self) -> SalienceSettings:
        for name, values in self:
            for value in values:
                try:
                    re.compile(value)
                except re.error as err:
                    raise ValueError(
                        f"{name}: {value!r} is not a regular expression: {err}"
                    ) from None
        return self

    def extra(self) -> dict[str, tuple[str, ...]]:
        return {name: values for name, values in self if values}


class SlotSettings(_Strict):
    """Extra relations for supersession, appended to `dreaming/ingest/slots.toml`:
    `relations.<name>` lists add phrasings (a new name adds a relation; `<name>_cjk` for
    languages without spaces), `lists` extends `corrections_old`, `corrections_similar`,
    `not_values` and `not_self`. Each pattern a regular expression."""

    relations: dict[str, tuple[str, ...]] = {}
    lists: dict[str, tuple[str, ...]] = {}

    @model_validator(mode="after")
    def _patterns_compile(self) -> SlotSettings:
        for table in (self.relations, self.lists):
            for name, values in table.items():
                for value in values:
                    try:
                        re.compile(value)
                    except re.error as err:
                        raise ValueError(
                            f"{name}: {value!r} is not a valid pattern ({err})"
                        ) from err
        return self


class DeepSettings(_Strict):
    """Gates and limits of the deep phase."""

    llm: str | None = None  # an llm.profiles name; None: the deterministic consolidator
    min_score: float = Field(default=1.15, ge=0)
    # Facts are usually said once: one session is enough by default. Raise it to ask for
    # corroboration (a durability cue such as "always" or "remember" still lets one through).
    min_sessions: int = Field(default=1, ge=1)
    # Candidates last seen longer ago than this (on the agent's clock) are not promoted.
    # None: no age limit, so a first night over months of history keeps old facts.
    max_age_days: float | None = Field(default=None, gt=0)
    # An agent's own words are never a memory on their own; they corroborate the owner's.
    promote_agent_only: bool = False
    max_candidates: int = Field(default=200, ge=1)
    batch_size: int = Field(default=8, ge=1, le=100)
    entries_per_candidate: int = Field(default=5, ge=0, le=50)
    max_entry_chars: int = Field(default=500, ge=40)
    max_retire_fraction: float = Field(default=0.25, ge=0, le=1)
    # Deprecated: MEMORY.md's size is `[memory] max_chars` now (what does not fit is archived,
    # not held back). Still read as that budget when `[memory]` sets none.
    max_memory_chars: int | None = Field(default=None, ge=200)
    runaway_skip_batches: int = Field(default=3, ge=1)
    on_budget: Literal["wait", "deterministic"] = "wait"
    # The endpoint failed for good this run (retries did not cure it): the remaining
    # candidates are decided by the deterministic path, or wait for the next run.
    on_llm_failure: Literal["deterministic", "wait"] = "deterministic"
    # "review": decisions are staged as proposals for `dreaming review`, not written.
    apply: Literal["auto", "review"] = "auto"
    review_expire_days: float = Field(default=14.0, gt=0)


class RemSettings(_Strict):
    """How REM finds recurring themes and writes the diary."""

    lookback_days: float = Field(default=7.0, gt=0)
    min_theme_sessions: int = Field(default=2, ge=1)
    min_theme_days: int = Field(default=2, ge=1)
    max_themes: int = Field(default=5, ge=1)
    boost_per_theme: float = Field(default=0.05, ge=0, le=1)
    max_boost: float = Field(default=0.15, ge=0, le=1)
    narrative: bool = True  # let the LLM write the diary entry when a profile and budget allow
    max_diary_chars: int = Field(default=1200, ge=100)


class FleetSettings(_Strict):
    """Fleet mode (database_url set; docs/fleet.md): the Procrastinate queue, how dead
    workers are noticed, budgets shared by every agent and worker, and where workspaces are."""

    queue: str = Field(default="dreaming", min_length=1)
    heartbeat_s: float = Field(default=10.0, gt=0)  # how often a worker says it is alive
    stalled_after_s: float = Field(default=60.0, gt=0)  # silent this long: presumed dead
    # When workers look for the jobs of dead workers (cron; a 6th field is seconds).
    stalled_check_cron: str = "* * * * *"
    # Finished tasks (the queue's audit trail, and how a late duplicate fire is recognised)
    # are deleted this many hours after they end, by a daily task.
    keep_finished_jobs_h: int = Field(default=72, ge=1)
    # A task whose agent is held outside the queue waits this long and tries again.
    busy_retry_s: int = Field(default=60, ge=1)
    busy_retries: int = Field(default=15, ge=0)
    # Caps on what the whole fleet spends in a UTC day, over every agent and worker.
    daily_max_usd: float | None = Field(default=None, ge=0)
    daily_max_tokens: int | None = Field(default=None, ge=0)
    daily_max_calls: int | None = Field(default=None, ge=0)
    # Agents' workspaces (MEMORY.md, DREAMS.md, corpus) as <workspace_root>/<agent>, on
    # storage every worker mounts at this path. Unset: beside the transcripts, as locally.
    workspace_root: Path | None = None


class AgentSettings(_Strict):
    workspace: Path | None = None
    # This agent's MEMORY.md budget, over `[memory]`'s (see MemorySettings).
    max_chars: int | None = Field(default=None, ge=100)
    max_lines: int | None = Field(default=None, ge=1)


class MemorySettings(_Strict):
    """MEMORY.md and DREAMS.md. A link to a file outside the agent's workspace is refused
    (a night must not write where the operator did not mean it to) unless its target is in
    one of `link_targets`.

    The capacity budget bounds the whole MEMORY.md, operator text included: `max_chars`
    (default: the agent's `bootstrapMaxChars`, what OpenClaw loads of it) and `max_lines`
    (default: none for OpenClaw; a Claude Code agent loads the first 200 lines). Entries
    that do not fit move to an archive the agent searches but does not load, the least
    valuable first: an entry's value halves every `half_life_days` on the agent's clock
    since it was last said (`dreaming.memory.capacity`). `[agents.<id>]` may set its own
    `max_chars` and `max_lines`."""

    link_targets: tuple[Path, ...] = ()
    max_chars: int | None = Field(default=None, ge=100)
    max_lines: int | None = Field(default=None, ge=1)
    half_life_days: float = Field(default=180.0, gt=0)


# Claude Code loads the first 200 lines of a project's MEMORY.md (auto memory).
CLAUDE_CODE_MAX_LINES = 200
# The archive of entries that did not fit MEMORY.md: in the workspace's memory/ folder, which
# OpenClaw's memory search indexes (Claude Code reads its memory folder's files on demand).
ARCHIVE_NAME = "dreaming-archive.md"


@dataclasses.dataclass(frozen=True)
class Capacity:
    """How big one agent's MEMORY.md may be, and what set each bound (for `status`)."""

    max_chars: int | None  # None: no bound
    max_lines: int | None
    half_life_days: float = 180.0
    chars_from: str = ""  # "bootstrapMaxChars", "[memory] max_chars", ...
    lines_from: str = ""

    @classmethod
    def unbounded(cls) -> Capacity:
        return cls(None, None)


class OpenClawSettings(_Strict):
    """How dreaming lives beside OpenClaw as it is configured (`openclaw.json`).

    Where memory-core dreaming (or another plugin in the `memory.dreaming` slot) consolidates
    an agent, "refuse" leaves that agent's MEMORY.md and DREAMS.md to it (light still reads
    its transcripts); "write" writes them anyway. `config` names the openclaw.json to read
    (default: OPENCLAW_CONFIG_PATH, else `<state-dir>/openclaw.json`)."""

    coexist: Literal["refuse", "write"] = "refuse"
    config: Path | None = None


class LLMSettings(_Strict):
    profiles: dict[str, LLMProfile] = {}


class Settings(_Strict):
    """Everything `dreaming.toml` may say. Defaults make an empty file valid."""

    read_state_dir: bool = True  # read the state folder itself as an OpenClaw root
    sources: tuple[Source, ...] = ()
    exclude_sessions: ExcludeSessions = Field(
        default_factory=ExcludeSessions, alias="excludeSessions"
    )
    admission: AdmissionSettings = Field(default_factory=AdmissionSettings)
    tags: TagsSettings = Field(default_factory=TagsSettings)
    corpus: CorpusSettings = Field(default_factory=CorpusSettings)
    candidates: CandidateSettings = Field(default_factory=CandidateSettings)
    deep: DeepSettings = Field(default_factory=DeepSettings)
    salience: SalienceSettings = Field(default_factory=SalienceSettings)
    slots: SlotSettings = Field(default_factory=SlotSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    rem: RemSettings = Field(default_factory=RemSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    agents: dict[str, AgentSettings] = {}
    llm: LLMSettings = Field(default_factory=LLMSettings)
    jobs_dir: Path | None = None
    database_url: str | None = None
    fleet: FleetSettings = Field(default_factory=FleetSettings)
    openclaw: OpenClawSettings = Field(default_factory=OpenClawSettings)
    # memory-core's `memoryPolicy.excludeSessions` from openclaw.json, with the file's name:
    # never read from dreaming.toml, set by `Paths` from what `App.open` read.
    _openclaw_exclusions: tuple[str, ExcludeSessions] | None = PrivateAttr(default=None)

    def with_openclaw_exclusions(self, origin: str, policy: ExcludeSessions) -> Settings:
        """These settings with openclaw.json's exclusion policy beside dreaming.toml's."""
        copy = self.model_copy()
        copy._openclaw_exclusions = (origin, policy)
        return copy

    def exclusion_policies(self) -> tuple[tuple[str, ExcludeSessions], ...]:
        """Every exclusion policy with the file it comes from: dreaming.toml's, then
        openclaw.json's. A session either excludes is excluded."""
        own = ((CONFIG_FILENAME, self.exclude_sessions),)
        return own if self._openclaw_exclusions is None else (*own, self._openclaw_exclusions)


def _format_error(path: Path | str, err: ValidationError, model: type[BaseModel]) -> str:
    """One line per problem, naming the file and the key; an unknown key suggests the
    closest one its table knows. Shared by settings and job files."""
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            hint = _closest_key(str(e["loc"][-1]), _known_keys(model, e["loc"][:-1]))
            suffix = f" (did you mean '{hint}'?)" if hint else ""
            lines.append(f"{path}: unknown key '{key}'{suffix}")
        else:
            lines.append(f"{path}: key '{key}': {_plain(e['msg'])}")
    return "; ".join(lines)


# Pydantic prefixes the message of an exception raised in a validator with its kind; the
# operator needs the message only.
_PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")


def _plain(msg: str) -> str:
    for prefix in _PYDANTIC_PREFIXES:
        msg = msg.removeprefix(prefix)
    return msg


def _closest_key(key: str, known: Sequence[str]) -> str | None:
    """The known key nearest to `key`, ignoring case, `_` and `-` (`batchsize`, `batchSize`
    -> `batch_size`); of a field's two spellings (`chat_types`, `chatTypes`), the one in the
    style the operator wrote."""

    def bare(name: str) -> str:
        return name.lower().replace("_", "").replace("-", "")

    # The spelling in the operator's style comes last, so it is the one kept.
    in_style = sorted(known, key=lambda name: ("_" in name) == ("_" in key))
    by_bare = {bare(name): name for name in in_style}
    match = difflib.get_close_matches(bare(key), list(by_bare), n=1)
    return by_bare[match[0]] if match else None


def _known_keys(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """Field names and aliases of the table at `loc` under `model`; [] where `loc` does not
    lead to a model (a plain dict, a value)."""
    node: Any = model
    for part in loc:
        node = _child(node, part)
        if node is None:
            return []
    node = _without_none(node)
    if not (isinstance(node, type) and issubclass(node, BaseModel)):
        return []
    keys: list[str] = []
    for name, field in node.model_fields.items():
        keys.append(name)
        if field.alias:
            keys.append(field.alias)
    return keys


def _child(node: Any, part: str | int) -> Any:
    """The type one step of a validation error's location leads to, or None."""
    node = _without_none(node)
    if isinstance(node, type) and issubclass(node, BaseModel):
        for name, field in node.model_fields.items():
            if part in (name, field.alias):
                return field.annotation
        return None
    origin, args = get_origin(node), get_args(node)
    if origin in (tuple, list) and isinstance(part, int) and args:
        return args[0]
    if origin is dict and isinstance(part, str) and len(args) == 2:
        return args[1]
    if origin in (Union, UnionType):
        # Pydantic names the member of a union it tried ('Trigger', 'tuple[str, ...]').
        for member in args:
            if getattr(member, "__name__", None) == part:
                return member
    return None


def _without_none(node: Any) -> Any:
    if get_origin(node) in (Union, UnionType):
        members = [a for a in get_args(node) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return node


def parse_settings(data: Mapping[str, Any], origin: Path | str) -> Settings:
    try:
        settings = Settings.model_validate(dict(data))
    except ValidationError as err:
        raise ConfigError(_format_error(origin, err, Settings)) from None
    for name in settings.agents:
        check_agent_id(name, f"{origin}: key 'agents'")
    # A profile knows its own name, so its errors can say which one to fix.
    profiles = {
        name: p.model_copy(update={"name": name}) for name, p in settings.llm.profiles.items()
    }
    if settings.deep.llm is not None and settings.deep.llm not in profiles:
        raise ConfigError(
            f"{origin}: key 'deep.llm': no profile {settings.deep.llm!r} under [llm.profiles]"
        )
    return settings.model_copy(update={"llm": LLMSettings(profiles=profiles)})


def load_settings(path: Path | None) -> Settings:
    """Load settings from `path` (None: defaults). Relative paths resolve against the file."""
    if path is None:
        return Settings()
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read settings file: {err.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    settings = parse_settings(data, path)
    return _resolve_paths(settings, path.parent)


def _resolve(p: Path, base: Path) -> Path:
    p = p.expanduser()
    return p if p.is_absolute() else (base / p)


def _resolve_paths(s: Settings, base: Path) -> Settings:
    return s.model_copy(
        update={
            "sources": tuple(
                src.model_copy(update={"path": _resolve(src.path, base)}) for src in s.sources
            ),
            "tags": s.tags.model_copy(
                update={"plugin_dirs": tuple(_resolve(p, base) for p in s.tags.plugin_dirs)}
            ),
            "agents": {
                name: a.model_copy(
                    update={"workspace": _resolve(a.workspace, base) if a.workspace else None}
                )
                for name, a in s.agents.items()
            },
            "jobs_dir": _resolve(s.jobs_dir, base) if s.jobs_dir else None,
            "memory": s.memory.model_copy(
                update={"link_targets": tuple(_resolve(p, base) for p in s.memory.link_targets)}
            ),
            "openclaw": s.openclaw.model_copy(
                update={"config": _resolve(s.openclaw.config, base) if s.openclaw.config else None}
            ),
            "fleet": s.fleet.model_copy(
                update={
                    "workspace_root": (
                        _resolve(s.fleet.workspace_root, base) if s.fleet.workspace_root else None
                    )
                }
            ),
        }
    )


def default_state_dir(env: Mapping[str, str] = os.environ) -> Path:
    if env.get(STATE_DIR_ENV):
        return Path(env[STATE_DIR_ENV]).expanduser()
    return Path("~/.openclaw").expanduser()


def find_config(
    explicit: Path | None, state_dir: Path, env: Mapping[str, str] = os.environ
) -> Path | None:
    """--config, then DREAMING_CONFIG, then `<state>/dreaming.toml` if it exists."""
    if explicit is not None:
        return explicit
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    candidate = state_dir / CONFIG_FILENAME
    return candidate if candidate.is_file() else None


# An agent id that is safe as a file name as it is; any other id (a 250-character folder
# name, spaces, non-ASCII) is stored under a hashed name, so one odd agent cannot stop a night.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def file_stem(agent: str) -> str:
    """The file name an agent's own files (database, lock, tombstones) are stored under."""
    if _SAFE_NAME.fullmatch(agent) and not agent.endswith("."):
        return agent
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", agent).strip("._-")[:40] or "agent"
    digest = hashlib.blake2b(agent.encode("utf-8", "surrogateescape"), digest_size=6)
    return f"{slug}-{digest.hexdigest()}"


def check_agent_id(agent: str, where: str) -> str:
    """The CLI's rule for an agent id, applied wherever one comes from: a name, never a path."""
    if (
        not agent
        or agent in {".", ".."}
        or any(c in agent for c in "/\\\0")
        or not agent.isprintable()
        or len(agent) > 255
    ):
        raise ConfigError(f"{where}: {agent!r} is not a valid agent id (a name, not a path)")
    return agent


class Paths:
    """Where an installation keeps things; one object so nothing else joins paths by hand."""

    def __init__(
        self, state_dir: Path, settings: Settings, openclaw: OpenClawConfig | None = None
    ) -> None:
        self.state_dir = state_dir
        # What openclaw.json says (not given: OpenClaw's defaults, as without the file).
        self.openclaw = openclaw or OpenClawConfig(state_dir / OPENCLAW_CONFIG, state_dir)
        policy = ExcludeSessions(**dataclasses.asdict(self.openclaw.exclude_sessions))
        self.settings = settings.with_openclaw_exclusions(self.openclaw.label, policy)

    @property
    def home(self) -> Path:
        """dreaming's own folder inside the state dir (databases, locks, scheduler)."""
        return self.state_dir / "dreaming"

    def database(self, agent: str) -> Path:
        return self.home / "agents" / f"{file_stem(agent)}.sqlite"

    def lock(self, agent: str) -> Path:
        return self.home / "locks" / f"{file_stem(agent)}.lock"

    def workspace(self, agent: str) -> Path:
        """Where the agent reads its MEMORY.md: `[agents.<id>] workspace` in dreaming.toml,
        else `[fleet] workspace_root`/<id>, else what openclaw.json says in OpenClaw's own
        order (`dreaming.openclaw_config`), else OpenClaw's defaults: `workspace` for the
        default agent, `workspace-<id>` for the others, in the state folder."""
        configured = self.settings.agents.get(agent)
        if configured is not None and configured.workspace is not None:
            return configured.workspace
        if self.settings.fleet.workspace_root is not None:
            return self.settings.fleet.workspace_root / agent
        found = self.openclaw.workspace(agent)
        return found or self.state_dir / f"workspace-{file_stem(agent)}"

    def bootstrap_max_chars(self, agent: str) -> int:
        """How much of MEMORY.md OpenClaw loads for the agent (`bootstrapMaxChars`)."""
        return self.openclaw.bootstrap_max_chars(agent)

    def capacity(self, agent: str) -> Capacity:
        """MEMORY.md's budget for the agent: `[agents.<id>]`, else `[memory]`, else (the
        deprecated) `[deep] max_memory_chars`, else what the agent loads of it (OpenClaw's
        `bootstrapMaxChars`; `default_max_lines`)."""
        own = self.settings.agents.get(agent) or AgentSettings()
        memory = self.settings.memory
        chars: tuple[int | None, str] = (self.bootstrap_max_chars(agent), "bootstrapMaxChars")
        for value, name in (
            (self.settings.deep.max_memory_chars, "[deep] max_memory_chars"),
            (memory.max_chars, "[memory] max_chars"),
            (own.max_chars, f"[agents.{agent}] max_chars"),
        ):
            if value is not None:
                chars = (value, name)
        lines = self.default_max_lines(agent)
        for value, name in (
            (memory.max_lines, "[memory] max_lines"),
            (own.max_lines, f"[agents.{agent}] max_lines"),
        ):
            if value is not None:
                lines = (value, name)
        return Capacity(chars[0], lines[0], memory.half_life_days, chars[1], lines[1])

    def default_max_lines(self, agent: str) -> tuple[int | None, str]:
        """How many lines of MEMORY.md the agent loads when no setting says: OpenClaw loads
        characters, not lines (none); an agent whose transcripts are all Claude Code's loads
        its first 200 lines."""
        kinds = {s.kind for s in self.settings.sources if s.agent == agent}
        if kinds == {SourceKind.CLAUDE_CODE}:
            return CLAUDE_CODE_MAX_LINES, "Claude Code loads 200 lines"
        return None, ""

    def archive_file(self, agent: str) -> Path:
        """Where the entries that did not fit the agent's MEMORY.md are archived: the
        memory/ folder beside it (MEMORY.md's own folder when that is one already)."""
        memory = self.memory_file(agent)
        folder = memory.parent if memory.parent.name == "memory" else memory.parent / "memory"
        return self._kept_inside(agent, folder / ARCHIVE_NAME)

    def dreaming_owner(self, agent: str) -> DreamingOwner | None:
        """The OpenClaw plugin that consolidates the agent's memory itself, if one does."""
        return self.openclaw.dreaming_owner(agent)

    def not_written(self, agent: str) -> str | None:
        """Why dreaming leaves the agent's MEMORY.md and DREAMS.md alone (one line with the
        setting to change), or None when it writes them."""
        owner = self.dreaming_owner(agent)
        if owner is None or self.settings.openclaw.coexist == "write":
            return None
        return owner.refusal()

    def memory_file(self, agent: str) -> Path:
        return self._kept_inside(agent, self.workspace(agent) / "MEMORY.md")

    def dreams_file(self, agent: str) -> Path:
        return self._kept_inside(agent, self.workspace(agent) / "DREAMS.md")

    def _kept_inside(self, agent: str, path: Path) -> Path:
        """`path`, unless it is a link whose target leaves the agent's workspace (and every
        folder `[memory] link_targets` allows): then nothing reads it as memory or writes
        through it, for any command."""
        if not path.is_symlink():
            return path
        target = path.resolve()
        allowed = [path.parent.resolve(), *(p.resolve() for p in self.settings.memory.link_targets)]
        if any(target.is_relative_to(root) for root in allowed):
            return path
        raise WorkspaceFileError(
            f"{path} links to {target}, outside the workspace of agent {agent}: not read or"
            " written (allow its folder with [memory] link_targets in dreaming.toml)"
        )

    def corpus_dir(self, agent: str) -> Path:
        return self.workspace(agent) / "memory" / ".dreams" / "session-corpus"

    def known_agents(self) -> list[str]:
        """Agents that have a database already (for status and listings)."""
        folder = self.home / "agents"
        if not folder.is_dir():
            return []
        names = []
        for p in folder.glob("*.sqlite"):
            # A hashed file name keeps the real id beside it.
            sidecar = p.with_suffix(".agent")
            names.append(sidecar.read_text("utf-8") if sidecar.is_file() else p.stem)
        return sorted(names)

    def remember_name(self, agent: str) -> None:
        """Write the id beside a database stored under a hashed name (see known_agents)."""
        if file_stem(agent) != agent:
            sidecar = self.database(agent).with_suffix(".agent")
            if not sidecar.exists():
                sidecar.parent.mkdir(parents=True, exist_ok=True)
                sidecar.write_text(agent, "utf-8")


OutputMode = Literal["text", "json"]
