"""Where an installation keeps things: `Paths`, one object so nothing else joins paths by
hand (state, databases, locks, each agent's workspace, MEMORY.md, its archive and budget, a
Claude Code project's memory folder)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dreaming.config import (
    ARCHIVE_NAME,
    CLAUDE_CODE_MAX_BYTES,
    CLAUDE_CODE_MAX_LINES,
    AgentSettings,
    Capacity,
    ExcludeSessions,
    Settings,
    Source,
    SourceKind,
)
from dreaming.errors import WorkspaceFileError
from dreaming.names import file_stem
from dreaming.names import project_agent_id as project_agent_id
from dreaming.openclaw_config import CONFIG_FILENAME as OPENCLAW_CONFIG
from dreaming.openclaw_config import DreamingOwner, OpenClawConfig


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
        return CLAUDE_CODE_MAX_LINES if self._in_project(agent) else None

    def bootstrap_max_chars(self, agent: str) -> int:
        """How much of MEMORY.md OpenClaw loads for the agent (`bootstrapMaxChars`)."""
        return self.openclaw.bootstrap_max_chars(agent)

    def capacity(self, agent: str) -> Capacity:
        """MEMORY.md's budget for the agent: `[agents.<id>]`, else `[memory]`, else (the
        deprecated) `[deep] max_memory_chars`, else what the agent loads of it (OpenClaw's
        `bootstrapMaxChars`; Claude Code's 25 KB, counted in bytes; `default_max_lines`).
        Claude Code never reads openclaw.json: its bootstrapMaxChars bounds no project."""
        own = self.settings.agents.get(agent) or AgentSettings()
        memory = self.settings.memory
        bytes_ = self._claude_code_loads(agent)
        chars: tuple[int | None, str] = (
            (CLAUDE_CODE_MAX_BYTES, "Claude Code loads 25 KB")
            if bytes_
            else (self.bootstrap_max_chars(agent), "bootstrapMaxChars")
        )
        for value, name in (
            (self.settings.deep.max_memory_chars, "[deep] max_memory_chars"),
            (memory.max_chars, "[memory] max_chars"),
            (own.max_chars, f"[agents.{agent}] max_chars"),
        ):
            if value is not None:
                chars, bytes_ = (value, name), False
        lines = self.default_max_lines(agent)
        for value, name in (
            (memory.max_lines, "[memory] max_lines"),
            (own.max_lines, f"[agents.{agent}] max_lines"),
        ):
            if value is not None:
                lines = (value, name)
        unit: Literal["chars", "bytes"] = "bytes" if bytes_ else "chars"
        return Capacity(chars[0], lines[0], memory.half_life_days, chars[1], lines[1], unit)

    def default_max_lines(self, agent: str) -> tuple[int | None, str]:
        """How many lines of MEMORY.md the agent loads when no setting says: OpenClaw loads
        characters, not lines (none); an agent whose transcripts are all Claude Code's loads
        its first 200 lines."""
        if self._claude_code_loads(agent):
            return CLAUDE_CODE_MAX_LINES, "Claude Code loads 200 lines"
        return None, ""

    def _claude_code_loads(self, agent: str) -> bool:
        """Whether Claude Code is what loads the agent's MEMORY.md: a project's, or that of an
        agent whose transcripts are all Claude Code's."""
        kinds = {s.kind for s in self.settings.sources if s.agent == agent}
        return self.memory_lines(agent) is not None or kinds == {SourceKind.CLAUDE_CODE}

    def archive_file(self, agent: str) -> Path:
        """Where the entries that did not fit the agent's MEMORY.md are archived: the
        memory/ folder beside it (MEMORY.md's own folder when that is one already)."""
        memory = self.memory_file(agent)
        folder = memory.parent if memory.parent.name == "memory" else memory.parent / "memory"
        return self._kept_inside(agent, folder / ARCHIVE_NAME)

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
