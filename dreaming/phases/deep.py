"""The deep phase: promote candidates into long-term memory.

Selection is deterministic (gates, highest score first). Each batch is decided by the LLM
when a profile is configured and budget remains, else - and whenever the LLM fails, runs out
of budget or returns decisions that do not validate - by the deterministic consolidator.
Decisions are applied by code (`dreaming.lineage`) one transaction per batch, and MEMORY.md
is rewritten from the database after each batch (`dreaming.memory_sync`).
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, and_, func, or_, select

from dreaming import claims as claims_mod
from dreaming import (
    entry_index,
    faults,
    gates,
    lineage,
    memory_file,
    memory_sync,
    review,
    salience,
)
from dreaming.candidates import read_clock, refresh_stale, rescore
from dreaming.config import DeepSettings, Paths
from dreaming.decisions import (
    Action,
    BatchInvalid,
    DecisionReply,
    PromptCandidate,
    PromptEntry,
    render_prompt,
    reply_schema,
    validate,
)
from dreaming.errors import (
    BudgetExceededError,
    EndpointDownError,
    InvalidReplyError,
    LLMError,
    TransientError,
)
from dreaming.llm import Budget, CallRecord, calls_of
from dreaming.llm.calls import LLMAccess, record_calls
from dreaming.phases._calls_log import log_calls
from dreaming.progress import Progress, Tick
from dreaming.sanitize import sanitize_entry_text
from dreaming.store.tables import (
    CANDIDATE_EVIDENCE,
    CANDIDATES,
    CORPUS_LINES,
    ENTRIES,
)
from dreaming.tags import TagRegistry

if TYPE_CHECKING:
    from dreaming.llm import LLMClient

log = logging.getLogger(__name__)


PROMOTABLE_CLASSES = ("owner", "agent")


@dataclass
class DeepSummary:
    agent: str
    dry_run: bool = False
    selected: int = 0
    batches: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    paths: Counter[str] = field(default_factory=Counter)
    deferred: Counter[str] = field(default_factory=Counter)
    fallbacks: list[str] = field(default_factory=list)
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    ended_on_budget: bool = False
    runaway_stop: bool = False
    # Why the model did not decide what it should have (it failed, or could not be reached):
    # the run is `degraded`. Empty when it decided everything, or when no model is set.
    degraded: list[str] = field(default_factory=list)
    proposed: int = 0  # review mode: decisions staged for a person instead of applied
    memory_written: bool = False
    memory_repaired: bool = False
    edited_by_person: list[str] = field(default_factory=list)
    removed_by_person: list[str] = field(default_factory=list)
    duplicates_removed: list[str] = field(default_factory=list)
    entries: int = 0
    decisions: list[dict[str, Any]] = field(default_factory=list)
    diff: str = ""
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "dry_run": self.dry_run,
            "selected": self.selected,
            "batches": self.batches,
            "actions": dict(sorted(self.actions.items())),
            "paths": dict(sorted(self.paths.items())),
            "deferred": dict(sorted(self.deferred.items())),
            "fallbacks": self.fallbacks,
            "llm": {
                "calls": self.llm_calls,
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "cost_usd": round(self.cost_usd, 6),
            },
            "ended_on_budget": self.ended_on_budget,
            "runaway_stop": self.runaway_stop,
            "degraded": self.degraded,
            "proposed": self.proposed,
            "memory": {
                "written": self.memory_written,
                "repaired": self.memory_repaired,
                "edited_by_person": self.edited_by_person,
                "removed_by_person": self.removed_by_person,
                "duplicates_removed": self.duplicates_removed,
            },
            "entries": self.entries,
            "decisions": self.decisions,
            "diff": self.diff,
            "duration_s": round(self.duration_s, 3),
        }


@dataclass(frozen=True, slots=True)
class _Candidate:
    id: int
    key: str
    text: str
    tokens: frozenset[str]
    sessions: int
    days: int
    owner_lines: int
    agent_lines: int
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    features: str = ""
    first_line: int = 0  # corpus line first said in: the sentences of one utterance share it

    @property
    def said_by(self) -> str:
        if self.owner_lines and self.agent_lines:
            return "user and agent"
        return "user" if self.owner_lines else "agent"


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
        self.registry = registry
        self.llm = llm  # None: the deterministic consolidator decides
        self.dry_run = dry_run
        self.run_id = run_id
        self._dry_conn: Connection | None = None
        self._pending_calls: list[CallRecord] = []
        self._texts: dict[int, str] = {}  # candidate id -> its text, for the decision log
        self._unavailable: str | None = None  # the endpoint failed for good this run
        self._last_failure: str | None = None  # the model's latest other failure

    # -- connections: a dry run works in one transaction it rolls back at the end ----------

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Connection]:
        if self._dry_conn is not None:
            yield self._dry_conn
            return
        with self.engine.begin() as conn:
            yield conn

    def run(self, agent: str) -> DeepSummary:
        started = time.perf_counter()
        summary = DeepSummary(agent=agent, dry_run=self.dry_run)
        memory_path = self.paths.memory_file(agent)
        if not self.dry_run:
            report = memory_sync.reconcile(self.engine, agent, memory_path)
            summary.memory_repaired = report.repaired
            summary.edited_by_person = report.edited_by_person
            summary.removed_by_person = report.removed_by_person
            summary.duplicates_removed = report.duplicates_removed
        if self.dry_run:
            with self.engine.connect() as conn:
                outer = conn.begin()
                before = memory_sync.render(conn, agent, memory_path)[1]
                self._dry_conn = conn
                try:
                    self._run_batches(agent, summary)
                    after = memory_sync.render(conn, agent, memory_path)[1]
                    summary.entries = len(lineage.live_entries(conn, agent))
                finally:
                    self._dry_conn = None
                    outer.rollback()
            summary.diff = "".join(
                difflib.unified_diff(
                    before.splitlines(keepends=True),
                    after.splitlines(keepends=True),
                    fromfile="MEMORY.md",
                    tofile="MEMORY.md (after)",
                )
            )
            with self.engine.begin() as conn:
                record_calls(conn, agent, self.run_id, self._pending_calls)
        else:
            self._run_batches(agent, summary)
            with self.engine.connect() as conn:
                summary.entries = len(lineage.live_entries(conn, agent))
        summary.duration_s = time.perf_counter() - started
        return summary

    def _select(self, conn: Connection, agent: str) -> list[_Candidate]:
        """Candidates past every gate (`dreaming.gates`), most salient first. SQL narrows
        the rows to those that can pass; the gates say the last word."""
        s = self.settings
        clock = read_clock(conn, agent)
        rows = conn.execute(
            select(CANDIDATES)
            .where(
                and_(
                    CANDIDATES.c.agent == agent,
                    or_(
                        CANDIDATES.c.status == "pending",
                        CANDIDATES.c.evidence_count > CANDIDATES.c.decided_evidence,
                    ),
                    CANDIDATES.c.score >= s.min_score,
                    CANDIDATES.c.score > 0,
                    (CANDIDATES.c.owner_lines + CANDIDATES.c.agent_lines) > 0,
                )
            )
            .order_by(CANDIDATES.c.score.desc(), CANDIDATES.c.id)
        ).mappings()
        out: list[_Candidate] = []
        for r in rows:
            if gates.held_back(r, s, clock) is not None:
                continue
            out.append(
                _Candidate(
                    r["id"],
                    r["key"],
                    r["text"],
                    frozenset(r["tokens"].split()),
                    r["sessions"],
                    r["days"],
                    r["owner_lines"],
                    r["agent_lines"],
                    _aware(r["first_seen"]) if r["first_seen"] is not None else None,
                    _aware(r["last_seen"]) if r["last_seen"] is not None else None,
                    r["features"] or "",
                )
            )
            if len(out) >= s.max_candidates:
                break
        return _by_utterance(conn, out)

    def _run_batches(self, agent: str, summary: DeepSummary) -> None:
        with self._tx() as conn:
            # Signals a crashed light run left stale are made right before anything is chosen.
            if refresh_stale(conn, agent):
                rescore(conn, agent, self.paths.settings)
            review.expire(conn, agent)  # their candidates are chosen again tonight
        with self._reader() as conn:
            selected = self._select(conn, agent)
            live_at_start = len(lineage.live_entries(conn, agent))
        summary.selected = len(selected)
        self._texts = {c.id: c.text for c in selected}
        if not selected:
            return  # a quiet night costs nothing (invariant 10)
        use_llm = self.llm is not None
        client: LLMClient | None = None
        # Rounded up so a small memory can still take one merge; a fraction of 0 forbids all.
        retire_cap = math.ceil(self.settings.max_retire_fraction * live_at_start)
        retired = 0
        all_skip_streak = 0
        fallen_back = 0  # batches the deterministic path decided because the model failed
        size = self.settings.batch_size
        planned = -(-len(selected) // size)
        try:
            for start in range(0, len(selected), size):
                if self.progress is not None and summary.batches:
                    self.progress(Tick("deep", agent, summary.batches, planned, "batches"))
                batch = selected[start : start + size]
                summary.batches += 1
                path = "deterministic"
                decisions: list[lineage.Applied] | None = None
                if use_llm and not summary.ended_on_budget and self._unavailable is None:
                    assert self.llm is not None
                    if client is None:
                        client = self.llm.client_factory()
                    decisions = self._decide_llm(
                        agent, batch, client, self.llm.budget, summary, retire_cap - retired
                    )
                    if decisions is not None:
                        path = "llm"
                if decisions is None:
                    if summary.ended_on_budget and self.settings.on_budget == "wait":
                        summary.deferred["budget"] += len(selected) - start
                        break
                    if self._unavailable is not None and self.settings.on_llm_failure == "wait":
                        summary.deferred["llm_unavailable"] += len(selected) - start
                        break
                    if use_llm and not summary.ended_on_budget:
                        fallen_back += 1
                    decisions = self._decide_deterministic(agent, batch)
                retired += sum(
                    len(d.targets)
                    for d in decisions
                    if d.action in (Action.MERGE, Action.SUPERSEDE)
                )
                if self.settings.apply == "review":
                    decisions = self._stage(agent, decisions, summary)
                self.apply_decisions(agent, decisions, summary)
                summary.paths[path] += len(batch)
                if path == "llm" and all(d.action is Action.SKIP for d in decisions):
                    all_skip_streak += 1
                    if all_skip_streak >= self.settings.runaway_skip_batches:
                        summary.runaway_stop = True
                        break
                else:
                    all_skip_streak = 0
        finally:
            if client is not None:
                client.close()
            self._note_degraded(summary, fallen_back)
        if self.progress is not None:  # the last tick says how many batches there were
            self.progress(Tick("deep", agent, summary.batches, summary.batches, "batches"))

    def _note_degraded(self, summary: DeepSummary, fallen_back: int) -> None:
        """Say why the model did not decide what it should have, if it did not."""
        cause = self._unavailable or self._last_failure
        if fallen_back:
            summary.degraded.append(
                f"{fallen_back} of {summary.batches} batches decided without the model"
                + (f" ({cause})" if cause else "")
            )
        if waiting := summary.deferred.get("llm_unavailable"):
            summary.degraded.append(
                f"{waiting} candidates wait for the model ({cause or 'it is unavailable'})"
            )

    @contextlib.contextmanager
    def _reader(self) -> Iterator[Connection]:
        if self._dry_conn is not None:
            yield self._dry_conn
            return
        with self.engine.connect() as conn:
            yield conn

    # -- the two deciders --------------------------------------------------------------------

    def _related(
        self, conn: Connection, agent: str, batch: Sequence[_Candidate]
    ) -> list[tuple[str, str]]:
        keys: list[str] = []
        for c in batch:
            for key in entry_index.search(conn, agent, c.text, self.settings.entries_per_candidate):
                if key not in keys:
                    keys.append(key)
        texts: dict[str, str] = dict(
            conn.execute(
                select(ENTRIES.c.key, ENTRIES.c.text).where(
                    and_(
                        ENTRIES.c.agent == agent,
                        ENTRIES.c.key.in_(keys),
                        ENTRIES.c.status == "live",
                    )
                )
            ).all()
        )
        return [(k, texts[k]) for k in keys if k in texts]

    def _snippets(self, conn: Connection, candidate_id: int) -> list[str]:
        """Up to three evidence lines, each with who said it and when, so the model can tell
        a person's instruction from the agent's narration of it."""
        rows = conn.execute(
            select(CORPUS_LINES.c.text, CORPUS_LINES.c.role, CORPUS_LINES.c.day)
            .select_from(
                CANDIDATE_EVIDENCE.join(
                    CORPUS_LINES, CORPUS_LINES.c.id == CANDIDATE_EVIDENCE.c.corpus_line_id
                )
            )
            .where(CANDIDATE_EVIDENCE.c.candidate_id == candidate_id)
            .order_by(
                CORPUS_LINES.c.ts.desc().nulls_last(), CORPUS_LINES.c.id.desc()
            )  # as SQLite sorts
            .limit(3)
        ).all()
        return [
            f"{day} {_SPEAKER.get(role, role)}: {claims_mod.clean(text).strip()[:300]}"
            for text, role, day in rows
        ]

    def _decide_llm(
        self,
        agent: str,
        batch: Sequence[_Candidate],
        client: LLMClient,
        budget: Budget,
        summary: DeepSummary,
        retire_room: int,
    ) -> list[lineage.Applied] | None:
        with self._reader() as conn:
            related = self._related(conn, agent, batch)
            prompt_candidates = [
                PromptCandidate(
                    f"c{i}",
                    c.text,
                    c.sessions,
                    c.days,
                    self._snippets(conn, c.id),
                    said_by=c.said_by,
                    date=_day(c.first_seen),
                    last_date=_day(c.last_seen),
                    features=tuple(c.features.split()),
                )
                for i, c in enumerate(batch, 1)
            ]
        # Opaque per-call ids: the model never sees a key, a session or a line reference.
        cand_ids = {f"c{i}": c for i, c in enumerate(batch, 1)}
        entry_ids = {f"e{i}": key for i, (key, _) in enumerate(related, 1)}
        prompt_entries = [PromptEntry(f"e{i}", t) for i, (_, t) in enumerate(related, 1)]
        error: str | None = None
        for _attempt in range(2):  # one re-ask with the problems shown, then the fallback
            system, user = render_prompt(prompt_candidates, prompt_entries, previous_error=error)
            try:
                completion = client.complete_json(
                    system, user, reply_schema(), "memory_decisions", DecisionReply, budget=budget
                )
            except BudgetExceededError as err:
                self._log_calls(agent, calls_of(err), summary)
                summary.ended_on_budget = True
                summary.fallbacks.append(f"budget: {err}")
                return None
            except InvalidReplyError as err:
                # A reply that is not even the schema's shape: re-ask once, like any other
                # reply that does not validate.
                self._log_calls(agent, calls_of(err), summary)
                error = self._last_failure = str(err)
                summary.fallbacks.append(f"invalid: {err}")
                continue
            except (TransientError, EndpointDownError) as err:
                # Retries did not cure it (or an earlier call's failure opened the run's
                # breaker): no more calls this run; the rest go as on_llm_failure says.
                self._log_calls(agent, calls_of(err), summary)
                self._unavailable = str(err)
                summary.fallbacks.append(f"llm: {err}")
                return None
            except LLMError as err:
                self._log_calls(agent, calls_of(err), summary)
                self._last_failure = str(err)
                summary.fallbacks.append(f"llm: {err}")
                return None
            self._log_calls(agent, completion.calls, summary)
            try:
                valid = validate(
                    completion.parsed,
                    list(cand_ids),
                    list(entry_ids),
                    max_chars=self.settings.max_entry_chars,
                    registry=self.registry,
                )
                hollow = [
                    f"{v.candidate}: the entry text is empty once markup is removed"
                    for v in valid
                    if v.action is not Action.SKIP and not self._clean(v.text)
                ]
                if hollow:
                    raise BatchInvalid(hollow)
                retiring = sum(len(v.targets) for v in valid)
                if retiring > max(retire_room, 0):
                    raise BatchInvalid(
                        [
                            f"the batch retires {retiring} entries but at most"
                            f" {max(retire_room, 0)} more may be retired in this run;"
                            " merge or supersede fewer entries"
                        ]
                    )
            except BatchInvalid as err:
                error = self._last_failure = f"decisions that did not validate: {err}"
                summary.fallbacks.append(f"invalid: {err}")
                continue
            return [
                lineage.Applied(
                    candidate_id=cand_ids[v.candidate].id,
                    candidate_key=cand_ids[v.candidate].key,
                    action=v.action,
                    targets=tuple(entry_ids[t] for t in v.targets),
                    # Validated text has no markers or metadata; sanitizing folds it to one
                    # paragraph, as every entry is (invariant 7).
                    text=self._clean(v.text),
                    path="llm",
                    reason=v.reason or None,
                    also=tuple((cand_ids[o].id, cand_ids[o].key) for o in v.also),
                )
                for v in valid
            ]
        return None

    def _clean(self, text: str | None) -> str | None:
        if text is None:
            return None
        return sanitize_entry_text(
            text, max_chars=self.settings.max_entry_chars, registry=self.registry
        )

    def _decide_deterministic(
        self, agent: str, batch: Sequence[_Candidate]
    ) -> list[lineage.Applied]:
        """Add durable candidates, merge near-duplicates into existing entries; never
        supersede (telling a changed fact from a new one needs understanding).

        A near-duplicate is a near-identical bag of words, or one bag holding nearly all of
        the other's (at least three words, inflections folded), said of one person: "My son
        is allergic to peanuts" never folds into "I'm allergic to peanuts", while "Our
        deploys happen on Fridays" is the speaker's own "We deploy on Fridays"
        (`_one_speaker`)."""
        with self._reader() as conn:
            live = lineage.live_entries(conn, agent)
        index = claims_mod.SimilarityIndex(self.sim)
        loose = claims_mod.SimilarityIndex(LOOSE_SIMILARITY)
        bags: list[frozenset[str]] = []
        owned: list[frozenset[str]] = []
        for i, (_, text) in enumerate(live):
            bags.append(_bag(text))
            owned.append(_owned(text))
            index.add(i, claims_mod.content_tokens(text))
            loose.add(i, bags[i])
        out: list[lineage.Applied] = []
        for c, also in _utterances(batch):
            text = sanitize_entry_text(
                _attributed(c, also),
                max_chars=self.settings.max_entry_chars,
                registry=self.registry,
            )
            if not text:
                out.append(
                    lineage.Applied(
                        c.id, c.key, Action.SKIP, (), None, "deterministic", "empty once sanitized"
                    )
                )
                continue
            folded = tuple((o.id, o.key) for o in also)
            bag, mine = _bag(text), _owned(text)
            hit = index.best(c.tokens)
            if hit is not None and _one_speaker(bags[hit], owned[hit], bag, mine) is None:
                hit = None
            if hit is None:
                # Looked up with and without the speaker: "our deploys" may be "we deploy".
                for query in (bag, bag ^ {_SELF}):
                    near = loose.best(query)
                    pair = (
                        None if near is None else _one_speaker(bags[near], owned[near], bag, mine)
                    )
                    if pair is not None and _contains(*pair):
                        hit = near
                        break
            if hit is not None:
                key, old = live[hit]
                # The first statement stands, unless the new one says all it said and adds a
                # detail or two ("... and works as an architect"); more than that is
                # usually the moment's context ("..., so skip the satay tonight").
                extra = bag - bags[hit]
                keep = text if bags[hit] <= bag and 0 < len(extra) <= 2 else old
                out.append(
                    lineage.Applied(
                        c.id,
                        c.key,
                        Action.MERGE,
                        (key,),
                        keep,
                        "deterministic",
                        "near-duplicate of an existing entry",
                        folded,
                    )
                )
                if keep != old:
                    live[hit] = (memory_file.entry_key(keep), keep)
                    bags[hit] = bag
                    owned[hit] = mine
                    index.discard(hit)
                    loose.discard(hit)
                    index.add(hit, claims_mod.content_tokens(keep))
                    loose.add(hit, bag)
                continue
            why = f"salient: {c.features}" if c.features else "passed the gates"
            out.append(
                lineage.Applied(c.id, c.key, Action.ADD, (), text, "deterministic", why, folded)
            )
            index.add(len(live), claims_mod.content_tokens(text))
            loose.add(len(live), bag)
            bags.append(bag)
            owned.append(mine)
            live.append((memory_file.entry_key(text), text))
        return out

    # -- applying -----------------------------------------------------------------------------

    def _stage(
        self, agent: str, decisions: Sequence[lineage.Applied], summary: DeepSummary
    ) -> list[lineage.Applied]:
        """Review mode: stage every decision that would change memory as a proposal, with
        what a person needs to judge it; return the rest (skips) to apply now."""
        now_apply: list[lineage.Applied] = []
        with self._tx() as conn:
            for d in decisions:
                if d.action is Action.SKIP:
                    now_apply.append(d)
                    continue
                detail, sessions = self._proposal_detail(conn, agent, d)
                pid = review.stage(
                    conn,
                    agent,
                    self.run_id,
                    d,
                    detail,
                    sessions,
                    expire_days=self.settings.review_expire_days,
                )
                summary.proposed += 1
                summary.decisions.append(self._decided(d, None) | {"proposal": pid})
        return now_apply

    def _decided(self, d: lineage.Applied, entry: str | None) -> dict[str, Any]:
        """A decision as the run's summary (and so the preview) shows it."""
        return {
            "candidate": d.candidate_key,
            "candidate_text": self._texts.get(d.candidate_id),
            "action": d.action.value,
            "targets": list(d.targets),
            "entry": entry,
            "text": d.text,
            "path": d.path,
            "reason": d.reason,
            "also": [k for _, k in d.also],
        }

    def _proposal_detail(
        self, conn: Connection, agent: str, d: lineage.Applied
    ) -> tuple[dict[str, Any], set[str]]:
        targets: dict[str, str] = dict(
            conn.execute(
                select(ENTRIES.c.key, ENTRIES.c.text).where(
                    and_(ENTRIES.c.agent == agent, ENTRIES.c.key.in_(d.targets))
                )
            ).all()
        )
        sessions: set[str] = set()
        for cid in (d.candidate_id, *(i for i, _ in d.also)):
            sessions |= {o.session_id for o in lineage.candidate_lineage(conn, agent, cid).origins}
        for key in targets:
            sessions |= {o.session_id for o in lineage.entry_lineage(conn, agent, key).origins}
        diff = [f"-{memory_file.render_line(k, t)}" for k, t in targets.items()]
        if d.text is not None:
            diff.append(f"+{memory_file.render_line(memory_file.entry_key(d.text), d.text)}")
        detail = {
            "candidate_text": self._texts.get(d.candidate_id),
            "evidence": self._snippets(conn, d.candidate_id),
            "targets": targets,
            "diff": "\n".join(line.rstrip("\n") for line in diff),
        }
        return detail, sessions

    def apply_decisions(
        self,
        agent: str,
        decisions: Sequence[lineage.Applied],
        summary: DeepSummary,
        also: Callable[[Connection], None] | None = None,
    ) -> None:
        """Apply validated decisions in one transaction (and `also`, a caller's own writes,
        in the same one), then write MEMORY.md. Deep's batches and accepted review proposals
        both come here: there is one way of applying decisions."""
        memory_path = self.paths.memory_file(agent)
        with self._tx() as conn:
            if also is not None:
                also(conn)
            rendered = memory_sync.render(conn, agent, memory_path)[1]
            size = len(rendered)
            groups = {h.group for h in memory_file.parse(rendered).headings}
            bookkeeping = lineage.Bookkeeping.empty()
            for decided in decisions:
                fitted = self._fit(conn, agent, decided, size, groups)
                if fitted is None:
                    # Deterministic policy at the size budget: no new entries; the
                    # candidate stays pending; merges and supersessions still apply.
                    summary.deferred["memory_budget"] += 1
                    continue
                d, size = fitted
                key = lineage.apply(
                    conn, agent, d, self.run_id, prune=False, bookkeeping=bookkeeping
                )
                summary.actions[d.action.value] += 1
                summary.decisions.append(self._decided(d, key))
            bookkeeping.flush(conn)
            lineage.prune_orphans(conn, agent)
            memory_sync.mark_dirty(conn, agent)
            faults.checkpoint("deep.before_commit")
        faults.checkpoint("deep.after_commit")
        if not self.dry_run:
            # One backup per run: the file as it was before this run changed it.
            report = memory_sync.write(
                self.engine, agent, memory_path, self.run_id, backup=not summary.memory_written
            )
            summary.memory_written |= report.written
            for key in report.duplicates_removed:
                if key not in summary.duplicates_removed:
                    summary.duplicates_removed.append(key)

    def _fit(
        self,
        conn: Connection,
        agent: str,
        d: lineage.Applied,
        size: int,
        groups: set[str],
    ) -> tuple[lineage.Applied, int] | None:
        """`d` as it fits MEMORY.md's size budget (`size` characters now, `groups` headed),
        and the size after it; None when it is a new entry that does not fit. A merge whose
        text would grow the file past the budget keeps the entry's text: the lineage still
        grows, the file does not."""
        limit = self.settings.max_memory_chars
        if d.action is Action.MERGE and d.targets:
            old: dict[str, str] = dict(
                conn.execute(
                    select(ENTRIES.c.key, ENTRIES.c.text).where(
                        and_(ENTRIES.c.agent == agent, ENTRIES.c.key.in_(d.targets))
                    )
                ).all()
            )
            if len(old) < len(set(d.targets)):
                # Its target was itself deferred in this batch: this is a new entry now,
                # under the same budget as any other.
                d = replace(d, action=Action.ADD, targets=())
            elif d.text is not None and len(d.targets) == 1:
                before = old[d.targets[0]]
                grow = len(memory_file.one_line(d.text)) - len(memory_file.one_line(before))
                if size + grow > limit:
                    return replace(d, text=before), size
                return d, size + grow
        if d.action is Action.ADD and d.text is not None:
            grow = len(memory_file.render_line(memory_file.entry_key(d.text), d.text))
            group = salience.group_of(d.text)
            if group not in groups:  # its heading comes with it, after a blank line
                grow += len(memory_file.render_heading(group)) + 1
            if size + grow > limit:
                return None
            groups.add(group)
            return d, size + grow
        return d, size

    def _log_calls(self, agent: str, calls: Sequence[CallRecord], summary: DeepSummary) -> None:
        held = self._pending_calls if self.dry_run else None
        totals = log_calls(self.engine, agent, self.run_id, calls, held=held)
        summary.llm_calls += totals.calls
        summary.input_tokens += totals.input_tokens
        summary.output_tokens += totals.output_tokens
        summary.cost_usd += totals.usd


