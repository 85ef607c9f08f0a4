"""The light phase's run: every session file admitted (or not) first, sessions whose
admission moved re-derived, then each admitted file read and its lines committed in batches
(`_commit.Batch`), and the candidates refreshed and rescored once at the end; corpus files
are written out around it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, and_, bindparam, func, select

from dreaming import faults, forking
from dreaming.ingest import corpus, salience
from dreaming.ingest.admission import UNCLASSIFIED, Status
from dreaming.ingest.candidates import Folder, read_clock, refresh_stale, rescore
from dreaming.ingest.sessions import differs, utc
from dreaming.ingest.tags import TagRegistry
from dreaming.memory import diary, lineage
from dreaming.messages import SessionFile
from dreaming.paths import Paths
from dreaming.phases.light import _agent_lines as agent_lines
from dreaming.phases.light import _ahead as read_ahead
from dreaming.phases.light import _plan as plan
from dreaming.phases.light._assess_ahead import START_FROM, AssessAhead
from dreaming.phases.light._commit import RESCORE_KEY, Batch, Queued, RunMarks, commit_batch
from dreaming.phases.light._read import Read
from dreaming.phases.light._rederive import Moved, purge_changed_lines, rederive_sessions
from dreaming.phases.light._summary import LightSummary
from dreaming.progress import Progress, Tick
from dreaming.store import state
from dreaming.store.statuses import CandidateStatus
from dreaming.store.tables import CANDIDATES

# A batch this big commits early when the next read is not ready (see `_read_admitted`):
# smaller commits would each cost more than the wait they save (about 3 ms a commit).
EARLY_COMMIT_ROWS = 500


# A quiet night's count of what is pending (built once: see `store.compiled`).
_PENDING = select(func.count()).where(
    and_(
        CANDIDATES.c.agent == bindparam("agent"),
        CANDIDATES.c.status == CandidateStatus.PENDING,
    )
)


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
        ahead: read_ahead.NightReads | None = None,
    ) -> None:
        self.reingest = reingest  # read every file from the start; tombstones still hold
        self.ahead = ahead  # the run's reading ahead across its agents, if any
        self.engine = engine
        self.paths = paths
        self.settings = paths.settings
        self.registry = registry
        self.progress = progress
        self.agent = ""  # set by run()
        self._folder: Folder | None = None  # see `folder`
        self.marks: RunMarks  # read by run()
        self._reads: read_ahead.Reads | None = None  # while the admitted files are read
        self._assessor: AssessAhead | None = None  # see `_assess_ahead`
        self._assess_here = False  # the run found it cannot fork one (`_assess_ahead`)

    def run(self, agent: str, files: Sequence[SessionFile]) -> LightSummary:
        try:
            return self._run(agent, files)
        finally:
            self._drop_assessor()

    def _run(self, agent: str, files: Sequence[SessionFile]) -> LightSummary:
        self.agent = agent
        self._assess_here = False
        started = time.perf_counter()
        summary = LightSummary(agent=agent)
        corpus_dir = self.paths.corpus_dir(agent)
        # Repair first: days a crashed run committed but did not write out.
        summary.corpus_files_written += corpus.flush_files(self.engine, agent, corpus_dir)
        self._folder = None
        # DREAMS.md (which the folder reads, when lines need it) fails the run here if it
        # cannot be read, before anything commits, whether or not there is anything new.
        diary.read(self.paths.dreams_file(agent))
        with self.engine.connect() as conn:
            tombstoned, sessions, cursors = plan.known(conn, self.paths, agent)
            self.marks = RunMarks(read_clock(conn, agent))
        # Admission first, for every file: sessions derived under another admission (index
        # repaired or lost, policy changed, kind now known) are purged in one go, then read
        # again below if they are admitted now.
        planned = plan.admitted(files, sessions, tombstoned, cursors, summary, self.settings)
        changed = self._rederive_moved(planned, cursors, summary)
        changed = (
            agent_lines.sync(self.engine, agent, self.settings, lambda: self.folder, summary)
            or changed
        )
        changed = self._read_admitted(planned, cursors, summary) or changed
        # The corpus files show what was committed before anything else can fail (a full
        # disk in the rescore leaves them agreeing with the table, as `verify` checks).
        summary.corpus_files_written += corpus.flush_files(self.engine, agent, corpus_dir)
        self._rescore(changed, summary)
        summary.duration_s = time.perf_counter() - started
        return summary

    @property
    def folder(self) -> Folder:
        """The candidates (and entries) new lines' claims are folded into, read when first
        needed: a night with nothing new to read, most of a fleet's agents on most nights,
        never reads them. A purge in this run drops it (`_folder = None`): read again, as
        the purge left them, if still needed."""
        if self._folder is None:
            agent = self.agent
            with self.engine.connect() as conn:
                self._folder = Folder.load(
                    conn,
                    agent,
                    self.settings,
                    self.paths.memory_file(agent),
                    self.paths.dreams_file(agent),
                    lambda keys: lineage.successors(conn, agent, keys),
                    lambda: lineage.spoken_by(conn, agent),
                )
        return self._folder

    def _rederive_moved(
        self, planned: list[plan.Planned], cursors: dict[str, dict[str, Any]], summary: LightSummary
    ) -> bool:
        """Re-derive the sessions whose trust moved since they were last seen (a forgotten
        one stays as it is). True when anything was purged."""
        moved: list[Moved] = [
            (sf, existing, values)
            for sf, decision, values, existing in planned
            if existing is not None
            and decision.status is not Status.FORGOTTEN
            and existing.get("trust") != values["trust"]
        ]
        if moved and rederive_sessions(
            self.engine, self.paths, self.agent, moved, cursors, summary
        ):
            self._folder = None  # the purge changed the candidates under it
            self._drop_assessor()  # nothing of a purged text outlives the purge
            return True
        return False

    def _read_admitted(
        self, planned: list[plan.Planned], cursors: dict[str, dict[str, Any]], summary: LightSummary
    ) -> bool:
        """Read each admitted file, with a progress tick per file, committing them in
        batches; record why the others were not admitted. True when any file was read."""
        todo = plan.to_read(planned, cursors, reingest=self.reingest)
        sizes = [_size(sf.path) for sf, *_ in planned] if self.progress is not None else []
        bytes_done = 0
        changed = False
        batch = Batch()
        jobs = [t for t in todo if isinstance(t, read_ahead.Job)]
        reads = (
            self.ahead.reads(self.agent, jobs, self.settings, self.registry)
            if self.ahead is not None
            else read_ahead.start(jobs, self.settings, self.registry)
        )
        self._reads = reads
        try:
            if not reads.ready():
                self._meanwhile()
            for n, (sf, decision, values, existing) in enumerate(planned, 1):
                if self.progress is not None:
                    bytes_done += sizes[n - 1]
                    self.progress(
                        Tick(
                            "light",
                            self.agent,
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
                    if decision.status is not Status.FORGOTTEN and differs(values, existing):
                        batch.records.append((values, existing, False))
                    continue
                if batch.rows >= EARLY_COMMIT_ROWS and not reads.ready():
                    # The next read is still being made (ahead, in the child): commit what
                    # waits, rather than wait for it with nothing to do.
                    self._commit(batch, summary)
                changed = (
                    self._read_session(sf, values, existing, todo[n - 1], reads, summary, batch)
                    or changed
                )
                if batch.full:
                    self._commit(batch, summary)
        finally:
            self._reads = None
            reads.close()
        self._commit(batch, summary)
        return changed

    def _meanwhile(self) -> None:
        """While a reading child makes the first reads (this process would only wait), build
        what the rescore will assess new candidates with: the lexicon's cue lists, ~50 ms of
        regex parsing. Built there instead, they cost that time in this process, and again
        in the child that assesses half the candidates (`forking.split_map`), which now
        inherits them."""
        salience.lexicon_for(self.settings.salience.extra()).prepare()

    def _commit(self, batch: Batch, summary: LightSummary) -> None:
        """Commit what `batch` gathered in one transaction, and empty it."""
        if not batch:
            return
        # Read (when first needed) before the transaction opens: on the connection it uses.
        folder = self.folder if batch.reads else None
        with self.engine.begin() as conn:
            commit_batch(conn, folder, batch, summary, self.marks, self.agent)
            faults.checkpoint("light.before_commit")
        if batch.reads:
            self.marks.committed(batch.newest)
        faults.checkpoint("light.after_commit")
        if folder is not None:
            self._assess_ahead(folder.take_made())
        summary.sessions_read += len(batch.reads)
        batch.reads.clear()
        batch.records.clear()
        batch.rows = 0

    def _assess_ahead(self, texts: list[str]) -> None:
        """Hand the texts of the candidates a batch made to a child that assesses them
        while light folds on, when light is the slower half: the next read is ready (the
        reading child is ahead, or there is none), so the second core has time. Started
        for a batch of `START_FROM` such texts or more, where a fork is safe. Texts not
        handed over are assessed by the rescore, as are those of a child that failed."""
        if not texts or self._assess_here or self._reads is None or not self._reads.ready():
            return
        if self._assessor is None:
            if len(texts) < START_FROM:
                return
            # Asked once a run: `fork_safe` lets corpus's idle fsync threads go each time.
            if not forking.fork_safe():
                self._assess_here = True
                return
            lexicon = salience.lexicon_for(self.settings.salience.extra()).prepare()
            try:
                self._assessor = AssessAhead(lexicon)
            except OSError:  # no socket or no process to be had: the rescore assesses them
                self._assess_here = True
                return
        self._assessor.send(texts)

    def _drop_assessor(self) -> None:
        if self._assessor is not None:
            self._assessor.close()
            self._assessor = None

    def _assessed(self, lexicon: salience.Lexicon) -> dict[str, tuple[float, str]]:
        """What the assessing child made, if there is one (see `_assess_ahead`)."""
        assessor, self._assessor = self._assessor, None
        return assessor.answers(lexicon) if assessor is not None else {}

    def _rescore(self, changed: bool, summary: LightSummary) -> None:
        """Refresh and rescore the candidates when anything changed (or a run cut short left
        its mark), else count the pending ones; read the clock."""
        agent = self.agent
        with self.engine.begin() as conn:
            # A run killed between a file's commit and this point leaves the mark behind, so
            # the next run rescores even though it reads nothing new.
            if changed or state.get(conn, agent, RESCORE_KEY) is not None:
                summary.candidates_updated = refresh_stale(conn, agent)
                summary.candidates_pending = rescore(
                    conn, agent, self.settings, ahead=self._assessed
                )
                state.clear(conn, agent, RESCORE_KEY)
            else:
                summary.candidates_pending = int(
                    conn.execute(_PENDING, {"agent": agent}).scalar_one()
                )
            clock = read_clock(conn, agent)
        summary.clock = clock.isoformat() if clock else None

    def _read_session(
        self,
        sf: SessionFile,
        values: dict[str, Any],
        existing: dict[str, Any] | None,
        todo: plan.ToRead,
        reads: read_ahead.Reads,
        summary: LightSummary,
        batch: Batch,
    ) -> bool:
        """Read what is new in one admitted file into `batch`. False: nothing was read."""
        if isinstance(todo, OSError):
            summary.skips["unreadable-file"] += 1
            summary.note_skips(sf, Counter({"unreadable-file": 1}))
            return False
        if todo is None:
            summary.sessions_unchanged += 1
            if differs(values, existing):
                batch.records.append((values, existing, False))
            return False
        prev = todo.prev
        read = reads.read(todo, summary)
        if read is None:
            return False  # unreadable now: nothing read, nothing concluded about its lines
        reader = read.reader
        # The people its lines name are the session's participants: forget reaches them.
        plan.add_participants(values, sorted({r["speaker"] for r in read.rows if r["speaker"]}))
        summary.bytes_read += max(reader.cursor.offset - (reader.started_at or 0), 0)
        if reader.format is not None:
            values["format"] = reader.format.value
        if sf.start_unread:  # the header, read with the file's head
            values["created_at"] = utc(reader.header_time)
        if reader.restarted or self.reingest:
            # What the file no longer says is purged first, against what is committed.
            self._commit(batch, summary)
            self._rederive_edited(sf, prev, read, summary)
        batch.add(Queued(read, values, existing))
        faults.checkpoint("light.read")
        return True

    def _rederive_edited(
        self, sf: SessionFile, prev: dict[str, Any] | None, read: Read, summary: LightSummary
    ) -> None:
        """Edited before the cursor (or re-read on request): the stored lines whose text no
        longer stands are purged as forget would, and the file's text is ingested afresh."""
        if read.reader.restarted and prev is not None:
            summary.files_rewritten += 1
        if purge_changed_lines(self.engine, self.paths, sf, read.rows, summary):
            self._folder = None  # the purge changed the candidates under it
            self._drop_assessor()  # nothing of a purged text outlives the purge


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # gone or unreadable: reading it will say so
        return 0
