"""Finding transcript files on disk and what is known about their sessions.

OpenClaw:    <root>/agents/<agentId>/sessions/<sessionId>.jsonl, indexed by sessions.json
Claude Code: <root>/<project>/<session>.jsonl and <root>/<project>/<session>/subagents/*.jsonl
Event log:   any *.jsonl under a folder (or one file)

Every function returns its SessionFiles sorted by path, so runs are deterministic.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import logging
import os
import stat
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dreaming.messages import Format, SessionFile, SessionKind

from ._common import HEADER_LIMIT, header_time, parse_timestamp
from ._session_keys import parse_session_key

logger = logging.getLogger(__name__)

# Names OpenClaw gives to .jsonl files beside the transcripts that are not live transcripts:
# compaction checkpoints, archives left by /reset and deletion, and per-run trajectory
# sidecars (timing events, not conversation).
_NOT_TRANSCRIPT_MARKERS = (".checkpoint.", ".reset.", ".deleted.", ".bak", ".trajectory.")


# --------------------------------------------------------------------------- OpenClaw


@dataclass(slots=True)
class _Index:
    """sessions.json, looked up by transcript file name and by session id."""

    by_file: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    by_id: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    def find(self, path: Path) -> tuple[str, dict[str, Any]] | None:
        found = self.by_file.get(path.name) or self.by_id.get(path.stem)
        if found is None and "-topic-" in path.stem:
            # Telegram topic transcripts are <sessionId>-topic-<threadId>.jsonl.
            found = self.by_id.get(path.stem.split("-topic-", 1)[0])
        return found


def discover_openclaw(
    root: Path,
    agents: Collection[str] | None = None,
    sessions: Collection[str] | None = None,
) -> list[SessionFile]:
    """Every live transcript under `<root>/agents/*/sessions/`, with its sessions.json facts
    (only those of `agents` when given: a purge of one agent lists no other agent's files).

    `sessions`, when given, keeps only the transcripts whose session id (file stem) or
    session key is one of them. No transcript is opened: when a session without
    sessionStartedAt started is in its header, which the read takes (`with_start` for a
    caller that does not read it).

    A transcript without an index entry is still found (kind INTERACTIVE, no key). A broken
    sessions.json is logged as a warning and treated as absent.
    """
    found: list[SessionFile] = []
    for agent_dir in _agent_dirs(root, agents):
        sessions_dir = agent_dir / "sessions"
        if not sessions_dir.is_dir():
            continue
        index = _load_index(sessions_dir / "sessions.json")
        for path, unreadable in _entries(sessions_dir, "*.jsonl", keep=_named(index, sessions)):
            if not _transcript_name(path.name):
                continue
            if unreadable is not None:
                found.append(_skipped(agent_dir.name, path, Format.OPENCLAW, unreadable))
                continue
            found.append(_openclaw_session(agent_dir.name, path, index.find(path)))
    return sorted(found, key=lambda s: s.path)


def openclaw_agents(root: Path, agents: Collection[str] | None = None) -> list[str]:
    """The agents `discover_openclaw` finds transcripts of (of `agents`, when given), told
    from the names in their sessions folders alone: no transcript or index is opened, so
    a fleet's parent can hand out ten thousand agents without reading their files."""
    names = []
    for agent_dir in _agent_dirs(root, agents):
        try:
            with os.scandir(agent_dir / "sessions") as entries:
                if any(_transcript_name(e.name) for e in entries):
                    names.append(agent_dir.name)
        except OSError:
            continue
    return names


def _transcript_name(name: str) -> bool:
    return name.endswith(".jsonl") and not any(m in name for m in _NOT_TRANSCRIPT_MARKERS)


def _agent_dirs(root: Path, agents: Collection[str] | None) -> list[Path]:
    """`<root>/agents/*` (only `agents`, when given: the folder's names are read, not every
    agent's folder looked at), sorted."""
    agents_dir = root / "agents"
    if agents is None:
        return _subdirs(agents_dir)
    # Names as the folder spells them: a case-insensitive disk must not make "Main" the agent
    # "main", and no ".." leads out of the agents folder.
    wanted = set(agents)
    names = _names_in(agents_dir, wanted)
    if names is None:
        return []
    return [agents_dir / a for a in sorted(wanted & names) if (agents_dir / a).is_dir()]


# The names in an agents folder, as last listed, with the folder's mtime then: a fleet
# worker finds one agent's transcripts per run, and listing ten thousand names for each
# made every agent's night cost in proportion to the fleet. A listing is used while the
# folder's mtime (which any entry added, removed or renamed changes) is what it was, and
# only to confirm names: a name missing from it is looked for in a new one.
_LISTED: dict[Path, tuple[int, frozenset[str]]] = {}
_MAX_LISTED = 64


def _names_in(folder: Path, wanted: set[str]) -> frozenset[str] | None:
    """The names in `folder`: the last listing when it still holds and has all of `wanted`,
    else a new one (None: the folder cannot be read)."""
    try:
        mtime = folder.stat().st_mtime_ns
        cached = _LISTED.get(folder)
        if cached is not None and cached[0] == mtime and wanted <= cached[1]:
            return cached[1]
        names = frozenset(p.name for p in folder.iterdir())
    except OSError:
        return None
    if len(_LISTED) >= _MAX_LISTED:
        _LISTED.clear()
    _LISTED[folder] = (mtime, names)
    return names


def _named(index: _Index, sessions: Collection[str] | None) -> Callable[[Path], bool] | None:
    """Whether a transcript is one of `sessions` (by id or key); None: every one is."""
    if sessions is None:
        return None
    wanted = frozenset(sessions)

    def keep(path: Path) -> bool:
        if path.stem in wanted:
            return True
        found = index.find(path)
        return found is not None and found[0] in wanted

    return keep


def _load_index(path: Path) -> _Index:
    index = _Index()
    if not path.is_file():
        return index
    try:
        with path.open("rb") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:
        logger.warning("%s: unreadable session index (%s); sessions found without keys", path, exc)
        return index
    if not isinstance(data, dict):
        logger.warning("%s: session index is not an object; sessions found without keys", path)
        return index
    for key, entry in data.items():
        if not isinstance(entry, dict):
            logger.warning("%s: entry %r is not an object; ignored", path, key)
            continue
        session_id = entry.get("sessionId")
        if isinstance(session_id, str) and session_id:
            current = index.by_id.get(session_id)
            # Several keys can point at one session (aliases, resets): the latest update wins.
            if current is None or _updated(entry) > _updated(current[1]):
                index.by_id[session_id] = (key, entry)
        session_file = entry.get("sessionFile")
        if isinstance(session_file, str) and session_file:
            # Written by the gateway's OS, so either separator may appear.
            name = session_file.replace("\\", "/").rsplit("/", 1)[-1]
            index.by_file[name] = (key, entry)
    return index


def _updated(entry: dict[str, Any]) -> float:
    value = entry.get("updatedAt")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _openclaw_session(
    agent: str, path: Path, indexed: tuple[str, dict[str, Any]] | None
) -> SessionFile:
    if indexed is None:
        return SessionFile(
            agent=agent,
            session_id=path.stem,
            path=path,
            format=Format.OPENCLAW,
            start_unread=True,
        )
    key, entry = indexed
    facts = parse_session_key(key)
    origin = entry.get("origin")
    if not isinstance(origin, dict):
        origin = {}
    channel = _first_str(entry.get("channel"), origin.get("provider"), entry.get("lastChannel"))
    channel = channel or facts.channel
    chat_type = _first_str(entry.get("chatType"), origin.get("chatType")) or facts.chat_type
    external = _first_str(entry.get("hookExternalContentSource")) or facts.external_source
    participants = _participants(
        channel,
        prefixed=(origin.get("from"), origin.get("to"), entry.get("lastTo"), facts.peer),
        plain=(entry.get("displayName"),),
    )
    created_at = parse_timestamp(entry.get("sessionStartedAt"))
    extra: dict[str, str] = {}
    updated_at = parse_timestamp(entry.get("updatedAt"))
    if updated_at is not None:
        extra["updated_at"] = updated_at.isoformat()
    return SessionFile(
        agent=agent,
        session_id=path.stem,
        path=path,
        format=Format.OPENCLAW,
        session_key=key,
        channel=channel,
        chat_type=chat_type,
        external_source=external,
        participants=participants,
        kind=facts.kind,
        created_at=created_at,
        start_unread=created_at is None,  # the header may say (see `with_start`)
        extra=extra,
        classified_by="index",
    )


def _first_str(*values: object) -> str | None:
    for value in values:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _participants(
    channel: str | None, *, prefixed: Iterable[object], plain: Iterable[object]
) -> tuple[str, ...]:
    """Peer ids as `<channel>:<id>` (ids that already carry a prefix are kept), then names."""
    out: list[str] = []
    for value in prefixed:
        text = _first_str(value)
        if text is None:
            continue
        out.append(f"{channel}:{text}" if channel and ":" not in text else text)
    for value in plain:
        text = _first_str(value)
        if text is not None:
            out.append(text)
    return tuple(dict.fromkeys(out))


def with_start(sf: SessionFile) -> SessionFile:
    """`sf` with when its session started, read from its header if discovery left that to
    the reader (`SessionFile.start_unread`), for a caller that will not read the file."""
    if not sf.start_unread:
        return sf
    return dataclasses.replace(sf, created_at=_header_timestamp(sf.path), start_unread=False)


def _header_timestamp(path: Path) -> datetime | None:
    """The session header's timestamp, when the first line is one."""
    try:
        with path.open("rb") as f:
            first = f.readline(HEADER_LIMIT)
    except OSError:
        return None
    return header_time(first)


# --------------------------------------------------------------------------- Claude Code


def claude_projects(root: Path) -> list[Path]:
    """The project folders of a Claude Code projects folder (`~/.claude/projects/<project>`,
    sorted), or `[root]` when `root` is one project folder itself (it holds transcripts)."""
    return [root] if any(True for _ in _files(root, "*.jsonl")) else _subdirs(root)


def discover_claude_code(root: Path, agent: str) -> list[SessionFile]:
    """Every transcript under a Claude Code projects folder (or one project folder), all
    for one agent (a source with `per_project = false`; see `discover_claude_project`).

    Session id = file stem; the project folder name goes to `extra["project"]`. Subagent
    transcripts are kind SUBAGENT, `agent-acompact-*` (the harness summarising itself)
    COMPACTION.
    """
    found = [sf for project in claude_projects(root) for sf in _project_files(project, agent)]
    return _unique_ids(found, root)


def discover_claude_project(project: Path, agent: str) -> list[SessionFile]:
    """Every transcript of one Claude Code project folder, for that project's own agent:
    its session ids depend on nothing outside the folder."""
    return _unique_ids(_project_files(project, agent), project)


def _project_files(project: Path, agent: str) -> list[SessionFile]:
    found: list[SessionFile] = []
    for path, unreadable in _entries(project, "*.jsonl"):
        if unreadable is not None:
            found.append(_skipped(agent, path, Format.CLAUDE_CODE, unreadable))
            continue
        # Older Claude Code kept sidechain agents beside the sessions as agent-<id>.jsonl.
        kind = _agent_file_kind(path) or SessionKind.INTERACTIVE
        found.append(_claude_session(agent, path, kind, project.name))
    for session_dir in _subdirs(project):
        for path in _files(session_dir / "subagents", "*.jsonl"):
            kind = _agent_file_kind(path) or SessionKind.SUBAGENT
            session = _claude_session(agent, path, kind, project.name)
            session.extra["parent_session"] = session_dir.name
            found.append(session)
    return found


def _agent_file_kind(path: Path) -> SessionKind | None:
    if path.stem.startswith("agent-acompact"):
        return SessionKind.COMPACTION
    if path.stem.startswith("agent-"):
        return SessionKind.SUBAGENT
    return None


def _claude_session(agent: str, path: Path, kind: SessionKind, project: str) -> SessionFile:
    return SessionFile(
        agent=agent,
        session_id=path.stem,
        path=path,
        format=Format.CLAUDE_CODE,
        kind=kind,
        extra={"project": project},
        # A Claude Code projects folder is one person's own coding sessions: the operator
        # named it as a source.
        classified_by="source",
    )


# --------------------------------------------------------------------------- event log


def discover_event_log(root: Path, agent: str) -> list[SessionFile]:
    """Every *.jsonl file under `root` (or `root` itself when it is a file).

    Session id = the path below root without `.jsonl`, folders joined by `-`, so it depends
    on nothing but the file's own place (ids stay stable when other files come and go).
    """
    if root.is_file():
        return [
            SessionFile(
                agent=agent,
                session_id=root.stem,
                path=root,
                format=Format.EVENT_LOG,
                classified_by="source",
            )
        ]
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.rglob("*.jsonl")):
        sid = "-".join(path.relative_to(root).with_suffix("").parts)
        unreadable = _unreadable(path, root)
        if unreadable is not None:
            found.append(_skipped(agent, path, Format.EVENT_LOG, unreadable))
            continue
        found.append(
            SessionFile(
                agent=agent,
                session_id=sid,
                path=path,
                format=Format.EVENT_LOG,
                classified_by="source",
            )
        )
    return _unique_ids(found, root)