_SPEAKER = {"user": "the user", "assistant": "the agent", "system": "system", "tool": "tool"}
# Scripts whose sentences need no full stop added (a Japanese instruction often has none).
_NO_STOP = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af.!?。！？…)）」』\"']$")


_CJK_END = re.compile(r"[\u3040-\u30ff\u3400-\u9fff。！？」』]$")


def _day(ts: datetime | None) -> str | None:
    return ts.date().isoformat() if ts is not None else None


def _attributed(c: _Candidate, also: Sequence[_Candidate] = ()) -> str:
    """The deterministic path does not rephrase: it keeps the statements (the sentences of one
    utterance together, so each keeps the context its words need), says briefly who made
    them and when ("2026-03-08 — the user: ..."), so an agent reading MEMORY.md never
    mistakes the user's "I" for its own, and "yesterday" keeps its date."""
    speaker = "the user" if c.owner_lines else "the agent"
    parts = []
    for one in sorted((c, *also), key=lambda x: x.id):  # ids follow the order they were said
        body = _INTERJECTION.sub("", claims_mod.clean(one.text).strip()).strip().strip('"“”')
        body = body[:1].upper() + body[1:]
        if body and not _NO_STOP.search(body):
            body += "."
        if body:
            parts.append(body)
    # Sentences of languages written without spaces join without one.
    text = "".join(
        p if i == 0 or _CJK_END.search(parts[i - 1]) else f" {p}" for i, p in enumerate(parts)
    )
    day = _day(c.first_seen)
    return f"{day} — {speaker}: {text}" if day else f"{speaker[0].upper()}{speaker[1:]}: {text}"


