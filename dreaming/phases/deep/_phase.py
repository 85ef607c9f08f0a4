"""The deep phase's run: the night's candidates taken batch by batch, each decided (by the
model or deterministically), then applied or staged, with its own transaction and MEMORY.md
write; a dry run does all of it in one transaction it rolls back, keeping the preview."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import Connection, Engine

from dreaming import faults
from dreaming.config import DeepSettings
from dreaming.ingest.candidates import refresh_stale, rescore
from dreaming.ingest.slots import slots_for
from dreaming.ingest.tags import TagRegistry
from dreaming.llm import CallRecord
from dreaming.llm.calls import LLMAccess, log_calls, record_calls
from dreaming.memory import lineage, memory_file, memory_sync, review
from dreaming.memory.decisions import Action
from dreaming.memory.sanitize import hold_reason
from dreaming.paths import Paths
from dreaming.phases.deep import _apply, _deterministic
from dreaming.phases.deep._model import Exchange, ModelDecider
from dreaming.phases.deep._selection import (
    Candidate,
    owner_said_at,
    select_candidates,
    snippets,
)
from dreaming.phases.deep._summary import DeepSummary, preview_diff
from dreaming.progress import Progress, Tick
from dreaming.store import state
from dreaming.store.state import StateKey
from dreaming.store.statuses import EntryStatus


class _HeldLineage:
    """When each held entry was last stated, and who said it, kept from batch to batch of a
    deep run: read for every held entry before the first deterministic batch, then only
    for the entries that are new since and those applied decisions named (merged into,
    superseded, rewritten: keys are their text's hash, so an entry whose text changed is a
    new key). Reading them for every entry each batch cost a third of a batch at 20,000
    entries."""

    def __init__(self) -> None:
        self.stated: dict[str, datetime] = {}
        self.spoken: dict[str, frozenset[str]] = {}
        self._known: set[str] = set()

    def of(
        self, conn: Connection, agent: str, keys: Sequence[str]
    ) -> tuple[dict[str, datetime], dict[str, frozenset[str]]]:
        missing = [k for k in keys if k not in self._known]
        if missing:
            self.stated.update(lineage.stated_at(conn, agent, missing))
            self.spoken.update(lineage.spoken_by(conn, agent, missing))
            self._known.update(missing)
        return self.stated, self.spoken

    def changed(self, decisions: Sequence[lineage.Applied]) -> None:
        """Forget what `decisions`, now applied, may have changed."""
        for d in decisions:
            keys = [*d.targets, *([memory_file.entry_key(d.text)] if d.text else [])]
            for key in keys:
                self._known.discard(key)
                self.stated.pop(key, None)
                self.spoken.pop(key, None)


@dataclass
class _Tally:
    """What the batch loop counts across one run's batches."""

    retire_cap: int  # entries merges and supersessions may retire this run
    retired: int = 0
    all_skip_streak: int = 0  # model-decided batches in a row that skipped everything
    fallen_back: int = 0  # batches the deterministic path decided because the model failed
    applied: int = 0  # batches whose decisions were applied (MEMORY.md is written after them)


