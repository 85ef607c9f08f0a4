"""Agent ids: what one may be (a name, never a path), and the file name an agent's own
files are stored under."""

from __future__ import annotations

import hashlib
import re

from dreaming.errors import ConfigError

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