# Words that open a sentence without adding to what it says ("Yeah, I painted ..."): every
# character of an entry is paid on every turn, so the deterministic path leaves them out.
_INTERJECTION = re.compile(
    r"^(?:(?:yeah|yes|yep|yup|wow|whoa|oh|ah|aw+|hey|haha+|lol|omg|ok|okay|well|so|sure|"
    r"totally|absolutely|definitely|honestly|actually|anyway|btw|hmm+|um+|uh+)\b[\s,!.…-]*)+",
    re.IGNORECASE,
)


# Bags of words this alike are looked at as possible statements of one fact (then checked by
# containment): low enough to find "My sister Anna lives in Lisbon and works as an architect"
# for "My sister Anna lives in Lisbon".
LOOSE_SIMILARITY = 0.5
_SELF = "\x00self"  # stands for the speaker's "I" in a bag of words
Bag = frozenset[str]


def _body(text: str) -> str:
    """What an entry says: the date and attribution prefix of a deterministic entry is not
    part of it."""
    return text.split(": ", 1)[1] if _PREFIX.match(text) else text


def _bag(text: str) -> frozenset[str]:
    """An entry's content words with their inflections folded (`_lemma`), and whether its
    speaker talks about themselves."""
    body = _body(text)
    tokens = frozenset(_lemma(t) for t in claims_mod.content_tokens(body))
    if _SPEAKER_SUBJECT.search(body):
        tokens |= {_SELF}
    return tokens


