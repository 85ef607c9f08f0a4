"""Which transcript files belong to which agent, from the state dir and configured sources."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Collection, Iterable

from dreaming.errors import ConfigError
from dreaming.ingest.transcripts import (
    SourceRoot,
    discover_openclaw,
    format_named,
    openclaw_agents,
)
from dreaming.messages import SessionFile
from dreaming.paths import Paths


def discover(
    paths: Paths,
    agents: Collection[str] | None = None,
    *,
    sessions: Collection[str] | None = None,
) -> dict[str, list[SessionFile]]:
    """Every known session file, grouped by agent, each group sorted by path (only the
    given agents' when `agents` is set). A Claude Code source's project folders are an
    agent each (`<agent>:<project>`) unless the source says `per_project = false`.

    `sessions` (ids or keys) lets discovery leave out OpenClaw transcripts that are none of
    them, unopened: what a purge of some sessions needs. Other formats open no file to
    discover, and their ids depend on their neighbours (see `_unique_ids`), so they are
    listed whole; a caller still matches what it was given.

    Each source is read by its kind's entry in the format table; a kind the table does not
    hold is a ConfigError."""
    found: list[SessionFile] = []
    settings = paths.settings
    if settings.read_state_dir and (paths.state_dir / "agents").is_dir():
        found.extend(discover_openclaw(paths.state_dir, agents, sessions))
    for src in settings.sources:
        fmt = format_named(src.kind)
        if fmt.needs_agent and not src.agent:
            raise ConfigError(f"sources: a {src.kind.value} source ({src.path}) needs `agent`")
        root = SourceRoot(
            src.path, src.agent, agents, per_project=src.projects_apart, sessions=sessions
        )
        found.extend(fmt.discover(root))
    return _group(found)


def agents_with_transcripts(paths: Paths, agents: Collection[str] | None = None) -> set[str]:
    """The agents `discover` would return files of (of `agents`, when given), without
    opening any transcript: OpenClaw agents by the names in their sessions folders, the
    other formats by their discovery, which opens no file."""
    names: set[str] = set()
    settings = paths.settings
    if settings.read_state_dir and (paths.state_dir / "agents").is_dir():
        names.update(openclaw_agents(paths.state_dir, agents))
    for src in settings.sources:
        fmt = format_named(src.kind)
        if fmt.needs_agent and not src.agent:
            raise ConfigError(f"sources: a {src.kind.value} source ({src.path}) needs `agent`")
        names |= fmt.agents_of(
            SourceRoot(src.path, src.agent, agents, per_project=src.projects_apart)
        )
    return names


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
