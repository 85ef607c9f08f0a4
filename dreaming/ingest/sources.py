"""Which transcript files belong to which agent, from the state dir and configured sources."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Collection, Iterable

from dreaming.config import Source, SourceKind
from dreaming.errors import ConfigError
from dreaming.ingest.transcripts import (
    claude_projects,
    discover_claude_code,
    discover_claude_project,
    discover_event_log,
    discover_openclaw,
)
from dreaming.messages import SessionFile
from dreaming.paths import Paths, project_agent_id


def discover(paths: Paths, agents: Collection[str] | None = None) -> dict[str, list[SessionFile]]:
    """Every known session file, grouped by agent, each group sorted by path (only the
    given agents' when `agents` is set). A Claude Code source's project folders are an
    agent each (`<agent>:<project>`) unless the source says `per_project = false`."""
    found: list[SessionFile] = []
    settings = paths.settings
    if settings.read_state_dir and (paths.state_dir / "agents").is_dir():
        found.extend(discover_openclaw(paths.state_dir, agents))
    for src in settings.sources:
        if src.kind is SourceKind.OPENCLAW:
            found.extend(discover_openclaw(src.path, agents))
            continue
        if not src.agent:
            raise ConfigError(f"sources: a {src.kind.value} source ({src.path}) needs `agent`")
        if src.projects_apart:
            found.extend(_claude_projects(src, src.agent, agents))
            continue
        if agents is not None and src.agent not in agents:
            continue
        if src.kind is SourceKind.CLAUDE_CODE:
            found.extend(discover_claude_code(src.path, src.agent))
        else:
            found.extend(discover_event_log(src.path, src.agent))
    return _group(found)


def _claude_projects(src: Source, agent: str, agents: Collection[str] | None) -> list[SessionFile]:
    """Each project folder's transcripts as its own agent's (only `agents`' when given)."""
    if agents is not None and not any(a.startswith(f"{agent}:") for a in agents):
        return []  # not one of this source's agents: its folder is not even listed
    found: list[SessionFile] = []
    for project in claude_projects(src.path):
        name = project_agent_id(agent, project.name)
        if agents is None or name in agents:
            found.extend(discover_claude_project(project, name))
    return found


def _group(files: Iterable[SessionFile]) -> dict[str, list[SessionFile]]:
    grouped: dict[str, dict[str, SessionFile]] = defaultdict(dict)
    for f in files:
        # The same file reached through two configured roots is one session. (absolute()
        # rather than resolve(): no lstat per path component of ten thousand files.)
        grouped[f.agent].setdefault(os.path.normpath(f.path.absolute()), f)
    return {
        agent: sorted(by_path.values(), key=lambda f: str(f.path))
        for agent, by_path in sorted(grouped.items())
    }