def _owned(text: str) -> frozenset[str]:
    """The content words the speaker calls theirs ("our deploys", "my morning runs"): up to
    two words after each "my" or "our", folded as in `_bag`."""
    return frozenset(
        _lemma(t)
        for m in _SPEAKER_POSSESSIVE.finditer(_body(text))
        for t in claims_mod.content_tokens(m[1])
    )


def _lemma(token: str) -> str:
    """A content token (plurals already folded) with its verb endings and final "e" off, so
    deploy/deployed/deploying, move/moved/moves and teach/teaches meet. Only deep's
    near-duplicate test uses it: claim keys keep the plain tokens."""
    for suffix in ("ing", "ed"):
        stem = token[: -len(suffix)]
        if token.endswith(suffix) and len(stem) >= 3 and not token.endswith("eed"):
            token = stem
            # running -> run, stopped -> stop; but call(ed), miss(ed) keep their pair.
            if len(token) >= 4 and token[-1] == token[-2] and token[-1] not in "lsz":
                token = token[:-1]
            break
    return token[:-1] if len(token) >= 4 and token.endswith("e") else token


def _one_speaker(a: Bag, owned_a: Bag, b: Bag, owned_b: Bag) -> tuple[Bag, Bag] | None:
    """The two bags to compare as statements about one person, or None when they are about
    two. Where only one has the speaker as subject ("We deploy ..."), the other is the
    speaker's too if it calls theirs what that one speaks of ("Our deploys happen ..."), and
    someone else's if it calls theirs anything else ("My son is allergic to peanuts and tree
    nuts" is not "I'm allergic to peanuts and tree nuts"); without "my" or "our" it is
    compared as it is (the speaker's "I" a word it lacks)."""
    if (_SELF in a) == (_SELF in b):
        return a, b
    if _SELF in a:
        other = _as_speaker(b, owned_b, a)
        return None if other is None else (a, other)
    other = _as_speaker(a, owned_a, b)
    return None if other is None else (other, b)


