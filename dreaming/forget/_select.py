"""Which sessions a purge targets: explicit ids and keys, a hook source, or a participant,
resolved against recorded sessions (live or archived) and discovered transcript files."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePath
from typing import Any

from sqlalchemy import Connection, and_, or_, select

from dreaming.ingest import sessions, tombstones
from dreaming.ingest.transcripts import with_start
from dreaming.messages import SessionFile
from dreaming.store.tables import SESSIONS


@dataclass(frozen=True)
class Selector:
    sessions: tuple[str, ...] = ()
    hook_source: str | None = None
    since: datetime | None = None
    participant: str | None = None

    def __post_init__(self) -> None:
        given = [bool(self.sessions), self.hook_source is not None, self.participant is not None]
        if sum(given) != 1:
            raise ValueError("give exactly one of --session, --hook-source or --participant")
        if self.since is not None and self.hook_source is None:
            raise ValueError("--since goes with --hook-source")

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessions": list(self.sessions),
            "hook_source": self.hook_source,
            "since": self.since.isoformat() if self.since else None,
            "participant": self.participant,
        }


@dataclass(frozen=True)
class Target:
    session_id: str
    session_key: str | None
    resolved: bool  # False: an explicit id that matched nothing known, kept as an exact id
    path: str | None
    already_forgotten: bool = False


def _participant_matches(wanted: str, participants: Iterable[str]) -> bool:
    w = wanted.casefold()
    for p in participants:
        q = p.casefold()
        if q == w or q.endswith(":" + w) or w.endswith(":" + q):
            return True
    return False


def _aware(ts: datetime | None) -> datetime | None:
    """A moment as UTC-aware. The database hands back aware values already; this is for what
    comes from elsewhere: a library caller's `Selector.since`, a transcript's own times."""
    if ts is None:
        return None
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def _started(session: dict[str, Any]) -> datetime | None:
    """When a session started: its record's time, or its file's (the header, read now)."""
    f: SessionFile | None = session.get("file")
    started: datetime | None = session["created_at"]
    return with_start(f).created_at if started is None and f is not None else started


def resolve(
    conn: Connection | None, agent: str, selector: Selector, files: Sequence[SessionFile]
) -> list[Target]:
    """Match the selector against recorded sessions (live or archived) and discovered files."""
    known: dict[str, dict[str, Any]] = {}
    for f in files:
        known[f.session_id] = {
            "session_id": f.session_id,
            "session_key": f.session_key,
            "path": str(f.path),
            "external_source": f.external_source,
            "participants": list(f.participants),
            "created_at": f.created_at,
            "parent": f.extra.get("parent_session"),
            "file": f,  # its header read only where its start is asked (`_started`)
        }
    tombstoned: set[str] = set()
    if conn is not None:
        for r in _records(conn, agent, selector, files):
            known[r["session_id"]] = {
                "session_id": r["session_id"],
                "session_key": r["session_key"],
                "path": r["path"],
                "external_source": r["external_source"],
                # Read (JSON) only by a participant selector: see _participants_of.
                "participants": r["participants"],
                "created_at": r["created_at"],
                "parent": _parent_of(r["path"]),
            }
        for sid, key in tombstones.in_db(conn, agent):
            tombstoned.add(sid)
            known.setdefault(
                sid,
                {
                    "session_id": sid,
                    "session_key": key,
                    "path": None,
                    "external_source": None,
                    "participants": [],
                    "created_at": None,
                },
            )

    def target(s: dict[str, Any]) -> Target:
        return Target(
            s["session_id"], s["session_key"], True, s["path"], s["session_id"] in tombstoned
        )

    out: dict[str, Target] = {}
    if selector.sessions:
        for wanted in selector.sessions:
            hits = [s for s in known.values() if wanted in (s["session_id"], s["session_key"])]
            if not hits:
                out.setdefault(wanted, Target(wanted, None, False, None, wanted in tombstoned))
            for s in hits:
                out.setdefault(s["session_id"], target(s))
    elif selector.hook_source is not None:
        src = selector.hook_source.casefold()
        since = _aware(selector.since)
        for s in known.values():
            if (s["external_source"] or "").casefold() != src:
                continue
            created = _aware(_started(s)) if since is not None else None
            if since is not None and (created is None or created < since):
                continue
            out.setdefault(s["session_id"], target(s))
    else:
        assert selector.participant is not None
        for s in known.values():
            if _participant_matches(selector.participant, _participants_of(s)):
                out.setdefault(s["session_id"], target(s))
    # A Claude Code subagent's transcript (<session>/subagents/agent-*.jsonl) is part of the
    # session that started it: it goes with its parent.
    parents = {t.session_id for t in out.values() if t.resolved}
    for s in known.values():
        if s.get("parent") in parents:
            out.setdefault(s["session_id"], target(s))
    return [out[k] for k in sorted(out)]


def _records(
    conn: Connection, agent: str, selector: Selector, files: Sequence[SessionFile]
) -> list[dict[str, Any]]:
    """The session records `resolve` needs. For ids and keys, only those that can match or
    shadow a file that matches (by id, by key, or the id of a file whose key matches) and
    the subagents' (they go with their parent): a purge of one session need not read
    every record of the agent. A source or participant reads them all."""
    if not selector.sessions:
        return list(sessions.records(conn, agent).values())
    wanted = set(selector.sessions)
    ids = wanted | {f.session_id for f in files if f.session_key in wanted}
    c = SESSIONS.c
    query = select(SESSIONS).where(
        and_(
            c.agent == agent,
            or_(c.session_id.in_(ids), c.session_key.in_(wanted), c.path.like("%subagents%")),
        )
    )
    return [dict(r) for r in conn.execute(query).mappings()]


def _participants_of(s: dict[str, Any]) -> list[str]:
    """A known session's participants: a list from a file, JSON text from its record."""
    value = s["participants"]
    return list(json.loads(value or "[]")) if isinstance(value, str | None) else list(value)


def _parent_of(path: str | None) -> str | None:
    if not path:
        return None
    p = PurePath(path)
    return p.parent.parent.name if p.parent.name == "subagents" else None


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_since(value: str) -> datetime:
    """A date (midnight UTC) or an ISO timestamp."""
    if _DATE.match(value):
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)