class DeepPhase:
    def __init__(
        self,
        engine: Engine,
        paths: Paths,
        registry: TagRegistry,
        *,
        llm: LLMAccess | None = None,
        dry_run: bool = False,
        run_id: int | None = None,
        settings: DeepSettings | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.progress = progress
        self.engine = engine
        self.paths = paths
        self.settings = settings or paths.settings.deep  # a run may narrow it (promote --limit)
        self.sim = paths.settings.candidates.similarity
        slot_settings = paths.settings.slots
        self.slots = slots_for(slot_settings.relations, slot_settings.lists)
        self.registry = registry
        self.llm = llm  # None: the deterministic consolidator decides
        self.dry_run = dry_run
        self.run_id = run_id
        self._dry_conn: Connection | None = None
        self._pending_calls: list[CallRecord] = []
        self._texts: dict[int, str] = {}  # candidate id -> its text, for the decision log
        # The held entries as the deterministic batches see them, and their lineage, from one
        # batch to the next.
        self._memory: _deterministic.Memory | None = None
        self._held = _HeldLineage()
        self._model = (
            None
            if llm is None
            else ModelDecider(
                llm,
                max_chars=self.settings.max_entry_chars,
                registry=registry,
                log_calls=self._log_calls,
            )
        )

    # -- connections: a dry run works in one transaction it rolls back at the end ----------

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Connection]:
        if self._dry_conn is not None:
            yield self._dry_conn
            return
        with self.engine.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def _reader(self) -> Iterator[Connection]:
        if self._dry_conn is not None:
            yield self._dry_conn
            return
        with self.engine.connect() as conn:
            yield conn

    # -- the run -----------------------------------------------------------------------------

    def run(self, agent: str) -> DeepSummary:
        started = time.perf_counter()
        summary = DeepSummary(agent=agent, dry_run=self.dry_run)
        if self.dry_run:
            self._run_dry(agent, summary)
        else:
            summary.took_in(memory_sync.reconcile(self.engine, agent, self._files(agent)))
            self._run_batches(agent, summary)
            with self.engine.connect() as conn:
                summary.entries = len(lineage.live_entries(conn, agent))
                summary.archived = len(lineage.archived_entries(conn, agent))
        summary.duration_s = time.perf_counter() - started
        return summary

    def _files(self, agent: str) -> memory_sync.Files:
        return memory_sync.Files.of(self.paths, agent)

    def _run_dry(self, agent: str, summary: DeepSummary) -> None:
        """The run in one transaction, rolled back: what it would do, and MEMORY.md's diff.
        Its LLM calls are recorded after the rollback: what was spent was spent."""
        files = self._files(agent)
        with self.engine.connect() as conn:
            outer = conn.begin()
            before = memory_sync.render(conn, agent, files).memory
            self._dry_conn = conn
            try:
                self._run_batches(agent, summary)
                after = memory_sync.render(conn, agent, files)
                statuses = lineage.entry_statuses(conn, agent)
                summary.entries = len(after.placement.kept)
            finally:
                self._dry_conn = None
                outer.rollback()
        summary.diff = preview_diff(before, after.memory)
        report = memory_sync.SyncReport()
        report.took(after.placement)
        report.archived_now = [
            k for k in after.placement.archived if statuses.get(k) != EntryStatus.ARCHIVED
        ]
        report.restored = [
            k for k in after.placement.kept if statuses.get(k) == EntryStatus.ARCHIVED
        ]
        summary.wrote(report)
        with self.engine.begin() as conn:
            record_calls(conn, agent, self.run_id, self._pending_calls)

    def _select(self, conn: Connection, agent: str) -> list[Candidate]:
        return select_candidates(conn, agent, self.settings)

    def _snippets(self, conn: Connection, candidate_id: int) -> list[str]:
        return snippets(conn, candidate_id)

    def _prepare(self, agent: str) -> tuple[list[Candidate], int]:
        """Tonight's candidates, and how many entries the memory holds before any batch."""
        with self._tx() as conn:
            # Signals a crashed light run left stale, and scores a purge left to move, are
            # made right before anything is chosen.
            stale = refresh_stale(conn, agent)
            if stale or state.get(conn, agent, StateKey.RESCORE_PENDING) is not None:
                rescore(conn, agent, self.paths.settings)
                state.clear(conn, agent, StateKey.RESCORE_PENDING)
            review.expire(conn, agent)  # their candidates are chosen again tonight
        with self._reader() as conn:
            return self._select(conn, agent), len(lineage.held_entries(conn, agent))

    def _run_batches(self, agent: str, summary: DeepSummary) -> None:
        selected, live_at_start = self._prepare(agent)
        summary.selected = len(selected)
        self._texts = {c.id: c.text for c in selected}
        if not selected:
            return  # a quiet night costs nothing (invariant 10)
        # Rounded up so a small memory can still take one merge; a fraction of 0 forbids all.
        tally = _Tally(retire_cap=math.ceil(self.settings.max_retire_fraction * live_at_start))
        size = self.settings.batch_size
        planned = -(-len(selected) // size)
        try:
            for start in range(0, len(selected), size):
                if self.progress is not None and summary.batches:
                    self.progress(Tick("deep", agent, summary.batches, planned, "batches"))
                if not self._run_batch(agent, selected, start, summary, tally):
                    break
            # Once, after every batch committed: until then the dirty mark each batch set
            # has the next run write it, should this one die between two batches.
            if tally.applied:
                self._write_memory(agent, summary)
        finally:
            if self._model is not None:
                self._model.close()
            self._note_degraded(summary, tally.fallen_back)
        if self.progress is not None:  # the last tick says how many batches there were
            self.progress(Tick("deep", agent, summary.batches, summary.batches, "batches"))

    def _run_batch(
        self,
        agent: str,
        selected: Sequence[Candidate],
        start: int,
        summary: DeepSummary,
        tally: _Tally,
    ) -> bool:
        """Decide, apply (or stage) and count the batch at `start`; False when the run stops
        here (the rest wait, or the model skips everything)."""
        batch = selected[start : start + self.settings.batch_size]
        summary.batches += 1
        decided = self._decide(agent, batch, len(selected) - start, summary, tally)
        if decided is None:
            return False
        decisions, path = decided
        tally.retired += sum(
            len(d.targets) for d in decisions if d.action in (Action.MERGE, Action.SUPERSEDE)
        )
        decisions = self._hold(agent, decisions, summary)
        if self.settings.apply == "review":
            decisions = self._stage(agent, decisions, summary)
        self.apply_decisions(agent, decisions, summary, write=False)
        tally.applied += 1
        summary.paths[path] += len(batch)
        return not self._runaway(path, decisions, summary, tally)

    def _decide(
        self,
        agent: str,
        batch: Sequence[Candidate],
        remaining: int,
        summary: DeepSummary,
        tally: _Tally,
    ) -> tuple[list[lineage.Applied], str] | None:
        """The batch's decisions and the path that made them (the model while it can, else
        the deterministic consolidator); None when the `remaining` candidates are to wait
        for the budget or the model, as the settings say."""
        if self._model is not None and not summary.ended_on_budget and self._unavailable is None:
            decisions = self._decide_llm(agent, batch, summary, tally.retire_cap - tally.retired)
            if decisions is not None:
                return decisions, "llm"
        if summary.ended_on_budget and self.settings.on_budget == "wait":
            summary.deferred["budget"] += remaining
            return None
        if self._unavailable is not None and self.settings.on_llm_failure == "wait":
            summary.deferred["llm_unavailable"] += remaining
            return None
        if self._model is not None and not summary.ended_on_budget:
            tally.fallen_back += 1
        return self._decide_deterministic(agent, batch), "deterministic"

    def _runaway(
        self, path: str, decisions: Sequence[lineage.Applied], summary: DeepSummary, tally: _Tally
    ) -> bool:
        """Whether the model has now skipped everything in `runaway_skip_batches` batches
        in a row: a model that has stopped judging is stopped."""
        if path == "llm" and all(d.action is Action.SKIP for d in decisions):
            tally.all_skip_streak += 1
            if tally.all_skip_streak >= self.settings.runaway_skip_batches:
                summary.runaway_stop = True
                return True
        else:
            tally.all_skip_streak = 0
        return False

    @property
    def _unavailable(self) -> str | None:
        """Why the endpoint failed for good this run, if it did."""
        return self._model.unavailable if self._model is not None else None

    def _note_degraded(self, summary: DeepSummary, fallen_back: int) -> None:
        """Say why the model did not decide what it should have, if it did not."""
        last = self._model.last_failure if self._model is not None else None
        cause = self._unavailable or last
        if fallen_back:
            summary.degraded.append(
                f"{fallen_back} of {summary.batches} batches decided without the model"
                + (f" ({cause})" if cause else "")
            )
        if waiting := summary.deferred.get("llm_unavailable"):
            summary.degraded.append(
                f"{waiting} candidates wait for the model ({cause or 'it is unavailable'})"
            )

    # -- the two deciders --------------------------------------------------------------------

    def _decide_llm(
        self, agent: str, batch: Sequence[Candidate], summary: DeepSummary, retire_room: int
    ) -> list[lineage.Applied] | None:
        assert self._model is not None
        self._model.client()  # opened at the first batch the model decides
        with self._reader() as conn:
            exchange = Exchange.of(
                conn, agent, batch, self.settings.entries_per_candidate, self.slots
            )
        return self._model.decide(agent, exchange, summary, retire_room)

    def _decide_deterministic(
        self, agent: str, batch: Sequence[Candidate]
    ) -> list[lineage.Applied]:
        with self._reader() as conn:
            # Archived entries too: said again, a fact merges into its entry (which comes
            # back), and a correction supersedes it wherever it stands.
            live = lineage.held_entries(conn, agent)
            stated, spoken = self._held.of(conn, agent, [k for k, _ in live])
            said_at = owner_said_at(conn, [c.id for c in batch])
        if self._memory is None:
            self._memory = _deterministic.Memory(self.sim, _deterministic.Readings(self.slots))
        return _deterministic.decide(
            live,
            batch,
            similarity=self.sim,
            max_chars=self.settings.max_entry_chars,
            registry=self.registry,
            slots=self.slots,
            stated=stated,
            said_at=said_at,
            spoken=spoken,
            memory=self._memory,
        )

    # -- applying -----------------------------------------------------------------------------

    def _hold(
        self, agent: str, decisions: Sequence[lineage.Applied], summary: DeepSummary
    ) -> list[lineage.Applied]:
        """Decisions whose text tells the agent to set its instructions aside or send data
        out go to review with the reason, whatever `apply` says; the rest come back."""
        held, rest = [], []
        for d in decisions:
            why = hold_reason(d.text) if d.text is not None else None
            if why is None:
                rest.append(d)
            else:
                held.append(replace(d, reason=f"held for review: {why}"))
                summary.held.append(f"{why}: {d.text}")
        if held:
            self._stage(agent, held, summary)
        return rest

    def _stage(
        self, agent: str, decisions: Sequence[lineage.Applied], summary: DeepSummary
    ) -> list[lineage.Applied]:
        with self._tx() as conn:
            return _apply.stage(
                conn,
                agent,
                decisions,
                summary,
                run_id=self.run_id,
                expire_days=self.settings.review_expire_days,
                texts=self._texts,
            )

    def apply_decisions(
        self,
        agent: str,
        decisions: Sequence[lineage.Applied],
        summary: DeepSummary,
        also: Callable[[Connection], None] | None = None,
        *,
        write: bool = True,
    ) -> None:
        """Apply validated decisions in one transaction (and `also`, a caller's own writes,
        in the same one), then write MEMORY.md (deep's batches leave that to the end of the
        phase: `write=False`). Deep's batches and accepted review proposals both come here:
        there is one way of applying decisions."""
        with self._tx() as conn:
            if also is not None:
                also(conn)
            _apply.apply_all(conn, agent, decisions, summary, run_id=self.run_id, texts=self._texts)
            self._held.changed(decisions)
            faults.checkpoint("deep.before_commit")
        faults.checkpoint("deep.after_commit")
        if write:
            self._write_memory(agent, summary)

    def _write_memory(self, agent: str, summary: DeepSummary) -> None:
        if not self.dry_run:
            _apply.write_memory(self.engine, agent, self._files(agent), self.run_id, summary)

    def _log_calls(self, agent: str, calls: Sequence[CallRecord], summary: DeepSummary) -> None:
        held = self._pending_calls if self.dry_run else None
        totals = log_calls(self.engine, agent, self.run_id, calls, held=held)
        summary.llm_calls += totals.calls
        summary.input_tokens += totals.input_tokens
        summary.output_tokens += totals.output_tokens
        summary.cost_usd += totals.usd
