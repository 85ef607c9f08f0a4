"""The purge: plan what a scope of sessions derived, count it (a dry run stops there), then
delete it in one transaction through each table's owner, and complete it (`_complete`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine

from dreaming import faults, runs, text_memo
from dreaming.ingest import candidates, corpus
from dreaming.ingest import tombstones as tombstones_mod
from dreaming.ingest.transcripts import TranscriptReader
from dreaming.llm.calls import calls_carrying, forget_calls
from dreaming.memory import diary, journal, lineage, memory_sync, review
from dreaming.messages import SessionFile
from dreaming.paths import Paths
from dreaming.store import cursors
from dreaming.store.tables import PURGES

from . import _derived
from ._complete import complete_pending
from ._reports import plan_reports
from ._scrub import (
    backup_carries,
    needles_of,
    redact_within,
    scrub_backups,
    scrub_files,
    searcher,
    snippets_of,
)
from ._select import Selector, Target, resolve


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


@dataclass
class Plan:
    """What a purge of one scope removes, found before anything is deleted."""

    line_ids: list[int]  # corpus lines
    days: list[str]  # the corpus days they are on
    entries: list[str]  # entries (live or archived) built from them (whole-entry rule)
    candidates: list[int]  # candidates they gave evidence to
    mixed: list[dict[str, Any]] = field(default_factory=list)  # entries with other sessions
    emptied: list[str] = field(default_factory=list)  # entries with no other session
    snippets: set[str] = field(default_factory=set)  # purged text to hunt for elsewhere
    needles: tuple[str, ...] = ()  # the snippets as searched for
    calls: list[int] = field(default_factory=list)  # LLM call records carrying it
    backups: list[int] = field(default_factory=list)  # MEMORY.md backups carrying it
    runs: list[int] = field(default_factory=list)  # run summaries carrying it
    derived: _derived.Derived = field(default_factory=_derived.Derived)  # REM's, unquoted
    reports: list[dict[str, Any]] = field(default_factory=list)  # report files known
    _search: Callable[[str | None], bool] = field(default=bool, repr=False, compare=False)
    _searched: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def holds_purged(self, text: str | None) -> bool:
        if self._searched is not self.needles:  # a tuple, set when the plan is made
            self._search, self._searched = searcher(self.needles), self.needles
        return self._search(text)


@dataclass
class PurgeTally:
    """What a purge found and did, filled in as it works (drivers get the frozen
    `PurgeReport` of it; the `purges` row keeps its `to_dict`)."""

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
    diary_entries: list[str] = field(default_factory=list)  # days of DREAMS.md entries removed
    run_summaries: list[int] = field(default_factory=list)  # runs whose summary is redacted
    report_files: list[dict[str, Any]] = field(default_factory=list)  # path, action
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
            "diary_entries_removed": self.diary_entries,
            "run_summaries_redacted": self.run_summaries,
            "report_files": self.report_files,
            "nothing_left": self.nothing_left,
        }

    @property
    def nothing_left(self) -> bool:
        return not any(self.counts.values()) and not self.file_lines_removed


class Purge:
    """One agent's purges: `run` forgets the sessions a selector names, `rederive` purges
    what a scope derived and leaves its sessions to be read again."""

    def __init__(self, engine: Engine | None, paths: Paths, agent: str) -> None:
        self.engine = engine
        self.paths = paths
        self.agent = agent

    # -- planning (read only) --------------------------------------------------------------

    def _plan(self, conn: Connection, scope: Scope) -> Plan:
        a = self.agent
        ids = list(scope.sessions)
        lines = corpus.stored_lines(conn, a, scope.sessions, scope.line_ids)
        if scope.whole:
            keys = lineage.keys_from_sessions(conn, a, ids)
        else:
            # Whole-entry rule, per line: an entry built from a line whose text changed is
            # gone; the lines that still hold are ingested again and may rebuild it.
            keys = lineage.keys_citing(conn, a, ids, {(x.session_id, x.line) for x in lines})
        live = dict(lineage.held_entries(conn, a))  # archived entries go as loaded ones do
        plan = Plan(
            line_ids=[x.id for x in lines],
            days=sorted({x.day for x in lines}),
            entries=[k for k in keys if k in live],
            candidates=candidates.candidates_of(conn, a, scope.sessions, scope.line_ids),
        )
        outside = set(ids) if scope.whole else set()
        for key in plan.entries:
            others = sorted(
                {o.session_id for o in lineage.entry_lineage(conn, a, key).origins} - outside
            )
            if others:
                plan.mixed.append({"key": key, "other_sessions": others})
            else:
                plan.emptied.append(key)
        snippets = snippets_of([x.text for x in lines], self.paths.settings)
        if scope.keep:
            kept = "\n".join(scope.keep)
            snippets = {x for x in snippets if x not in kept}
        plan.snippets = snippets | {live[k] for k in plan.entries}
        plan.needles = tuple(needles_of(plan.snippets))
        return plan

    def _count(self, conn: Connection, scope: Scope, plan: Plan) -> dict[str, int]:
        """What the purge will remove, per table (a dry run's report). Also finds the call
        records, backups and run summaries that carry purged text, for the delete."""
        a = self.agent
        ids, line_ids = list(scope.sessions), scope.line_ids
        plan.calls = calls_carrying(conn, a, plan.holds_purged)
        plan.backups = [
            i
            for i, content in memory_sync.backups(conn, a)
            if backup_carries(content, plan.needles, plan.entries)
        ]
        plan.runs = runs.summaries_carrying(conn, a, plan.holds_purged)
        plan.derived = derived = _derived.find(conn, self.paths, a, ids, plan.days)
        return {
            "corpus_lines": len(plan.line_ids),
            "entries": len(plan.entries),
            "index_rows": len(plan.entries),
            "candidates": len(plan.candidates),
            "candidate_evidence": candidates.count_evidence(conn, a, ids, line_ids),
            "recalls": candidates.count_recalls(conn, a, ids, line_ids),
            "origins": lineage.count_origins(conn, a, sessions=ids)
            if scope.whole
            else lineage.count_origins(conn, a, keys=plan.entries),
            "cursors": cursors.count_sessions(conn, a, ids) if scope.whole else 0,
            "memory_backups": len(plan.backups),
            "llm_calls": len(set(plan.calls) | set(derived.rem_calls)),
            "run_summaries": len(set(plan.runs) | set(derived.rem_runs)),
            "diary_entries": len(derived.diary_days),
            "review_proposals": review.forget_sessions(
                conn, a, ids, plan.holds_purged, dry_run=True
            ),
            "runs_no_longer_undoable": len(
                journal.forget_sessions(conn, a, ids, plan.holds_purged, dry_run=True)
            ),
        }

    # -- the purge --------------------------------------------------------------------------

    def targets(self, selector: Selector, files: Sequence[SessionFile]) -> list[Target]:
        """The sessions `selector` names, resolved and nothing else (no plan, no counts): what
        a caller checks before it takes the lock for the purge itself."""
        if self.engine is None:
            return resolve(None, self.agent, selector, files)
        with self.engine.connect() as conn:
            return resolve(conn, self.agent, selector, files)

    def forget(
        self, selector: Selector, files: Sequence[SessionFile], *, dry_run: bool
    ) -> PurgeTally:
        """Purge what the selected sessions derived and tombstone them (dry: count only);
        `rederive` is the same purge without the tombstones."""
        report = PurgeTally(self.agent, selector.to_dict(), dry_run)
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

    def rederive(self, scope: Scope, why: dict[str, Any]) -> PurgeTally:
        """Purge what was derived from `scope` as forget does, but leave no tombstone: the
        sessions stay readable and the caller ingests them again (a session whose admission
        changed, lines of a transcript edited in place). Audited in `purges` like a forget."""
        assert self.engine is not None
        complete_pending(self.engine, self.paths, self.agent)
        report = PurgeTally(self.agent, why, dry_run=False)
        return self._execute(report, scope, [], forget=False)

    def _execute(
        self, report: PurgeTally, scope: Scope, new_tombstones: list[Target], *, forget: bool
    ) -> PurgeTally:
        assert self.engine is not None
        with self.engine.connect() as conn:
            plan = self._plan(conn, scope)
            report.counts = self._count(conn, scope, plan)
            # A page names the sessions it shows by id: one naming a session this forget
            # tombstones shows what it derived (after the purge, a page lists it only as
            # forgotten). A rederive's sessions stay.
            named = [t.session_id for t in new_tombstones if t.resolved] if forget else []
            plan.reports = plan_reports(
                conn, self.paths, self.agent, named, plan.needles, plan.entries
            )
        report.counts["report_files"] = sum(1 for r in plan.reports if r["action"] == "remove")
        report.counts["tombstones"] = len(new_tombstones)
        report.entries_removed = plan.entries
        report.mixed_lineage = plan.mixed
        report.emptied = plan.emptied
        report.diary_entries = plan.derived.diary_days
        report.run_summaries = sorted(set(plan.runs) | set(plan.derived.rem_runs))
        report.report_files = plan.reports
        report.file_lines_removed = scrub_files(
            self.paths, self.agent, plan.snippets, plan.entries, dry=True
        )
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
                        pending=json.dumps(sorted(plan.snippets)),
                    )
                    .returning(PURGES.c.id)
                ).scalar_one()
            )
        faults.checkpoint("forget.after_commit")
        try:
            complete_pending(self.engine, self.paths, self.agent)
        finally:
            # What this process remembers of texts it worked on (a scheduler runs for
            # weeks), even when completing the files failed (the next run completes them).
            text_memo.forget_all()
        return report

    def _delete(
        self,
        conn: Connection,
        scope: Scope,
        plan: Plan,
        tombstones: list[Target],
        now: datetime,
        *,
        forget: bool,
    ) -> None:
        """The database part of a purge, each table through its owner, in this order."""
        a = self.agent
        ids = list(scope.sessions)
        needles = plan.needles
        # 1. corpus
        corpus.forget_lines(conn, a, scope.sessions, scope.line_ids, plan.days)
        # 2-3. entries, their origins, evidence and index rows (whole-entry deletion)
        lineage.forget_entries(conn, a, plan.entries)
        memory_sync.mark_dirty(conn, a)
        # 4. state: candidates (re-derived from what remains), recalls, cursors, logs, backups
        candidates.forget_lines(
            conn,
            a,
            scope.sessions,
            scope.line_ids,
            candidates=plan.candidates,
            settings=self.paths.settings,
            carries=plan.holds_purged,
        )
        if scope.whole:
            cursors.forget_sessions(conn, a, ids)
        forget_calls(conn, sorted(set(plan.calls) | set(plan.derived.rem_calls)))
        runs.redact_summaries(conn, plan.runs, lambda summary: redact_within(summary, needles))
        # What REM derived without quoting (theme words, a model's diary): the themes and
        # diary text of every run whose window read a purged session, and the windows of
        # the diary entries the file step removes.
        runs.redact_summaries(conn, plan.derived.rem_runs, runs.forget_rem)
        diary.forget_days(conn, a, plan.derived.window_days)
        backups = ((i, memory_sync.backup(conn, i)) for i in plan.backups)
        scrub_backups(conn, backups, needles, plan.entries)
        # Undo images and review proposals hold the purged text too: they go, and a run
        # that needed them can no longer be undone (purges win).
        journal.forget_sessions(conn, a, ids, plan.holds_purged)
        review.forget_sessions(conn, a, ids, plan.holds_purged)
        # 5. origins of the sessions (entries with them are gone already) and tombstones
        lineage.forget_origins(conn, a, ids if scope.whole else None)
        # A rederive forgets nothing: its sessions stay as they are recorded.
        if forget:
            tombstones_mod.forget_sessions(conn, a, ids, tombstones, now)

    # -- files --------------------------------------------------------------------------------

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
                            "ref": corpus.reference(self.agent, t.session_id, msg.line),
                        }
                    )
        return out


__all__ = ["Purge", "PurgeTally", "Scope"]
