"""`dreaming forget`: purge everything derived from some sessions, and prove it.

Steps, each reported with counts (invariants 3, 4 and 5):

1. corpus       the sessions' corpus lines leave the table and the corpus files; their exact
                text is kept in memory as snippets for the steps below
2. entries      every entry with any origin in the purge set leaves MEMORY.md and the table
                (whole-entry deletion; mixed-lineage entries listed apart); any other whole
                line of a memory file (MEMORY.md, DREAMS.md, daily notes) quoting a snippet goes
3. index        search-index rows of removed entries
4. state        candidates, recalls, cursors; MEMORY.md backups and LLM call records that
                carry purged text; run summaries are redacted
5. tombstones   origin rows deleted, one tombstone per session: nothing re-ingests it
6. writes       files the agent wrote during the sessions are reported, never edited

All database steps commit in one transaction together with a `purges` row whose `pending`
column lists the snippets still to scrub from files; files are rewritten next, and the
row is then completed (snippets dropped). A purge interrupted after the commit is completed
by the next `forget` or run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, and_, delete, func, or_, select, text, update

from dreaming import claims as claims_mod
from dreaming import corpus, faults, journal, memory_file, memory_sync, review
from dreaming.candidates import refresh_candidates, rescore
from dreaming.config import Paths
from dreaming.corpus import reference
from dreaming.errors import WorkspaceFileError
from dreaming.forget_select import Selector, Target, parse_since, resolve
from dreaming.lineage import entry_lineage, live_entries, prune_orphans, remove_entries
from dreaming.messages import SessionFile
from dreaming.scrub import carries, needles_of, redact, scrub_text, snippets_of
from dreaming.store.dialect import is_postgres, upsert
from dreaming.store.tables import (
    CANDIDATE_EVIDENCE,
    CANDIDATES,
    CORPUS_LINES,
    DECISIONS,
    DIRTY_DAYS,
    ENTRY_EVIDENCE,
    FILE_CURSORS,
    LLM_CALLS,
    MEMORY_BACKUPS,
    ORIGINS,
    PURGES,
    RECALLS,
    RUNS,
    SESSIONS,
    SUPERSESSIONS,
    TOMBSTONES,
)
from dreaming.tombstones import file_tombstones, record_tombstones, remove_stale_temp_files
from dreaming.transcripts import TranscriptReader


@dataclass(frozen=True)
class Scope:
    """What a purge removes: whole sessions (forget, a session no longer admitted), or some
    lines of one session (a transcript edited in place: the lines whose text changed).

    `keep` is text that is still true of the sessions after the purge (the edited file's
    lines): snippets inside it are not hunted for in memory files, backups and logs."""

    sessions: tuple[str, ...]
    line_ids: tuple[int, ...] | None = None  # None: every line of the sessions
    keep: tuple[str, ...] = ()

    @property
    def whole(self) -> bool:
        return self.line_ids is None

    def lines(self, agent: str) -> Any:
        if self.line_ids is None:
            return and_(CORPUS_LINES.c.agent == agent, CORPUS_LINES.c.session_id.in_(self.sessions))
        return and_(CORPUS_LINES.c.agent == agent, CORPUS_LINES.c.id.in_(self.line_ids))

    def evidence(self, agent: str) -> Any:
        if self.line_ids is None:
            return and_(
                CANDIDATE_EVIDENCE.c.agent == agent,
                CANDIDATE_EVIDENCE.c.session_id.in_(self.sessions),
            )
        return and_(
            CANDIDATE_EVIDENCE.c.agent == agent,
            CANDIDATE_EVIDENCE.c.corpus_line_id.in_(self.line_ids),
        )

    def recalls(self, agent: str) -> Any:
        if self.line_ids is None:
            return and_(RECALLS.c.agent == agent, RECALLS.c.session_id.in_(self.sessions))
        return and_(RECALLS.c.agent == agent, RECALLS.c.corpus_line_id.in_(self.line_ids))


@dataclass
class PurgeReport:
    agent: str
    selector: dict[str, Any]
    dry_run: bool
    targets: list[Target] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    entries_removed: list[str] = field(default_factory=list)
    mixed_lineage: list[dict[str, Any]] = field(default_factory=list)
    emptied: list[str] = field(default_factory=list)
    file_lines_removed: dict[str, int] = field(default_factory=dict)
    curated_writes: list[dict[str, Any]] = field(default_factory=list)
    purge_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "selector": self.selector,
            "dry_run": self.dry_run,
            "purge_id": self.purge_id,
            "sessions": [
                {
                    "session_id": t.session_id,
                    "session_key": t.session_key,
                    "status": "unresolved"
                    if not t.resolved
                    else ("already forgotten" if t.already_forgotten else "resolved"),
                }
                for t in self.targets
            ],
            "unresolved": [t.session_id for t in self.targets if not t.resolved],
            "counts": dict(sorted(self.counts.items())),
            "entries_removed": self.entries_removed,
            "entries_emptied": self.emptied,
            "mixed_lineage": self.mixed_lineage,
            "file_lines_removed": self.file_lines_removed,
            "curated_writes": self.curated_writes,
            "nothing_left": self.nothing_left,
        }

    @property
    def nothing_left(self) -> bool:
        return not any(self.counts.values()) and not self.file_lines_removed


class Purge:
    def __init__(self, engine: Engine | None, paths: Paths, agent: str) -> None:
        self.engine = engine
        self.paths = paths
        self.agent = agent

    # -- planning (read only) --------------------------------------------------------------

    def _plan(self, conn: Connection, scope: Scope) -> dict[str, Any]:
        a = self.agent
        ids = list(scope.sessions)
        lines = conn.execute(
            select(
                CORPUS_LINES.c.id,
                CORPUS_LINES.c.text,
                CORPUS_LINES.c.day,
                CORPUS_LINES.c.session_id,
                CORPUS_LINES.c.line,
            ).where(scope.lines(a))
        ).all()
        if scope.whole:
            by_origin = select(ORIGINS.c.entry_key).where(
                and_(ORIGINS.c.agent == a, ORIGINS.c.session_id.in_(ids))
            )
            purged_entries = sorted({k for (k,) in conn.execute(by_origin)})
        else:
            # Whole-entry rule, per line: an entry built from a line whose text changed is
            # gone; the lines that still hold are ingested again and may rebuild it.
            cited = {(sid, n) for _, _, _, sid, n in lines}
            purged_entries = sorted(
                {
                    k
                    for k, sid, n in conn.execute(
                        select(
                            ENTRY_EVIDENCE.c.entry_key,
                            ENTRY_EVIDENCE.c.session_id,
                            ENTRY_EVIDENCE.c.line,
                        ).where(
                            and_(ENTRY_EVIDENCE.c.agent == a, ENTRY_EVIDENCE.c.session_id.in_(ids))
                        )
                    )
                    if (sid, n) in cited
                }
            )
        live = dict(live_entries(conn, a))
        purged_entries = [k for k in purged_entries if k in live]
        mixed, emptied = [], []
        outside = set(ids) if scope.whole else set()
        for key in purged_entries:
            others = sorted({o.session_id for o in entry_lineage(conn, a, key).origins} - outside)
            if others:
                mixed.append({"key": key, "other_sessions": others})
            else:
                emptied.append(key)
        cand_ids = sorted(
            {
                c
                for (c,) in conn.execute(
                    select(CANDIDATE_EVIDENCE.c.candidate_id).where(scope.evidence(a))
                )
            }
        )
        snippets = snippets_of([line.text for line in lines], self.paths.settings)
        if scope.keep:
            kept = "\n".join(scope.keep)
            snippets = {x for x in snippets if x not in kept}
        snippets |= {live[k] for k in purged_entries}
        return {
            "line_ids": [line.id for line in lines],
            "days": sorted({line.day for line in lines}),
            "entries": purged_entries,
            "mixed": mixed,
            "emptied": emptied,
            "candidates": cand_ids,
            "snippets": snippets,
        }

    def _count(self, conn: Connection, scope: Scope, plan: dict[str, Any]) -> dict[str, int]:
        a = self.agent
        ids = list(scope.sessions)
        needles = needles_of(plan["snippets"])

        def n(table: Any, *cond: Any) -> int:
            return int(
                conn.execute(select(func.count()).select_from(table).where(*cond)).scalar_one()
            )

        calls = [
            i
            for i, req, resp in conn.execute(
                select(LLM_CALLS.c.id, LLM_CALLS.c.request, LLM_CALLS.c.response).where(
                    LLM_CALLS.c.agent == a
                )
            )
            if carries(req, needles) or carries(resp, needles)
        ]
        backups = [
            i
            for i, content in conn.execute(
                select(MEMORY_BACKUPS.c.id, MEMORY_BACKUPS.c.content).where(
                    MEMORY_BACKUPS.c.agent == a
                )
            )
            if carries(content, needles)
            or any(b.key in plan["entries"] for b in memory_file.parse(content).blocks)
        ]
        runs = [
            i
            for i, summary in conn.execute(
                select(RUNS.c.id, RUNS.c.summary).where(RUNS.c.agent == a)
            )
            if carries(summary, needles)
        ]
        plan["calls"], plan["backups"], plan["runs"] = calls, backups, runs
        return {
            "corpus_lines": len(plan["line_ids"]),
            "entries": len(plan["entries"]),
            "index_rows": len(plan["entries"]),
            "candidates": len(plan["candidates"]),
            "candidate_evidence": n(CANDIDATE_EVIDENCE, scope.evidence(a)),
            "recalls": n(RECALLS, scope.recalls(a)),
            "origins": n(ORIGINS, ORIGINS.c.agent == a, ORIGINS.c.session_id.in_(ids))
            if scope.whole
            else n(ORIGINS, ORIGINS.c.agent == a, ORIGINS.c.entry_key.in_(plan["entries"])),
            "cursors": n(
                FILE_CURSORS, FILE_CURSORS.c.agent == a, FILE_CURSORS.c.session_id.in_(ids)
            )
            if scope.whole
            else 0,
            "memory_backups": len(backups),
            "llm_calls": len(calls),
            "run_summaries": len(runs),
            "review_proposals": review.forget_sessions(
                conn, a, ids, lambda text: carries(text, needles), dry_run=True
            ),
            "runs_no_longer_undoable": len(
                journal.forget_sessions(
                    conn, a, ids, lambda text: carries(text, needles), dry_run=True
                )
            ),
        }

    # -- the purge --------------------------------------------------------------------------

    def run(
        self, selector: Selector, files: Sequence[SessionFile], *, dry_run: bool
    ) -> PurgeReport:
        report = PurgeReport(self.agent, selector.to_dict(), dry_run)
        if self.engine is None:
            report.targets = resolve(None, self.agent, selector, files)
            report.counts = {"tombstones": 0 if dry_run else len(report.targets)}
            report.curated_writes = self._curated_writes(report.targets, files)
            return report
        if not dry_run:
            complete_pending(self.engine, self.paths, self.agent)
        with self.engine.connect() as conn:
            report.targets = resolve(conn, self.agent, selector, files)
        new_tombstones = [t for t in report.targets if not t.already_forgotten]
        report.curated_writes = self._curated_writes(report.targets, files)
        scope = Scope(tuple(t.session_id for t in report.targets))
        return self._execute(report, scope, new_tombstones, forget=True)

    def rederive(self, scope: Scope, why: dict[str, Any]) -> PurgeReport:
        """Purge what was derived from `scope` as forget does, but leave no tombstone: the
        sessions stay readable and the caller ingests them again (a session whose admission
        changed, lines of a transcript edited in place). Audited in `purges` like a forget."""
        assert self.engine is not None
        complete_pending(self.engine, self.paths, self.agent)
        report = PurgeReport(self.agent, why, dry_run=False)
        return self._execute(report, scope, [], forget=False)

    def _execute(
        self, report: PurgeReport, scope: Scope, new_tombstones: list[Target], *, forget: bool
    ) -> PurgeReport:
        assert self.engine is not None
        with self.engine.connect() as conn:
            plan = self._plan(conn, scope)
            report.counts = self._count(conn, scope, plan)
        report.counts["tombstones"] = len(new_tombstones)
        report.entries_removed = plan["entries"]
        report.mixed_lineage = plan["mixed"]
        report.emptied = plan["emptied"]
        report.file_lines_removed = self._scrub_files(plan["snippets"], plan["entries"], dry=True)
        if report.dry_run:
            return report
        now = datetime.now(UTC)
        selector = report.selector
        with self.engine.begin() as conn:
            self._delete(conn, scope, plan, new_tombstones, now, forget=forget)
            report.purge_id = int(
                conn.execute(
                    PURGES.insert()
                    .values(
                        agent=self.agent,
                        selector=json.dumps(selector),
                        created_at=now,
                        report=json.dumps(report.to_dict(), default=str),
                        pending=json.dumps(sorted(plan["snippets"])),
                    )
                    .returning(PURGES.c.id)
                ).scalar_one()
            )
        faults.checkpoint("forget.after_commit")
        complete_pending(self.engine, self.paths, self.agent)
        return report

    def _delete(
        self,
        conn: Connection,
        scope: Scope,
        plan: dict[str, Any],
        tombstones: list[Target],
        now: datetime,
        *,
        forget: bool,
    ) -> None:
        a = self.agent
        ids = list(scope.sessions)
        needles = needles_of(plan["snippets"])
        # 1. corpus
        conn.execute(delete(CORPUS_LINES).where(scope.lines(a)))
        if plan["days"]:
            conn.execute(
                upsert(conn, DIRTY_DAYS).on_conflict_do_nothing(),
                [{"agent": a, "day": d} for d in plan["days"]],
            )
        # 2-3. entries, their origins, evidence and index rows (whole-entry deletion)
        remove_entries(conn, a, plan["entries"], prune=False)  # pruned once, below
        if plan["entries"]:
            conn.execute(
                delete(SUPERSESSIONS).where(
                    and_(
                        SUPERSESSIONS.c.agent == a,
                        or_(
                            SUPERSESSIONS.c.new_key.in_(plan["entries"]),
                            SUPERSESSIONS.c.old_key.in_(plan["entries"]),
                        ),
                    )
                )
            )
            conn.execute(
                update(DECISIONS)
                .where(and_(DECISIONS.c.agent == a, DECISIONS.c.entry_key.in_(plan["entries"])))
                .values(entry_key=None)
            )
        memory_sync.mark_dirty(conn, a)
        # 4. state: candidates (re-derived from what remains), recalls, cursors, logs, backups
        conn.execute(delete(CANDIDATE_EVIDENCE).where(scope.evidence(a)))
        refresh_candidates(conn, a, plan["candidates"])
        # Whatever status: a candidate no remaining line supports is gone with its sessions.
        supported = select(CANDIDATE_EVIDENCE.c.candidate_id).where(
            CANDIDATE_EVIDENCE.c.candidate_id.in_(plan["candidates"])
        )
        conn.execute(
            delete(CANDIDATES).where(
                and_(CANDIDATES.c.id.in_(plan["candidates"]), CANDIDATES.c.id.not_in(supported))
            )
        )
        self._rederive_candidates(conn, plan["candidates"], needles)
        # What remains of them is decided again: a fact the purged sessions shared with kept
        # ones may be rebuilt by a later night from the kept sessions alone.
        conn.execute(
            update(CANDIDATES)
            .where(CANDIDATES.c.id.in_(plan["candidates"]))
            .values(status="pending", decided_evidence=0)
        )
        rescore(conn, a, self.paths.settings)
        conn.execute(delete(RECALLS).where(scope.recalls(a)))
        if scope.whole:
            conn.execute(
                delete(FILE_CURSORS).where(
                    and_(FILE_CURSORS.c.agent == a, FILE_CURSORS.c.session_id.in_(ids))
                )
            )
        if plan["calls"]:
            conn.execute(delete(LLM_CALLS).where(LLM_CALLS.c.id.in_(plan["calls"])))
        for run_id in plan["runs"]:
            summary = conn.execute(select(RUNS.c.summary).where(RUNS.c.id == run_id)).scalar_one()
            redacted = redact(json.loads(summary or "{}"), needles)
            conn.execute(
                update(RUNS).where(RUNS.c.id == run_id).values(summary=json.dumps(redacted))
            )
        for backup_id in plan["backups"]:
            content = conn.execute(
                select(MEMORY_BACKUPS.c.content).where(MEMORY_BACKUPS.c.id == backup_id)
            ).scalar_one()
            cleaned = scrub_text(content, needles, set(plan["entries"]))[0]
            if cleaned.strip():
                conn.execute(
                    update(MEMORY_BACKUPS)
                    .where(MEMORY_BACKUPS.c.id == backup_id)
                    .values(content=cleaned)
                )
            else:
                conn.execute(delete(MEMORY_BACKUPS).where(MEMORY_BACKUPS.c.id == backup_id))
        # Undo images and review proposals hold the purged text too: they go, and a run
        # that needed them can no longer be undone (purges win).
        journal.forget_sessions(conn, a, ids, lambda text: carries(text, needles))
        review.forget_sessions(conn, a, ids, lambda text: carries(text, needles))
        # 5. origins of the sessions (entries with them are gone already) and tombstones
        if scope.whole:
            conn.execute(
                delete(ORIGINS).where(and_(ORIGINS.c.agent == a, ORIGINS.c.session_id.in_(ids)))
            )
        prune_orphans(conn, a)
        if not forget:
            return  # re-derived, not forgotten: the sessions stay as they are recorded
        for t in tombstones:
            conn.execute(
                TOMBSTONES.insert().values(
                    agent=a,
                    session_id=t.session_id,
                    session_key=t.session_key,
                    reason="forgotten",
                    created_at=now,
                    detail=json.dumps({"resolved": t.resolved}),
                )
            )
        conn.execute(
            update(SESSIONS)
            .where(and_(SESSIONS.c.agent == a, SESSIONS.c.session_id.in_(ids)))
            .values(status="forgotten", reason="forgotten")
        )

    def _rederive_candidates(
        self, conn: Connection, ids: list[int], needles: Sequence[str]
    ) -> None:
        """A candidate still supported by kept sessions keeps living, but its text and word
        bag came from the first line that said it, which may be purged: take them again from
        a line that remains."""
        cs = self.paths.settings.candidates
        for cid, cand_text, tokens in conn.execute(
            select(CANDIDATES.c.id, CANDIDATES.c.text, CANDIDATES.c.tokens).where(
                CANDIDATES.c.id.in_(ids)
            )
        ).all():
            if not carries(cand_text, needles):
                continue
            wanted = frozenset(tokens.split())
            best: claims_mod.Claim | None = None
            for (line_text,) in conn.execute(
                select(CORPUS_LINES.c.text)
                .select_from(
                    CANDIDATE_EVIDENCE.join(
                        CORPUS_LINES, CORPUS_LINES.c.id == CANDIDATE_EVIDENCE.c.corpus_line_id
                    )
                )
                .where(CANDIDATE_EVIDENCE.c.candidate_id == cid)
                .order_by(
                    CORPUS_LINES.c.ts.asc().nulls_first(), CORPUS_LINES.c.id
                )  # as SQLite sorts
            ):
                for claim in claims_mod.extract(
                    line_text, min_words=cs.min_claim_words, max_words=cs.max_claim_words
                ):
                    if best is None or claims_mod.jaccard(
                        claim.tokens, wanted
                    ) > claims_mod.jaccard(best.tokens, wanted):
                        best = claim
            if best is None:
                conn.execute(
                    delete(CANDIDATE_EVIDENCE).where(CANDIDATE_EVIDENCE.c.candidate_id == cid)
                )
                conn.execute(delete(CANDIDATES).where(CANDIDATES.c.id == cid))
            else:
                # Taken from a kept line: even if a purged line said the same words, these
                # are the kept session's words now.
                conn.execute(
                    update(CANDIDATES)
                    .where(CANDIDATES.c.id == cid)
                    .values(text=best.text, tokens=" ".join(sorted(best.tokens)))
                )

    # -- files --------------------------------------------------------------------------------

    def memory_files(self) -> list[Path]:
        ws = self.paths.workspace(self.agent)
        notes = sorted((ws / "memory").glob("*.md")) if (ws / "memory").is_dir() else []
        return [self.paths.memory_file(self.agent), self.paths.dreams_file(self.agent), *notes]

    def _scrub_files(
        self, snippets: set[str], entries: Sequence[str], *, dry: bool
    ) -> dict[str, int]:
        needles = needles_of(snippets)
        removed: dict[str, int] = {}
        for path in self.memory_files():
            try:
                content = memory_file.load_text(path)
            except WorkspaceFileError:
                continue  # not a file forget can rewrite exactly; `verify` names it
            if content is None:
                continue
            cleaned, count = scrub_text(content, needles, set(entries))
            if count:
                removed[str(path)] = count
                if not dry:
                    memory_file.atomic_write(path, cleaned)
        return removed

    def _curated_writes(
        self, targets: Sequence[Target], files: Sequence[SessionFile]
    ) -> list[dict[str, Any]]:
        by_id = {f.session_id: f for f in files}
        out: list[dict[str, Any]] = []
        for t in targets:
            sf = by_id.get(t.session_id)
            if sf is None or "skip" in sf.extra or not sf.path.exists():
                continue
            for msg in TranscriptReader(sf):
                for w in msg.writes:
                    out.append(
                        {
                            "session_id": t.session_id,
                            "path": w,
                            "at": msg.timestamp.isoformat() if msg.timestamp else None,
                            "ref": reference(self.agent, t.session_id, msg.line),
                        }
                    )
        return out


def complete_pending(engine: Engine, paths: Paths, agent: str) -> int:
    """Finish purges whose database part committed but whose files were not all scrubbed."""
    remove_stale_temp_files(paths, agent)
    # The tombstone file follows the database, never leads it: a tombstone written before
    # the purge committed would hide a session nothing purged.
    with engine.connect() as conn:
        in_db = conn.execute(
            select(TOMBSTONES.c.session_id, TOMBSTONES.c.session_key).where(
                TOMBSTONES.c.agent == agent
            )
        ).all()
    in_file = file_tombstones(paths, agent)
    missing = [(sid, key) for sid, key in in_db if sid not in in_file]
    if missing:
        record_tombstones(paths, agent, missing, datetime.now(UTC))
    with engine.connect() as conn:
        pending = conn.execute(
            select(PURGES.c.id, PURGES.c.pending, PURGES.c.report).where(
                and_(PURGES.c.agent == agent, PURGES.c.completed_at.is_(None))
            )
        ).all()
    for purge_id, snippets_json, report_json in pending:
        snippets = set(json.loads(snippets_json or "[]"))
        entries = json.loads(report_json or "{}").get("entries_removed", [])
        purge = Purge(engine, paths, agent)
        purge._scrub_files(snippets, entries, dry=False)
        faults.checkpoint("forget.after_files")
        corpus.flush_files(engine, agent, paths.corpus_dir(agent))
        memory_sync.write(engine, agent, paths.memory_file(agent), run_id=None)
        # The backup memory_sync just took of the pre-purge file must not survive either.
        needles = needles_of(snippets)
        with engine.begin() as conn:
            for backup_id, content in conn.execute(
                select(MEMORY_BACKUPS.c.id, MEMORY_BACKUPS.c.content).where(
                    MEMORY_BACKUPS.c.agent == agent
                )
            ).all():
                if carries(content, needles) or any(
                    b.key in entries for b in memory_file.parse(content).blocks
                ):
                    cleaned = scrub_text(content, needles, set(entries))[0]
                    if cleaned.strip():
                        conn.execute(
                            update(MEMORY_BACKUPS)
                            .where(MEMORY_BACKUPS.c.id == backup_id)
                            .values(content=cleaned)
                        )
                    else:
                        conn.execute(delete(MEMORY_BACKUPS).where(MEMORY_BACKUPS.c.id == backup_id))
            faults.checkpoint("forget.before_complete")
            conn.execute(
                update(PURGES)
                .where(PURGES.c.id == purge_id)
                .values(completed_at=datetime.now(UTC), pending="[]")
            )
            if not is_postgres(conn):
                # FTS5 keeps deleted terms in old segments until they merge: merge them now.
                conn.execute(text("INSERT INTO entries_fts(entries_fts) VALUES('optimize')"))
    if pending and engine.dialect.name == "postgresql":
        _vacuum_postgres(engine)
    elif pending:
        # secure_delete zeroes freed pages, but a b-tree page that SQLite rebalances can keep
        # old cell bytes in its unused space, and old frames of the write-ahead log still
        # hold deleted rows: rebuild the file and truncate the log, so the purge is complete
        # in the bytes on disk, not just in the tables. (Seen on LoCoMo: one purged candidate
        # left readable in a live page's free space without this.)
        raw = engine.raw_connection()  # outside any transaction, as VACUUM requires
        try:
            cursor = raw.cursor()
            for statement in ("PRAGMA wal_checkpoint(TRUNCATE)", "VACUUM"):
                cursor.execute(statement)
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.close()
        finally:
            raw.close()
    return len(pending)


# The tables a purge deletes from: vacuumed after it in a fleet database.
_PURGED_TABLES = (
    "corpus_lines",
    "candidates",
    "candidate_evidence",
    "entries",
    "entries_fts",
    "origins",
    "entry_evidence",
    "recalls",
    "llm_calls",
    "memory_backups",
    "runs",
)


def _vacuum_postgres(engine: Engine) -> None:
    """Reclaim the dead row versions a purge left: until VACUUM runs they still hold the
    text in the table files. (PostgreSQL offers no secure_delete: freed space is reused,
    not zeroed, and the WAL and backups are the operator's to expire; docs/fleet.md.)"""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM " + ", ".join(_PURGED_TABLES))


__all__ = [
    "Purge",
    "PurgeReport",
    "Scope",
    "Selector",
    "Target",
    "complete_pending",
    "parse_since",
    "resolve",
]
