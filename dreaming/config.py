"""Validated settings: `dreaming.toml`, where state lives, and per-agent paths.

Unknown keys are errors that name the file and the key, because a misspelt
policy key (say `excludeSesions`) would otherwise silently admit what the
operator meant to keep out.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
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
from dreaming.errors import ConfigError
from dreaming.llm import BudgetSettings, LLMProfile
from dreaming.messages import Format
from dreaming.names import check_agent_id as check_agent_id
from dreaming.names import file_stem as file_stem


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


CONFIG_ENV = "DREAMING_CONFIG"
STATE_DIR_ENV = "DREAMING_STATE_DIR"
CONFIG_FILENAME = "dreaming.toml"


# A source's kind is the name of the transcript format it holds: one enum, not two.
SourceKind = Format


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
    # Light reads ahead in a second process when a night has this many new MB to read in
    # two files or more (see dreaming.phases.light._ahead); 0: always read in-process.
    read_ahead_mb: int = Field(default=8, ge=0)


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
    # A Claude Code project's agent keeps its files in the project's memory/ regardless.
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
    (default: the agent's `bootstrapMaxChars`, what OpenClaw loads of it; for a Claude Code
    agent 25,000 bytes of UTF-8, what Claude Code loads) and `max_lines` (default: none for
    OpenClaw; a Claude Code agent loads the first 200 lines). Entries
    that do not fit move to an archive the agent searches but does not load, the least
    valuable first: an entry's value halves every `half_life_days` on the agent's clock
    since it was last said (`dreaming.memory.capacity`). `[agents.<id>]` may set its own
    `max_chars` and `max_lines`."""

    link_targets: tuple[Path, ...] = ()
    max_chars: int | None = Field(default=None, ge=100)
    max_lines: int | None = Field(default=None, ge=1)
    half_life_days: float = Field(default=180.0, gt=0)


# Claude Code loads the first 200 lines of a project's MEMORY.md (auto memory), or its first
# 25 KB (UTF-8 bytes) when that comes first; 25,000 holds under either reading of "KB".
CLAUDE_CODE_MAX_LINES = 200
CLAUDE_CODE_MAX_BYTES = 25_000
# The archive of entries that did not fit MEMORY.md: in the workspace's memory/ folder, which
# OpenClaw's memory search indexes (Claude Code reads its memory folder's files on demand).
ARCHIVE_NAME = "dreaming-archive.md"


@dataclasses.dataclass(frozen=True)
class Capacity:
    """How big one agent's MEMORY.md may be, and what set each bound (for `status`)."""

    max_chars: int | None  # None: no bound; counted in `unit`
    max_lines: int | None
    half_life_days: float = 180.0
    chars_from: str = ""  # "bootstrapMaxChars", "[memory] max_chars", ...
    lines_from: str = ""
    # How `max_chars` counts: "chars" as OpenClaw does (UTF-16 code units), or "bytes" of
    # UTF-8 as Claude Code does (a setting's max_chars always counts characters).
    unit: Literal["chars", "bytes"] = "chars"

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