def _unique_ids(found: list[SessionFile], root: Path) -> list[SessionFile]:
    """Sorted by path, with one session id per file. Two files whose ids collide (event log
    `a/b-c.jsonl` and `a-b/c.jsonl`; Claude Code `p1/short.jsonl` and `p2/short.jsonl`): the
    first by path keeps the plain id, the others get a suffix from their own path, so no
    file is hidden behind another and ids stay stable while the files stay."""
    found = sorted(found, key=lambda s: s.path)
    seen: set[str] = set()
    out = []
    for sf in found:
        if sf.session_id in seen:
            rel = str(sf.path.relative_to(root)) if sf.path.is_relative_to(root) else str(sf.path)
            tag = hashlib.blake2b(rel.encode("utf-8", "surrogateescape"), digest_size=4).hexdigest()
            sf = dataclasses.replace(sf, session_id=f"{sf.session_id}~{tag}")
        seen.add(sf.session_id)
        out.append(sf)
    return out


# --------------------------------------------------------------------------- helpers


def _skipped(agent: str, path: Path, fmt: Format, why: str) -> SessionFile:
    """A name that looks like a transcript but cannot be read as one: seen, and skipped
    with its reason (`extra["skip"]`), never opened."""
    return SessionFile(
        agent=agent, session_id=path.stem, path=path, format=fmt, extra={"skip": why}
    )


