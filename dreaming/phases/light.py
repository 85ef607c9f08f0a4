"""The light phase: transcripts -> admitted, stripped corpus lines -> folded candidates.

Per session file, everything a read produces - corpus lines, candidate evidence, recalls,
the file's cursor and the session's admission record - commits in one transaction, so the
cursor (the watermark) never runs ahead of the work it covers. Corpus files are written from
the table afterwards; see `dreaming.corpus`.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)

from dreaming import corpus, faults
from dreaming.admission import UNCLASSIFIED, Status, admit, origin_class
from dreaming.candidates import (
    Folder,
    advance_clock,
    read_clock,
    refresh_stale,
    rescore,
)
from dreaming.config import Paths
from dreaming.messages import Kind, SessionFile
from dreaming.progress import Progress, Tick
from dreaming.store.dialect import upsert
from dreaming.store.statuses import CandidateStatus
from dreaming.store.tables import (
    AGENT_STATE,
    CANDIDATE_EVIDENCE,
    CANDIDATES,
    CORPUS_LINES,
    DIRTY_DAYS,
    FILE_CURSORS,
    ORIGINS,
    SESSIONS,
    TOMBSTONES,
)
from dreaming.tags import Scope, TagRegistry
from dreaming.tombstones import file_tombstones
from dreaming.transcripts import Cursor, TranscriptReader

RESCORE_KEY = "rescore_pending"

MAX_SKIPPED_FILES = 100


@dataclass
class LightSummary:
    agent: str
    sessions_seen: int = 0
    sessions_read: int = 0
    sessions_unchanged: int = 0
    files_rewritten: int = 0
    lines_rederived: int = 0  # lines of edited transcripts whose text changed or vanished
    not_admitted: Counter[str] = field(default_factory=Counter)
    unclassified: list[str] = field(default_factory=list)  # admitted as untrusted evidence
    # Sessions whose admission changed since their last night: what was derived is redone.
    reclassified: list[dict[str, Any]] = field(default_factory=list)
    messages: int = 0
    corpus_lines: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    skips: Counter[str] = field(default_factory=Counter)
    candidates_new: int = 0
    candidates_updated: int = 0
    candidates_pending: int = 0
    recalls: int = 0
    bytes_read: int = 0
    corpus_files_written: int = 0
    clock: str | None = None
    duration_s: float = 0.0

    # Which files the skips came from (capped): a count alone does not say what to fix.
    skipped_files: list[dict[str, Any]] = field(default_factory=list)

    def note_skips(self, sf: SessionFile, found: Counter[str]) -> None:
        if found and len(self.skipped_files) < MAX_SKIPPED_FILES:
            self.skipped_files.append(
                {"session_id": sf.session_id, "file": str(sf.path), "reasons": dict(found)}
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "sessions": {
                "seen": self.sessions_seen,
                "read": self.sessions_read,
                "unchanged": self.sessions_unchanged,
                "rewritten": self.files_rewritten,
                "lines_rederived": self.lines_rederived,
                "not_admitted": dict(sorted(self.not_admitted.items())),
                "unclassified": self.unclassified[:50],
                "unclassified_count": len(self.unclassified),
                "reclassified": self.reclassified[:50],
            },
            "messages": self.messages,
            "corpus_lines": self.corpus_lines,
            "dropped": dict(sorted(self.dropped.items())),
            "skips": dict(sorted(self.skips.items())),
            "skipped_files": self.skipped_files,
            "candidates": {
                "new": self.candidates_new,
                "updated": self.candidates_updated,
                "pending": self.candidates_pending,
            },
            "recalls": self.recalls,
            "bytes_read": self.bytes_read,
            "corpus_files_written": self.corpus_files_written,
            "clock": self.clock,
            "duration_s": round(self.duration_s, 3),
        }


def _utc(ts: datetime | None) -> datetime | None:
    return ts.astimezone(UTC) if ts is not None else None


def _now() -> datetime:
    return datetime.now(UTC)


def _session_values(
    sf: SessionFile, status: Status, reason: str | None, trust: str | None
) -> dict[str, Any]:
    return {
        "agent": sf.agent,
        "session_id": sf.session_id,
        "path": str(sf.path),
        "format": sf.format.value if sf.format else None,
        "session_key": sf.session_key,
        "channel": sf.channel,
        "chat_type": sf.chat_type,
        "external_source": sf.external_source,
        "participants": json.dumps(list(sf.participants)),
        "kind": sf.kind.value,
        "created_at": _utc(sf.created_at),
        "status": status.value,
        "reason": reason,
        "classified_by": sf.classified_by,
        "trust": trust,
    }


_UPDATE_SESSION = update(SESSIONS).where(
    and_(SESSIONS.c.agent == bindparam("b_agent"), SESSIONS.c.session_id == bindparam("b_sid"))
)


def _upsert_session(
    conn: Connection, values: dict[str, Any], existing: dict[str, Any] | None, read: bool
) -> None:
    now = _now()
    if existing is None:
        conn.execute(
            insert(SESSIONS), {**values, "first_seen": now, "last_read": now if read else None}
        )
        return
    changed = {k: v for k, v in values.items() if existing.get(k) != v}
    if read:
        changed["last_read"] = now
    if changed:
        conn.execute(
            _UPDATE_SESSION,
            {"b_agent": values["agent"], "b_sid": values["session_id"], **changed},
        )


def _may_have_changed(sf: SessionFile, cursors: dict[str, dict[str, Any]]) -> bool:
    """False when the file is as it was when last read (an unclassified session's metadata
    was looked for then, and found missing): no need to read its head again every night."""
    cursor = cursors.get(str(sf.path))
    if cursor is None:
        return True
    try:
        st = sf.path.stat()
    except OSError:
        return True
    return (cursor["size"], cursor["mtime_ns"]) != (st.st_size, st.st_mtime_ns)


# What an unread session's record must keep up to date: its admission and what it rests on.
# (Timestamps are left out: SQLite gives them back without a zone, so they never compare
# equal, and a write per unchanged file each night is what this avoids.)
_ADMISSION_KEYS = (
    "status",
    "reason",
    "classified_by",
    "trust",
    "session_key",
    "channel",
    "chat_type",
    "external_source",
    "kind",
)


def _differs(values: dict[str, Any], existing: dict[str, Any] | None) -> bool:
    return existing is None or any(existing.get(k) != values[k] for k in _ADMISSION_KEYS)


_BUILT: dict[tuple[str, str], Any] = {}


def _built(conn: Connection, name: str, build: Callable[[Connection], Any]) -> Any:
    """A statement that depends on the backend (an upsert), built once per backend."""
    key = (conn.dialect.name, name)
    stmt = _BUILT.get(key)
    if stmt is None:
        stmt = _BUILT[key] = build(conn)
    return stmt


def _do_nothing_on_conflict(table: Any) -> Callable[[Connection], Any]:
    return lambda conn: upsert(conn, table).on_conflict_do_nothing()


_CURSOR_COLUMNS = (
    "agent",
    "path",
    "session_id",
    "offset",
    "line",
    "head",
    "size",
    "mtime_ns",
    "updated_at",
)


def _upsert_cursor(conn: Connection) -> Any:
    ins = upsert(conn, FILE_CURSORS)
    return ins.on_conflict_do_update(
        index_elements=["agent", "path"], set_={c: ins.excluded[c] for c in _CURSOR_COLUMNS}
    )


# The new lines of one session file: what is stored already, and their ids.
_SPAN = and_(
    CORPUS_LINES.c.agent == bindparam("agent"),
    CORPUS_LINES.c.session_id == bindparam("session_id"),
    CORPUS_LINES.c.line >= bindparam("first"),
    CORPUS_LINES.c.line <= bindparam("last"),
)
_LINES_IN_SPAN = select(CORPUS_LINES.c.line).where(_SPAN)
_IDS_IN_SPAN = select(CORPUS_LINES.c.line, CORPUS_LINES.c.id).where(_SPAN)


def _mark_dirty(conn: Connection, agent: str, days: Iterable[str]) -> None:
    rows = [{"agent": agent, "day": d} for d in sorted(set(days))]
    if rows:
        conn.execute(_built(conn, "dirty", _do_nothing_on_conflict(DIRTY_DAYS)), rows)


class LightPhase:
    """Runs the light phase for one agent over its session files."""

    def __init__(
        self,
        engine: Engine,
        paths: Paths,
        registry: TagRegistry,
        *,
        progress: Progress | None = None,
        reingest: bool = False,
    ) -> None:
        self.reingest = reingest  # read every file from the start; tombstones still hold
        self.engine = engine
        self.paths = paths
        self.settings = paths.settings
        self.registry = registry
        self.progress = progress
        self.agent = ""  # set by run()
        self.folder: Folder  # loaded by run()

    def run(self, agent: str, files: Sequence[SessionFile]) -> LightSummary:
        self.agent = agent
        started = time.perf_counter()
        summary = LightSummary(agent=agent)
        corpus_dir = self.paths.corpus_dir(agent)
        # Repair first: days a crashed run committed but did not write out.
        summary.corpus_files_written += corpus.flush_files(self.engine, agent, corpus_dir)
        with self.engine.connect() as conn:
            tombstoned = set(file_tombstones(self.paths, agent)) | {
                s
                for (s,) in conn.execute(
                    select(TOMBSTONES.c.session_id).where(TOMBSTONES.c.agent == agent)
                )
            }
            sessions = {
                r["session_id"]: dict(r)
                for r in conn.execute(select(SESSIONS).where(SESSIONS.c.agent == agent)).mappings()
            }
            cursors = {
                r["path"]: dict(r)
                for r in conn.execute(
                    select(FILE_CURSORS).where(FILE_CURSORS.c.agent == agent)
                ).mappings()
            }
            self.folder = Folder.load(
                conn,
                agent,
                self.settings,
                self.paths.memory_file(agent),
                self.paths.dreams_file(agent),
            )
        changed = False
        touched_total: set[int] = set()
        # Admission first, for every file: sessions derived under another admission (index
        # repaired or lost, policy changed, kind now known) are purged in one go, then read
        # again below if they are admitted now.
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
                self.settings,
                tombstoned=sf.session_id in tombstoned,
                scan=_may_have_changed(sf, cursors),
            )
            values = _session_values(sf, decision.status, decision.reason, trust)
            planned.append((sf, decision, values, existing))
        moved = [
            (sf, existing, values)
            for sf, decision, values, existing in planned
            if existing is not None
            and decision.status is not Status.FORGOTTEN
            and existing.get("trust") != values["trust"]
        ]
        if moved and self._rederive_sessions(moved, cursors, summary):
            changed = True
            self.folder = self._reload_folder()
        sizes = [_size(sf.path) for sf, *_ in planned] if self.progress is not None else []
        bytes_done = 0
        for n, (sf, decision, values, existing) in enumerate(planned, 1):
            if self.progress is not None:
                bytes_done += sizes[n - 1]
                self.progress(
                    Tick(
                        "light",
                        agent,
                        n,
                        len(planned),
                        "files",
                        bytes_done,
                        sum(sizes),
                        sf.session_id,
                    )
                )
            summary.sessions_seen += 1
            if decision.reason == UNCLASSIFIED:
                summary.unclassified.append(sf.session_id)
            if not decision.admitted:
                summary.not_admitted[decision.reason or decision.status.value] += 1
                if decision.status is not Status.FORGOTTEN and _differs(values, existing):
                    with self.engine.begin() as conn:
                        _upsert_session(conn, values, existing, read=False)
                continue
            touched = self._read_session(sf, values, existing, cursors, summary)
            if touched is not None:
                changed = True
                touched_total |= touched
        with self.engine.begin() as conn:
            # A run killed between a file's commit and this point leaves the mark behind, so
            # the next run rescores even though it reads nothing new.
            pending_mark = and_(AGENT_STATE.c.agent == agent, AGENT_STATE.c.key == RESCORE_KEY)
            if changed or conn.execute(select(AGENT_STATE.c.value).where(pending_mark)).first():
                summary.candidates_updated = refresh_stale(conn, agent)
                summary.candidates_pending = rescore(conn, agent, self.settings)
                conn.execute(delete(AGENT_STATE).where(pending_mark))
            else:
                summary.candidates_pending = int(
                    conn.execute(
                        select(func.count()).where(
                            and_(
                                CANDIDATES.c.agent == agent,
                                CANDIDATES.c.status == CandidateStatus.PENDING,
                            )
                        )
                    ).scalar_one()
                )
            clock = read_clock(conn, agent)
        summary.clock = clock.isoformat() if clock else None
        summary.corpus_files_written += corpus.flush_files(self.engine, agent, corpus_dir)
        summary.duration_s = time.perf_counter() - started
        return summary

    def _reload_folder(self) -> Folder:
        """The candidate folder read again after a purge changed the candidates under it."""
        agent = self.agent
        with self.engine.connect() as conn:
            return Folder.load(
                conn,
                agent,
                self.settings,
                self.paths.memory_file(agent),
                self.paths.dreams_file(agent),
            )

    def _rederive_sessions(
        self,
        moved: list[tuple[SessionFile, dict[str, Any], dict[str, Any]]],
        cursors: dict[str, dict[str, Any]],
        summary: LightSummary,
    ) -> bool:
        """Purge what the sessions' old admission derived (as forget does, with no tombstone;
        their cursors go with it, so an admitted one is read again from the start) and record
        the new admission. True when anything was purged."""
        from dreaming.forget import Purge, Scope  # forget reads corpus files through light

        agent = self.agent
        ids = [sf.session_id for sf, _, _ in moved]
        with self.engine.connect() as conn:
            derived = {
                sid
                for (sid,) in conn.execute(
                    select(CORPUS_LINES.c.session_id)
                    .where(and_(CORPUS_LINES.c.agent == agent, CORPUS_LINES.c.session_id.in_(ids)))
                    .distinct()
                )
            } | {sf.session_id for sf, _, _ in moved if str(sf.path) in cursors}
        changes = [
            {
                "session_id": sf.session_id,
                "from": {"status": existing.get("status"), "trust": existing.get("trust")},
                "to": {"status": values["status"], "trust": values["trust"]},
                "reason": values["reason"],
                "classified_by": values["classified_by"],
                "entries_removed": 0,
            }
            for sf, existing, values in moved
        ]
        if derived:
            with self.engine.connect() as conn:
                made: dict[str, set[str]] = {}
                for key, sid in conn.execute(
                    select(ORIGINS.c.entry_key, ORIGINS.c.session_id).where(
                        and_(ORIGINS.c.agent == agent, ORIGINS.c.session_id.in_(sorted(derived)))
                    )
                ):
                    made.setdefault(sid, set()).add(key)
            why = {"rederive": "admission changed", "sessions": changes}
            scope = Scope(tuple(sorted(derived)))
            report = Purge(self.engine, self.paths, agent).rederive(scope, why)
            removed = set(report.entries_removed)
            for change in changes:
                change["purge_id"] = report.purge_id
                change["entries_removed"] = len(made.get(change["session_id"], set()) & removed)
        with self.engine.begin() as conn:
            for sf, existing, values in moved:
                cursors.pop(str(sf.path), None)
                _upsert_session(conn, values, existing, read=False)
                existing.update(values)
        summary.reclassified.extend(changes)
        return bool(derived)

    def _purge_changed_lines(
        self, sf: SessionFile, rows: list[dict[str, Any]], summary: LightSummary
    ) -> set[int]:
        """Purge the stored lines of `sf` that the file, read whole, no longer holds as they
        were (text, speaker or class changed, or the line is gone). Returns the candidates
        that lost evidence."""
        from dreaming.forget import Purge, Scope  # forget reads corpus files through light

        agent = sf.agent
        fresh = {r["line"]: (r["text_hash"], r["role"], r["origin_class"]) for r in rows}
        with self.engine.connect() as conn:
            stale = [
                line_id
                for line_id, n, text_hash, role, cls in conn.execute(
                    select(
                        CORPUS_LINES.c.id,
                        CORPUS_LINES.c.line,
                        CORPUS_LINES.c.text_hash,
                        CORPUS_LINES.c.role,
                        CORPUS_LINES.c.origin_class,
                    ).where(
                        and_(
                            CORPUS_LINES.c.agent == agent,
                            CORPUS_LINES.c.session_id == sf.session_id,
                        )
                    )
                )
                if fresh.get(n) != (text_hash, role, cls)
            ]
            if not stale:
                return set()
            touched = {
                c
                for (c,) in conn.execute(
                    select(CANDIDATE_EVIDENCE.c.candidate_id)
                    .where(CANDIDATE_EVIDENCE.c.corpus_line_id.in_(stale))
                    .distinct()
                )
            }
        why = {"rederive": "transcript edited", "session_id": sf.session_id, "lines": len(stale)}
        scope = Scope((sf.session_id,), tuple(stale), keep=tuple(r["text"] for r in rows))
        Purge(self.engine, self.paths, agent).rederive(scope, why)
        summary.lines_rederived += len(stale)
        return touched

    def _read_session(
        self,
        sf: SessionFile,
        values: dict[str, Any],
        existing: dict[str, Any] | None,
        cursors: dict[str, dict[str, Any]],
        summary: LightSummary,
    ) -> set[int] | None:
        """Read what is new in one admitted file and commit it. None: nothing was read."""
        agent = sf.agent
        key = str(sf.path)
        try:
            st = sf.path.stat()
        except OSError:
            summary.skips["unreadable-file"] += 1
            summary.note_skips(sf, Counter({"unreadable-file": 1}))
            return None
        prev = None if self.reingest else cursors.get(key)
        if prev is not None and prev["size"] == st.st_size and prev["mtime_ns"] == st.st_mtime_ns:
            summary.sessions_unchanged += 1
            if _differs(values, existing):
                with self.engine.begin() as conn:
                    _upsert_session(conn, values, existing, read=False)
            return None
        start: Cursor | None = None
        if prev is not None:
            start = Cursor(
                offset=prev["offset"], line=prev["line"], head=prev["head"], size=prev["size"]
            )
        before = Counter(summary.skips)
        reader = TranscriptReader(
            sf,
            start=start,
            skips=summary.skips,
            max_line_bytes=self.settings.corpus.max_transcript_line_bytes,
        )
        fallback_day = (
            (sf.created_at or datetime.fromtimestamp(st.st_mtime, UTC)).date().isoformat()
        )
        max_chars = self.settings.corpus.max_line_chars
        rows: list[dict[str, Any]] = []
        newest: datetime | None = None
        for msg in reader:
            if msg.kind is not Kind.SPEECH:
                summary.dropped[msg.kind.value] += 1
                continue
            summary.messages += 1
            text = corpus.normalize(
                self.registry.strip(msg.text, Scope.DREAMING_INGESTION), max_chars
            )
            if not text:
                summary.dropped["empty-after-strip"] += 1
                continue
            ts = _utc(msg.timestamp)
            if ts is not None and (newest is None or ts > newest):
                newest = ts
            rows.append(
                {
                    "agent": agent,
                    "session_id": sf.session_id,
                    "line": msg.line,
                    "ts": ts,
                    "day": corpus.day_of(ts, fallback_day),
                    "role": msg.role.value,
                    "origin_class": origin_class(sf, msg).value,
                    "text": text,
                    "text_hash": corpus.text_hash(text),
                }
            )
        summary.note_skips(sf, summary.skips - before)
        if not reader.completed:
            return None  # unreadable now: nothing read, nothing concluded about its lines
        end = reader.cursor
        summary.bytes_read += max(end.offset - (reader.started_at or 0), 0)
        if reader.format is not None:
            values["format"] = reader.format.value
        touched: set[int] = set()
        # Edited before the cursor (or re-read on request): the stored lines whose text no
        # longer stands are purged as forget would, and the file's text is ingested afresh.
        if reader.restarted or self.reingest:
            if reader.restarted and prev is not None:
                summary.files_rewritten += 1
            gone = self._purge_changed_lines(sf, rows, summary)
            if gone:
                touched |= gone
                self.folder = self._reload_folder()
        with self.engine.begin() as conn:
            days: set[str] = set()
            span = {}
            if rows:
                span = {
                    "agent": agent,
                    "session_id": sf.session_id,
                    "first": rows[0]["line"],
                    "last": rows[-1]["line"],
                }
                # Lines already stored (a forced re-ingestion) are neither new nor re-folded.
                have = {n for (n,) in conn.execute(_LINES_IN_SPAN, span)}
                if have:
                    rows = [r for r in rows if r["line"] not in have]
            if rows:
                conn.execute(insert(CORPUS_LINES), rows)
                ids: dict[int, int] = dict(conn.execute(_IDS_IN_SPAN, span).all())
                new_lines = [(ids[r["line"]], r) for r in rows]
                touched |= self.folder.fold(conn, new_lines, summary)
                days |= {r["day"] for r in rows}
                summary.corpus_lines += len(rows)
            conn.execute(
                _built(conn, "state", _do_nothing_on_conflict(AGENT_STATE)),
                {"agent": agent, "key": RESCORE_KEY, "value": "1"},
            )
            _mark_dirty(conn, agent, days)
            advance_clock(conn, agent, newest)
            cursor_values = {
                "agent": agent,
                "path": key,
                "session_id": sf.session_id,
                "offset": end.offset,
                "line": end.line,
                "head": end.head,
                "size": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "updated_at": _now(),
            }
            conn.execute(_built(conn, "cursor", _upsert_cursor), cursor_values)
            _upsert_session(conn, values, existing, read=True)
            faults.checkpoint("light.before_commit")
        faults.checkpoint("light.after_commit")
        summary.sessions_read += 1
        return touched


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # gone or unreadable: reading it will say so
        return 0
