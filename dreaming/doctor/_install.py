"""The checks of the installation itself: the state folder, the settings, openclaw.json,
the tag registry and the transcript sources."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from dreaming.app import App
from dreaming.config import Settings, Source, SourceKind, find_config, load_settings
from dreaming.doctor._findings import Diagnosis, Level, names
from dreaming.errors import ConfigError
from dreaming.ingest.tags import TagRegistry, build_registry
from dreaming.ingest.transcripts import SourceRoot, discover_openclaw, format_named
from dreaming.messages import Format, SessionFile
from dreaming.openclaw_config import OpenClawConfig, load_openclaw
from dreaming.paths import Paths

STATE_FIX = (
    "give --state-dir (or DREAMING_STATE_DIR) the folder OpenClaw keeps its state in,"
    " the one that holds agents/"
)


def check_state_folder(d: Diagnosis, state: Path) -> None:
    if not state.exists():
        d.add("state", Level.FAIL, f"{state} does not exist", STATE_FIX)
        return
    if not state.is_dir():
        d.add("state", Level.FAIL, f"{state} is not a folder", STATE_FIX)
        return
    home = state / "dreaming"
    folders = [p for p in (home, home / "agents", home / "locks") if p.is_dir()] or [state]
    blocked = [p for p in folders if not os.access(p, os.W_OK | os.X_OK)]
    if blocked:
        d.add(
            "state",
            Level.FAIL,
            f"{blocked[0]} is not writable by this user: runs cannot record their state",
            f"run dreaming as the user that owns {blocked[0]}, or make it writable (chmod u+w)",
        )
        return
    kept = f"dreaming's state in {home}" if home.is_dir() else f"the first run makes {home}"
    d.add("state", Level.OK, f"{state} exists and is writable ({kept})")


def check_settings(
    d: Diagnosis, state: Path, config: Path | None, env: Mapping[str, str]
) -> tuple[Settings | None, Path | None]:
    path = find_config(config, state, env)
    if path is None:
        d.add(
            "settings",
            Level.OK,
            f"no dreaming.toml (none in {state}, no --config or DREAMING_CONFIG):"
            " the defaults hold",
        )
        return Settings(), None
    try:
        settings = load_settings(path)
    except ConfigError as err:
        d.add(
            "settings",
            Level.FAIL,
            f"{err} (the checks that need the settings were skipped)",
            "correct the key the message names; every command stops on this error",
        )
        return None, path
    d.add("settings", Level.OK, f"{path} loads")
    return settings, path


def check_openclaw(
    d: Diagnosis, state: Path, settings: Settings | None, env: Mapping[str, str]
) -> OpenClawConfig | None:
    explicit = settings.openclaw.config if settings is not None else None
    try:
        found = load_openclaw(state, explicit, env)
    except ConfigError as err:
        d.add(
            "openclaw",
            Level.FAIL,
            f"{err} (the checks that need it were skipped)",
            "fix the file where the message says (JSON5: comments and trailing commas are"
            " fine); every command stops on this error",
        )
        return None
    if not found.found:
        d.add(
            "openclaw",
            Level.OK,
            f"no {found.path}: OpenClaw's defaults hold (if its file is elsewhere, name it"
            " with [openclaw] config or OPENCLAW_CONFIG_PATH)",
        )
    else:
        roster = ", ".join(e.id for e in found.agents) or "none listed"
        d.add(
            "openclaw",
            Level.OK,
            f"{found.path} read (agents: {roster}; default {found.default_agent()})",
        )
    return found


def check_tags(d: Diagnosis, settings: Settings, env: Mapping[str, str]) -> TagRegistry:
    missing = [p for p in settings.tags.plugin_dirs if not p.is_dir()]
    for folder in missing:
        d.add(
            "tags",
            Level.WARN,
            f"[tags] plugin_dirs: {folder} is not a folder: no plugin manifest is read from it",
            "correct the path in dreaming.toml, or remove it",
        )
    try:
        registry = build_registry(
            env=env,
            config_tags=settings.tags.declarations,
            plugin_dirs=[p for p in settings.tags.plugin_dirs if p not in missing],
        )
    except ConfigError as err:
        d.add("tags", Level.FAIL, str(err), "correct the declaration the message names")
        return build_registry(env={})
    for warning in registry.warnings:
        d.add("tags", Level.WARN, warning, "see `dreaming tags` for every active tag")
    d.add("tags", Level.OK, f"{len(registry.declarations)} injected-context tags are stripped")
    return registry


# -- sources --------------------------------------------------------------------------------


def check_sources(d: Diagnosis, paths: Paths) -> dict[str, list[SessionFile]]:
    """Each place transcripts are read from, and what it holds: agent -> its files."""
    found: dict[str, list[SessionFile]] = defaultdict(list)
    settings = paths.settings
    if settings.read_state_dir:
        root = paths.state_dir / "agents"
        if root.is_dir():
            files = discover_openclaw(paths.state_dir)
            _source_finding(d, f"the state folder ({root})", SourceKind.OPENCLAW, files)
            _group(found, files)
        elif settings.sources:
            d.add(
                "sources",
                Level.OK,
                f"no {root}: only the [[sources]] are read",
            )
    for i, src in enumerate(settings.sources, 1):
        files = _source(d, i, src)
        _group(found, files)
    if not found and not _agent_folders(paths):
        d.add(
            "sources",
            Level.FAIL,
            "no transcripts anywhere: nothing to consolidate",
            "point --state-dir at OpenClaw's state folder, or add a [[sources]] table"
            " (kind, path, agent) for Claude Code or event-log transcripts",
        )
    return dict(found)


def _source(d: Diagnosis, i: int, src: Source) -> list[SessionFile]:
    label = f"[[sources]] #{i} ({src.kind.value}, {src.path})"
    if not src.path.exists():
        d.add(
            "sources",
            Level.FAIL,
            f"{label}: the path does not exist, so it matches nothing",
            "correct `path` in dreaming.toml (relative paths are taken against the file's"
            " folder), or remove the source",
        )
        return []
    fmt = format_named(src.kind)
    if fmt.needs_agent and not src.agent:
        d.add(
            "sources",
            Level.FAIL,
            f"{label}: no `agent`: a {src.kind.value} source names the agent it belongs to",
            'add agent = "<name>" to the source',
        )
        return []
    # Pooled, for everyone: what the source holds, whichever agents it ends up serving.
    files = fmt.discover(SourceRoot(src.path, src.agent))
    _source_finding(d, label, src.kind, files)
    return files


def _source_finding(d: Diagnosis, label: str, kind: SourceKind, files: list[SessionFile]) -> None:
    if not files:
        d.add(
            "sources",
            Level.WARN,
            f"{label}: holds no transcripts",
            f"check the path and the kind: a {kind.value} source reads {format_named(kind).layout}",
        )
        return
    agents = sorted({f.agent for f in files})
    d.add(
        "sources",
        Level.OK,
        f"{label}: {len(files)} transcript(s) of {names(agents, 'agent')}",
    )


def _group(found: dict[str, list[SessionFile]], files: Iterable[SessionFile]) -> None:
    for f in files:
        found[f.agent].append(f)


def _agent_folders(paths: Paths) -> bool:
    """An OpenClaw root with agent folders but no transcripts yet is a real install."""
    folder = paths.state_dir / "agents"
    return folder.is_dir() and any(p.is_dir() for p in folder.iterdir())


def openclaw_agents(discovered: Mapping[str, list[SessionFile]]) -> list[str]:
    """Agents whose transcripts are OpenClaw's: OpenClaw loads their MEMORY.md."""
    return sorted(
        a for a, files in discovered.items() if any(f.format is Format.OPENCLAW for f in files)
    )


def known_agents(d: Diagnosis, app: App) -> list[str]:
    try:
        return app.known_agents()
    except SQLAlchemyError as err:  # a fleet database that cannot be reached
        d.add(
            "state",
            Level.FAIL,
            f"cannot read the fleet database: {' '.join(str(err).split())[:300]}",
            "check database_url in dreaming.toml and that the database is up",
        )
        return []
