"""Re-deriving what no longer stands: what sessions derived under an admission that has
changed since, and the stored lines of a transcript edited before its cursor. Both are
purged as forget purges (with no tombstone), so what is admitted now is read afresh."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, and_, select

from dreaming import forget
from dreaming.ingest.sessions import upsert_session
from dreaming.messages import SessionFile
from dreaming.paths import Paths
from dreaming.phases.light._summary import LightSummary
from dreaming.store.tables import CANDIDATE_EVIDENCE, CORPUS_LINES, ORIGINS

# A session whose admission moved: (its file, its record as stored, its record as admitted now)
Moved = tuple[SessionFile, dict[str, Any], dict[str, Any]]


def rederive_sessions(
    engine: Engine,
    paths: Paths,
    agent: str,
    moved: list[Moved],
    cursors: dict[str, dict[str, Any]],
    summary: LightSummary,
) -> bool:
    """Purge what the sessions' old admission derived (as forget does, with no tombstone;
    their cursors go with it, so an admitted one is read again from the start) and record
    the new admission. True when anything was purged."""
    derived = _derived(engine, agent, moved, cursors)
    changes = [_change(sf, existing, values) for sf, existing, values in moved]
    if derived:
        made = _entries_made(engine, agent, derived)
        why = {"rederive": "admission changed", "sessions": changes}
        scope = forget.Scope(tuple(sorted(derived)))
        report = forget.Purge(engine, paths, agent).rederive(scope, why)
        removed = set(report.entries_removed)
        for change in changes:
            change["purge_id"] = report.purge_id
            change["entries_removed"] = len(made.get(change["session_id"], set()) & removed)
    with engine.begin() as conn:
        for sf, existing, values in moved:
            cursors.pop(str(sf.path), None)
            upsert_session(conn, values, existing, read=False)
            existing.update(values)
    summary.reclassified.extend(changes)
    return bool(derived)


def _derived(
    engine: Engine, agent: str, moved: list[Moved], cursors: dict[str, dict[str, Any]]
) -> set[str]:
    """The moved sessions that derived anything: corpus lines, or a cursor (read before)."""
    ids = [sf.session_id for sf, _, _ in moved]
    with engine.connect() as conn:
        return {
            sid
            for (sid,) in conn.execute(
                select(CORPUS_LINES.c.session_id)
                .where(and_(CORPUS_LINES.c.agent == agent, CORPUS_LINES.c.session_id.in_(ids)))
                .distinct()
            )
        } | {sf.session_id for sf, _, _ in moved if str(sf.path) in cursors}


def _change(sf: SessionFile, existing: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """How one session's admission changed, as the summary reports it."""
    return {
        "session_id": sf.session_id,
        "from": {"status": existing.get("status"), "trust": existing.get("trust")},
        "to": {"status": values["status"], "trust": values["trust"]},
        "reason": values["reason"],
        "classified_by": values["classified_by"],
        "entries_removed": 0,
    }


def _entries_made(engine: Engine, agent: str, derived: set[str]) -> dict[str, set[str]]:
    """Session id -> the keys of the entries it is an origin of."""
    made: dict[str, set[str]] = {}
    with engine.connect() as conn:
        for key, sid in conn.execute(
            select(ORIGINS.c.entry_key, ORIGINS.c.session_id).where(
                and_(ORIGINS.c.agent == agent, ORIGINS.c.session_id.in_(sorted(derived)))
            )
        ):
            made.setdefault(sid, set()).add(key)
    return made


def purge_changed_lines(
    engine: Engine, paths: Paths, sf: SessionFile, rows: list[dict[str, Any]], summary: LightSummary
) -> set[int]:
    """Purge the stored lines of `sf` that the file, read whole, no longer holds as they
    were (text, speaker or class changed, or the line is gone). Returns the candidates
    that lost evidence."""
    agent = sf.agent
    fresh = {
        r["line"]: (r["text_hash"], r["role"], r["origin_class"], r.get("speaker")) for r in rows
    }
    with engine.connect() as conn:
        stale = [
            line_id
            for line_id, n, *stored in conn.execute(
                select(
                    CORPUS_LINES.c.id,
                    CORPUS_LINES.c.line,
                    CORPUS_LINES.c.text_hash,
                    CORPUS_LINES.c.role,
                    CORPUS_LINES.c.origin_class,
                    CORPUS_LINES.c.speaker,
                ).where(
                    and_(
                        CORPUS_LINES.c.agent == agent,
                        CORPUS_LINES.c.session_id == sf.session_id,
                    )
                )
            )
            if fresh.get(n) != tuple(stored)
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
    scope = forget.Scope((sf.session_id,), tuple(stale), keep=tuple(r["text"] for r in rows))
    forget.Purge(engine, paths, agent).rederive(scope, why)
    summary.lines_rederived += len(stale)
    return touched
