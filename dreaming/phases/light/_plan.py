"""What light will read of an agent's session files: what is known of its sessions
(`known`), each file's admission (`admitted`) and what is new in each admitted one
(`to_read`). Light plans so at the start of an agent's night; a run reading ahead across
agents plans the next agents so before their nights (`planner`), and light takes a read
made from such a plan only where its own agrees."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine

from dreaming.config import Settings
from dreaming.forking import split_map
from dreaming.ingest.admission import Decision, admit, reads_head
from dreaming.ingest.sessions import may_have_changed, records, session_values
from dreaming.ingest.tombstones import file_tombstones
from dreaming.ingest.tombstones import in_db as tombstones_in_db
from dreaming.ingest.transcripts import ChatFacts, chat_facts, with_start
from dreaming.messages import SessionFile
from dreaming.paths import Paths
from dreaming.phases.light import _ahead as read_ahead
from dreaming.phases.light._summary import LightSummary
from dreaming.store import cursors as file_cursors

# A file as admission left it: (file, decision, its session record now, the stored record)
Planned = tuple[SessionFile, Decision, dict[str, Any], dict[str, Any] | None]
# What to do with a planned file: read it (a job), nothing (None), or skip it (its stat failed)
ToRead = read_ahead.Job | OSError | None
# What is known of an agent's sessions: the tombstoned ids, the session records by id and
# the file cursors by path.
Known = tuple[set[str], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]


def known(conn: Connection | None, paths: Paths, agent: str) -> Known:
    """What is known of the agent's sessions (see `Known`); `conn` None: it has no
    database yet, and only its tombstone file knows anything."""
    tombstoned = set(file_tombstones(paths, agent))
    if conn is None:
        return tombstoned, {}, {}
    tombstoned |= {sid for sid, _ in tombstones_in_db(conn, agent)}
    return tombstoned, records(conn, agent), file_cursors.by_path(conn, agent)


def admitted(
    files: Sequence[SessionFile],
    sessions: dict[str, dict[str, Any]],
    tombstoned: set[str],
    cursors: dict[str, dict[str, Any]],
    summary: LightSummary,
    settings: Settings,
) -> list[Planned]:
    """Each file's admission decision and session record; files that are not readable
    transcripts are counted as skipped here and never opened."""
    facts_of = _heads(files, sessions, cursors)
    planned = []
    for sf in files:
        if "skip" in sf.extra:  # not a file a transcript can be read from: never opened
            summary.sessions_seen += 1
            summary.skips[sf.extra["skip"]] += 1
            summary.note_skips(sf, Counter({sf.extra["skip"]: 1}))
            continue
        existing = sessions.get(sf.session_id)
        sf, decision, trust = admit(
            sf,
            existing,
            settings,
            tombstoned=sf.session_id in tombstoned,
            # Asked (a stat) only where admission would read the head: `reads_head`.
            scan=reads_head(sf, existing) and may_have_changed(sf, cursors),
            facts_of=facts_of,
        )
        values = session_values(sf, decision.status, decision.reason, trust)
        if sf.start_unread:
            values["created_at"] = _started(sf, existing, decision)
        if existing is not None:
            add_participants(values, json.loads(existing.get("participants") or "[]"))
        planned.append((sf, decision, values, existing))
    return planned


def _started(
    sf: SessionFile, existing: dict[str, Any] | None, decision: Decision
) -> datetime | None:
    """When a session discovery left unread (`SessionFile.start_unread`) started, for its
    record: the record's, or the header's read now for a file light will not read. A file
    light reads has it set from its read (`_phase`)."""
    if existing is not None:
        started: datetime | None = existing["created_at"]
        return started
    return None if decision.admitted else with_start(sf).created_at


# Heads read at once from this many on, half in a forked child (`forking.split_map`): a
# head is ~0.5 ms of byte searches, a fork a few.
HEADS_SPLIT_FROM = 32


def _heads(
    files: Sequence[SessionFile],
    sessions: dict[str, dict[str, Any]],
    cursors: dict[str, dict[str, Any]],
) -> Callable[[Path], ChatFacts | None]:
    """What the heads of the files admission will scan say (`chat_facts`), read before the
    first is needed: they are read in the light process before any reading child starts,
    for this agent's files and for every later agent a run plans."""
    heads = [
        sf.path
        for sf in files
        if reads_head(sf, sessions.get(sf.session_id)) and may_have_changed(sf, cursors)
    ]
    found = dict(zip(heads, split_map(chat_facts, heads, min_items=HEADS_SPLIT_FROM), strict=True))
    return lambda path: found[path] if path in found else chat_facts(path)


def to_read(
    planned: list[Planned], cursors: dict[str, dict[str, Any]], *, reingest: bool
) -> list[ToRead]:
    """For each planned file: what to read of it (a job), that it is unchanged since its
    cursor (None) or that it cannot be stat'ed (the error). Not admitted: None. `reingest`
    reads every file from its start."""
    todo: list[ToRead] = []
    for sf, decision, _, _ in planned:
        if not decision.admitted:
            todo.append(None)
            continue
        try:
            st = sf.path.stat()
        except OSError as err:
            todo.append(err)
            continue
        prev = None if reingest else cursors.get(str(sf.path))
        unchanged = (
            prev is not None and prev["size"] == st.st_size and prev["mtime_ns"] == st.st_mtime_ns
        )
        todo.append(None if unchanged else read_ahead.Job(sf, prev, st))
    return todo


def add_participants(values: dict[str, Any], more: Sequence[str]) -> None:
    """Add `more` to a session record's participants (JSON), keeping the order."""
    have: list[str] = json.loads(values["participants"])
    if any(p not in have for p in more):
        values["participants"] = json.dumps(list(dict.fromkeys([*have, *more])))


def planner(
    engine_of: Callable[[str], Engine | None],
    paths: Paths,
    settings: Settings,
    *,
    reingest: bool,
) -> read_ahead.Plan:
    """How light will most likely read an agent's files, planned ahead of its night
    (`read_ahead.NightReads`) as its light will plan them, from its database as it stands
    now (`engine_of`: None where it has none yet; none is made), without its lock."""

    def plan(agent: str, files: Sequence[SessionFile]) -> list[tuple[int, read_ahead.Job]]:
        engine = engine_of(agent)
        if engine is None:
            state = known(None, paths, agent)
        else:
            with engine.connect() as conn:
                state = known(conn, paths, agent)
        tombstoned, sessions, cursors = state
        summary = LightSummary(agent=agent)
        ahead = admitted(files, sessions, tombstoned, cursors, summary, settings)
        place = {str(sf.path): i for i, sf in enumerate(files)}
        return [
            (place[str(t.sf.path)], t)
            for t in to_read(ahead, cursors, reingest=reingest)
            if isinstance(t, read_ahead.Job)
        ]

    return plan
