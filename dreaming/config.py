"""Validated settings: `dreaming.toml`, where state lives, and per-agent paths.

Unknown keys are errors that name the file and the key, because a misspelt
policy key (say `excludeSesions`) would otherwise silently admit what the
operator meant to keep out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from dreaming.config_cues import SalienceSettings, SlotSettings
from dreaming.config_errors import format_error as _format_error
from dreaming.errors import ConfigError, WorkspaceFileError
from dreaming.llm import BudgetSettings, LLMProfile
from dreaming.names import check_agent_id as check_agent_id
from dreaming.names import file_stem as file_stem
from dreaming.openclaw_config import CONFIG_FILENAME as OPENCLAW_CONFIG
from dreaming.openclaw_config import DreamingOwner, OpenClawConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


CONFIG_ENV = "DREAMING_CONFIG"
STATE_DIR_ENV = "DREAMING_STATE_DIR"
CONFIG_FILENAME = "dreaming.toml"


class SourceKind(StrEnum):
    OPENCLAW = "openclaw"
    CLAUDE_CODE = "claude-code"
    EVENT_LOG = "event-log"


class Source(_Strict):
    """A folder of transcripts. OpenClaw roots name their agents; the others need `agent`.

    A Claude Code projects folder is one agent per project folder (`<agent>:<project>`, see
    `project_agent_id`), each writing that project's own `memory/MEMORY.md`; `per_project =
    false` pools every project into the one agent `agent`, as before."""

    kind: SourceKind
    path: Path
    agent: str | None = None
    per_project: bool | None = None  # claude-code only; unset: true

    @field_validator("agent")
    @classmethod
    def _agent_is_a_name(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                check_agent_id(value, "sources")
            except ConfigError as err:
                raise ValueError(str(err).split(": ", 1)[1]) from None
        return value

    @model_validator(mode="after")
    def _per_project_is_claude_codes(self) -> Source:
        if self.per_project is not None and self.kind is not SourceKind.CLAUDE_CODE:
            raise ValueError(f"per_project applies to claude-code sources, not {self.kind.value}")
        return self

    @property
    def projects_apart(self) -> bool:
        """Whether each project folder of this source is its own agent."""
        return self.kind is SourceKind.CLAUDE_CODE and self.per_project is not False


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

    # Session ids or keys (shell-style patterns: "2026-03-*", "agent:main:telegram:group:*")
    # the operator says are their own chats: an unclassified one is the owner's, and a group
    # chat among them is people the agent works for (their lines count, each person named).
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
    max_memory_chars: int = Field(default=20_000, ge=200)
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
    # A Claude Code project's agent keeps its files in the project's memory/ regardless.
    workspace_root: Path | None = None


class AgentSettings(_Strict):
    workspace: Path | None = None


class MemorySettings(_Strict):
    """MEMORY.md and DREAMS.md. A link to a file outside the agent's workspace is refused
    (a night must not write where the operator did not mean it to) unless its target is in
    one of `link_targets`."""

    link_targets: tuple[Path, ...] = ()


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


# Claude Code loads the first 200 lines of a project's memory/MEMORY.md at session start.
CLAUDE_MEMORY_LINES = 200


def project_agent_id(agent: str, project: str) -> str:
    """The agent of one Claude Code project folder: `<agent>:<project>`, e.g.
    `claude:-home-ana-src-acme` (the folder is the encoded working directory). A folder name
    that would not make a valid id (too long, unprintable) is shortened and hashed, so it
    still names one folder and only that one."""
    name = f"{agent}:{project}"
    if len(name) <= 255 and name.isprintable() and not any(c in project for c in "/\\\0"):
        return name
    digest = hashlib.blake2b(project.encode("utf-8", "surrogateescape"), digest_size=6).hexdigest()
    room = max(0, 255 - len(agent) - len(digest) - 2)
    slug = re.sub(r"[^\x21-\x7e]+|[/\\]", "_", project)[: min(room, 80)]
    return f"{agent}:{slug}~{digest}"[:255]


@dataclass(frozen=True, slots=True)
class ClaudeProject:
    """One Claude Code project folder that is its own agent, and the source it is under."""

    source: Source
    folder: Path  # <source path>/<project>: the session files and memory/ beside them


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
        else, for a Claude Code project's agent, the project folder (MEMORY.md in its
        `memory/`), else `[fleet] workspace_root`/<id>, else what openclaw.json says in
        OpenClaw's own order (`dreaming.openclaw_config`), else OpenClaw's defaults:
        `workspace` for the default agent, `workspace-<id>` for the others, in the state
        folder."""
        configured = self.settings.agents.get(agent)
        if configured is not None and configured.workspace is not None:
            return configured.workspace
        project = self.claude_project(agent)
        if project is not None:
            return project.folder
        if self.settings.fleet.workspace_root is not None:
            return self.settings.fleet.workspace_root / agent
        found = self.openclaw.workspace(agent)
        return found or self.state_dir / f"workspace-{file_stem(agent)}"

    def claude_project(self, agent: str) -> ClaudeProject | None:
        """The Claude Code project folder `agent` is the agent of (`project_agent_id`), or
        None: an OpenClaw agent, a pooled source's agent, an event log's."""
        missing: ClaudeProject | None = None
        for src in self.settings.sources:
            if not src.projects_apart or src.agent is None:
                continue
            if not agent.startswith(f"{src.agent}:"):
                continue
            name = agent[len(src.agent) + 1 :]
            plain = project_agent_id(src.agent, name) == agent
            # The source may be one project folder itself rather than the projects folder.
            for folder in (src.path / name, src.path):
                if plain and folder.name == name and folder.is_dir():
                    return ClaudeProject(src, folder)
            if not plain or "~" in name:  # maybe a hashed id: find the folder it came from
                from dreaming.ingest.transcripts import claude_projects

                for folder in claude_projects(src.path):
                    if project_agent_id(src.agent, folder.name) == agent:
                        return ClaudeProject(src, folder)
            if plain and missing is None:
                missing = ClaudeProject(src, src.path / name)
        # The folder is gone (or not made yet): the agent still lives where it was.
        return missing

    def _in_project(self, agent: str) -> bool:
        """Whether the agent's files take a Claude Code project's layout (MEMORY.md in its
        `memory/`): a project's agent whose workspace dreaming.toml does not move."""
        configured = self.settings.agents.get(agent)
        moved = configured is not None and configured.workspace is not None
        return not moved and self.claude_project(agent) is not None

    def pooled_projects(self, agent: str) -> list[Source]:
        """The per-project Claude Code sources whose pooled agent `agent` was (its id is the
        source's `agent`): an older state's agent that no transcript feeds any more (unless
        an OpenClaw root has an agent of that name, which shared its state)."""
        found = [
            src
            for src in self.settings.sources
            if src.projects_apart and src.agent == agent and self.claude_project(agent) is None
        ]
        if not found:
            return []
        roots = [s.path for s in self.settings.sources if s.kind is SourceKind.OPENCLAW]
        if self.settings.read_state_dir:
            roots.append(self.state_dir)
        if any((root / "agents" / agent / "sessions").is_dir() for root in roots):
            return []
        return found

    def kin(self, agent: str) -> list[str]:
        """Other agents that read the same transcripts as `agent`: a Claude Code source's
        pooled agent and its projects' agents (a state from before per-project agents, or
        `per_project` switched). A session forgotten by one stays forgotten for the others."""
        from dreaming.ingest.transcripts import claude_projects

        project = self.claude_project(agent)
        out: list[str] = []
        for src in self.settings.sources:
            if src.kind is not SourceKind.CLAUDE_CODE or src.agent is None:
                continue
            if project is not None and project.source.agent == src.agent:
                out.append(src.agent)
            elif project is None and agent == src.agent:
                out.extend(project_agent_id(src.agent, p.name) for p in claude_projects(src.path))
        return [a for a in dict.fromkeys(out) if a != agent]

    def memory_lines(self, agent: str) -> int | None:
        """How many lines of MEMORY.md the agent loads (Claude Code: the first 200), or
        None where a character budget applies instead (`bootstrap_max_chars`)."""
        return CLAUDE_MEMORY_LINES if self._in_project(agent) else None

    def bootstrap_max_chars(self, agent: str) -> int:
        """How much of MEMORY.md OpenClaw loads for the agent (`bootstrapMaxChars`)."""
        return self.openclaw.bootstrap_max_chars(agent)

    def dreaming_owner(self, agent: str) -> DreamingOwner | None:
        """The OpenClaw plugin that consolidates the agent's memory itself, if one does (no
        OpenClaw plugin writes a Claude Code project's memory)."""
        if self.claude_project(agent) is not None:
            return None
        return self.openclaw.dreaming_owner(agent)

    def not_written(self, agent: str) -> str | None:
        """Why dreaming leaves the agent's MEMORY.md and DREAMS.md alone (one line with the
        setting to change), or None when it writes them."""
        owner = self.dreaming_owner(agent)
        if owner is None or self.settings.openclaw.coexist == "write":
            return None
        return owner.refusal()

    def memory_file(self, agent: str) -> Path:
        """`<workspace>/MEMORY.md`; a Claude Code project's `<project>/memory/MEMORY.md`,
        where Claude Code's auto memory is."""
        folder = self.workspace(agent)
        if self._in_project(agent):
            folder = folder / "memory"
        return self._kept_inside(agent, folder / "MEMORY.md")

    def dreams_file(self, agent: str) -> Path:
        """`<workspace>/DREAMS.md`; for a Claude Code project beside its corpus in
        `memory/.dreams/`, out of what Claude Code loads from `memory/`."""
        if self._in_project(agent):
            return self._kept_inside(agent, self.dreams_dir(agent) / "DREAMS.md")
        return self._kept_inside(agent, self.workspace(agent) / "DREAMS.md")

    def dreams_dir(self, agent: str) -> Path:
        """dreaming's own folder in the agent's workspace (the corpus; a Claude Code
        project's DREAMS.md)."""
        return self.workspace(agent) / "memory" / ".dreams"

    def file_folders(self, agent: str) -> list[Path]:
        """Every folder dreaming writes the agent's files in (where a killed write may have
        left a temp file)."""
        ws = self.workspace(agent)
        return list(
            dict.fromkeys([ws, ws / "memory", self.dreams_dir(agent), self.corpus_dir(agent)])
        )

    def _kept_inside(self, agent: str, path: Path) -> Path:
        """`path`, unless it is a link whose target leaves the agent's workspace (and every
        folder `[memory] link_targets` allows): then nothing reads it as memory or writes
        through it, for any command."""
        if not path.is_symlink():
            return path
        target = path.resolve()
        allowed = [
            path.parent.resolve(),
            self.workspace(agent).resolve(),
            *(p.resolve() for p in self.settings.memory.link_targets),
        ]
        if any(target.is_relative_to(root) for root in allowed):
            return path
        raise WorkspaceFileError(
            f"{path} links to {target}, outside the workspace of agent {agent}: not read or"
            " written (allow its folder with [memory] link_targets in dreaming.toml)"
        )

    def corpus_dir(self, agent: str) -> Path:
        return self.dreams_dir(agent) / "session-corpus"

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