def _as_speaker(bag: Bag, owned: Bag, speaker_said: Bag) -> Bag | None:
    if owned & speaker_said:
        return bag | {_SELF}
    return None if owned else bag


# The speaker as the subject ("I'm allergic"), not as an owner ("My son is allergic").
_SPEAKER_SUBJECT = re.compile(
    r"(?<![\w'])(?:i|i'm|im|i've|i'd|i'll|we|we're|we've)(?![\w'])|[僕私俺][はが]|我(?!的)",
    re.IGNORECASE,
)


# The speaker as an owner, with the two words that follow ("our deploys happen").
_SPEAKER_POSSESSIVE = re.compile(r"(?<![\w'])(?:my|our)\s+([\w-]+(?:\s+[\w-]+)?)", re.IGNORECASE)


_PREFIX = re.compile(r"^(?:\d{4}-\d{2}-\d{2} — )?the (?:user|agent): ", re.IGNORECASE)


def _contains(a: frozenset[str], b: frozenset[str]) -> bool:
    """One bag holds the other: wholly for short ones (three or four words, where one word
    can be the whole fact: "called" bluebird vs "runs" Postgres), 80% for longer ones."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if len(small) < 3:
        return False
    if len(small) <= 4:
        return small <= large
    return len(small & large) >= 0.8 * len(small)


def _utterances(batch: Sequence[_Candidate]) -> list[tuple[_Candidate, list[_Candidate]]]:
    """The batch with the sentences of one utterance folded together: the first (highest
    scored) carries the others, so one entry states them and pays its framing once."""
    groups: dict[int, list[_Candidate]] = {}
    for c in batch:
        groups.setdefault(c.first_line or -c.id, []).append(c)
    return [(members[0], members[1:]) for members in groups.values()]


def _by_utterance(conn: Connection, selected: list[_Candidate]) -> list[_Candidate]:
    """Selected candidates with each utterance's sentences next to each other (after the
    best of them), so they land in one batch and can be folded into one entry."""
    if not selected:
        return selected
    first: dict[int, int] = {}
    ids = [c.id for c in selected]
    for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):
        first.update(
            conn.execute(
                select(
                    CANDIDATE_EVIDENCE.c.candidate_id, func.min(CANDIDATE_EVIDENCE.c.corpus_line_id)
                )
                .where(CANDIDATE_EVIDENCE.c.candidate_id.in_(chunk))
                .group_by(CANDIDATE_EVIDENCE.c.candidate_id)
            ).all()
        )
    order: dict[int, list[_Candidate]] = {}
    for c in selected:
        line = first.get(c.id, 0)
        order.setdefault(line or -c.id, []).append(replace(c, first_line=line))
    return [c for members in order.values() for c in members]


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)