def _subdirs(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []


def _files(folder: Path, pattern: str) -> list[Path]:
    return [p for p, why in _entries(folder, pattern) if why is None]


def _entries(
    folder: Path, pattern: str, keep: Callable[[Path], bool] | None = None
) -> list[tuple[Path, str | None]]:
    """Every name matching `pattern` (and `keep`, when given), with why it cannot be read as
    a transcript (None: it can). Nothing is opened here: a FIFO would block a reader
    forever."""
    try:
        # The names `folder.glob(pattern)` gives, each with the type the folder's listing
        # says (most file systems tell it there): a regular file costs no stat of its own.
        with os.scandir(folder) as listing:
            found = sorted(
                (e for e in listing if fnmatch.fnmatchcase(e.name, pattern)), key=lambda e: e.name
            )
    except OSError:
        return []
    entries = [(folder / e.name, e) for e in found]
    return [(p, _unreadable(p, folder, e)) for p, e in entries if keep is None or keep(p)]


def _unreadable(path: Path, folder: Path, entry: os.DirEntry[str] | None = None) -> str | None:
    """Why `path` cannot be read as a transcript, or None. `entry`: its folder listing's."""
    try:
        if entry is not None and entry.is_file(follow_symlinks=False):
            return None  # a regular file (neither a link nor a FIFO): no stat needed
        if path.is_symlink():
            target = path.resolve(strict=True)
            # Another agent's transcript linked into this folder is that agent's words: a
            # link may not leave the folder it sits in.
            if not target.is_relative_to(folder.resolve()):
                return "symlink-outside-folder"
        mode = path.stat().st_mode
    except (OSError, RuntimeError):
        return "dangling-symlink" if path.is_symlink() else "unreadable-file"
    if stat.S_ISDIR(mode):
        return "not-a-file"
    if not stat.S_ISREG(mode):
        return "not-a-regular-file"  # FIFO, socket, device
    return None
