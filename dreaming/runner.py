"""Running the pipeline: which phases there are, what a night of one agent comes to, and
the orchestration that runs phases over agents (in this process or in worker processes)
and forgets sessions. `App` is the state handle this works through; the CLI, the
scheduler and the fleet call in here.

The unit of work is one agent's night (`run_agent`): its phases in order, under the
agent's lock, with one run record and one LLM budget. It returns a frozen `AgentResult`
holding the phases' typed summaries; `to_dict()` is its JSON form (run records, `--json`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from dreaming import forget as forgetting
from dreaming.app import App
from dreaming.errors import (
    LockedError,
    NoSuchError,
    SchemaTooNewError,
    StorageError,
    WorkspaceFileError,
)
from dreaming.gc_tuning import fewer_young_collections, pause_for_start_up
from dreaming.ingest import corpus
from dreaming.memory import memory_sync
from dreaming.messages import SessionFile
from dreaming.phases import PHASES, Phase
from dreaming.phases.light import LightPhase, NightReads, light_planner
from dreaming.repair import adopt
from dreaming.results import NOT_RUN as NOT_RUN
from dreaming.results import AgentResult as AgentResult
from dreaming.results import Summary as Summary
from dreaming.results import summary_from_dict as summary_from_dict
from dreaming.runner_forget import forget as forget  # the purge's entry point
from dreaming.runs import (
    Outcome,
    close_abandoned,
    delete_run,
    finish_run,
    run_has_calls,
    start_run,
)
from dreaming.store import state
from dreaming.store.state import StateKey
from dreaming.store.storage import os_fault

if TYPE_CHECKING:
    from dreaming.llm import BudgetSettings
    from dreaming.llm.calls import LLMAccess
    from dreaming.progress import Progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOptions:
    """What one run asks of every agent's night (plain values: they cross to workers)."""

    job: str | None = None
    dry_run: bool = False
    budget: BudgetSettings | None = None
    profile: str | None = None  # the LLM profile; None: the embedded default decides
    reingest: bool = False
    deep: Mapping[str, Any] | None = None  # [deep] overrides (promote's --limit, --min-score)


def run(
    app: App,
    phases: Sequence[str],
    agents: Sequence[str] | None = None,
    *,
    job: str | None = None,
    dry_run: bool = False,
    budget: BudgetSettings | None = None,
    llm: str | None = None,
    progress: Progress | None = None,
    reingest: bool = False,
    workers: int = 1,
    deep: Mapping[str, Any] | None = None,
) -> list[AgentResult]:
    """Run `phases` (in their natural order) for each agent: one lock, one run record.
    `deep` overrides [deep] settings for this run (promote's --limit, --min-score)."""
    ordered = _ordered(phases)
    profile = llm if llm is not None else app.settings.deep.llm
    if profile is not None and profile not in app.settings.llm.profiles:
        raise NoSuchError(f"no LLM profile {profile!r} under [llm.profiles] in the settings")
    if profile is not None and {Phase.REM, Phase.DEEP} & set(ordered):
        app.check_llm(profile)  # a missing key stops the run before any agent's night
    options = RunOptions(job, dry_run, budget, profile, reingest, dict(deep) if deep else None)
    if workers > 1:
        # Each worker finds its agent's transcripts itself, while the others already run:
        # the parent only names the agents, opening no transcript.
        names = app.agents(agents)
        if len(names) > 1:
            return _run_parallel(app, names, ordered, options, workers)
    files = app.discover(agents) if Phase.LIGHT in ordered else {}
    names = app.agents(agents, files if Phase.LIGHT in ordered else None)
    results: list[AgentResult] = []
    busy: list[LockedError] = []
    ahead = _reading_ahead(app, names, files, options) if Phase.LIGHT in ordered else None
    try:
        for agent in names:
            _run_one(app, agent, ordered, options, files, progress, ahead, results, busy)
    finally:
        if ahead is not None:
            ahead.close()
    if busy and len(busy) == len(names):
        raise busy[0]
    return results


def _reading_ahead(
    app: App, names: Sequence[str], files: Mapping[str, Sequence[SessionFile]], options: RunOptions
) -> NightReads | None:
    """Light's reading ahead across this run's agents (`NightReads`): one agent's reading
    child may read the next ones' transcripts. Not in a dry run, which runs no light."""
    if options.dry_run or len(names) < 2:
        return None

    def engine_of(agent: str) -> Engine | None:  # planning makes no database
        return app.engine(agent, create=False) if app.has_state(agent) else None

    plan = light_planner(engine_of, app.paths, app.settings, reingest=options.reingest)
    return NightReads([(agent, files.get(agent, [])) for agent in names], plan)


def _run_one(
    app: App,
    agent: str,
    ordered: Sequence[Phase],
    options: RunOptions,
    files: Mapping[str, Sequence[SessionFile]],
    progress: Progress | None,
    ahead: NightReads | None,
    results: list[AgentResult],
    busy: list[LockedError],
) -> None:
    """One agent's night in a serial run, its outcome appended to `results`."""
    try:
        results.append(
            run_agent(
                app,
                agent,
                ordered,
                options,
                files=files.get(agent, []),
                progress=progress,
                ahead=ahead,
            )
        )
    except LockedError as err:
        # Another run has this agent: the others still get their night.
        busy.append(err)
        results.append(_not_run(agent, err, options))
    except (
        OSError,
        SQLAlchemyError,
        SchemaTooNewError,
        StorageError,
        WorkspaceFileError,
    ) as err:
        # One agent's broken state (a file it cannot open, a corrupt database) is
        # that agent's failed night, reported; the others still get theirs.
        fault = os_fault(err) if isinstance(err, OSError) else None
        log.info("agent %s failed: %s", agent, fault or err)  # the caller reports it
        results.append(_not_run(agent, fault or err, options))
    finally:
        # A fleet night visits thousands of agents: keep no engine (pool, page
        # cache) open past its agent's run, or memory grows with the fleet.
        app.release(agent)


def run_light(
    app: App, agents: Sequence[str] | None = None, progress: Progress | None = None
) -> list[dict[str, Any]]:
    """Light alone over the agents: each agent's light summary as JSON."""
    return [r.phase_dicts()["light"] for r in run(app, [Phase.LIGHT], agents, progress=progress)]


def run_deep(
    app: App,
    agents: Sequence[str] | None = None,
    *,
    dry_run: bool = False,
    budget: BudgetSettings | None = None,
    llm: str | None = None,
) -> list[dict[str, Any]]:
    """Deep alone over the agents: each agent's deep summary as JSON."""
    results = run(app, [Phase.DEEP], agents, dry_run=dry_run, budget=budget, llm=llm)
    return [r.phase_dicts()["deep"] for r in results]


def _ordered(phases: Sequence[str]) -> list[Phase]:
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise NoSuchError(f"unknown phase(s): {', '.join(sorted(unknown))}")
    return [p for p in PHASES if p in phases]


def _run_parallel(
    app: App,
    names: Sequence[str],
    phases: Sequence[Phase],
    options: RunOptions,
    workers: int,
) -> list[AgentResult]:
    """Agents in worker processes: each agent's state is its own SQLite file, so they
    share nothing but the machine. One agent's failure does not stop the others."""
    import multiprocessing  # here, not at the top: a run in this process never pays for them
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")  # no inherited locks or connections
    state = (str(app.paths.state_dir), str(app.config_path) if app.config_path else None)
    results: dict[str, AgentResult] = {}
    # A worker starts up as the command line does: no cycle collection while it imports the
    # library for its first agent (`gc_tuning`; its first night turns collection back on).
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=pause_for_start_up
    ) as pool:
        futures = {
            pool.submit(
                _run_agent_in_worker,
                *state,
                dict(app.env),
                agent,
                list(phases),
                None,
                options,
            ): agent
            for agent in names
        }
        for future in as_completed(futures):
            agent = futures[future]
            try:
                results[agent] = future.result()
            except Exception as err:  # reported per agent; the run goes on
                fault = os_fault(err) if isinstance(err, OSError) else None
                log.info("agent %s failed: %s", agent, fault or err)  # the caller reports it
                results[agent] = _not_run(agent, fault or err, options)
    return [results[a] for a in names]


def _run_agent_in_worker(
    state_dir: str,
    config: str | None,
    env: dict[str, str],
    agent: str,
    phases: list[Phase],
    files: list[SessionFile] | None,
    options: RunOptions,
) -> AgentResult:
    """The unit of work in a worker process: plain, picklable arguments in and out.
    `files`: the agent's transcripts, None: found here."""
    app = App.open(Path(state_dir), Path(config) if config else None, env)
    try:
        if files is None:
            files = app.discover([agent]).get(agent, []) if Phase.LIGHT in phases else []
        return run_agent(app, agent, phases, options, files=files)
    finally:
        app.close()


def _not_run(agent: str, err: Exception, options: RunOptions) -> AgentResult:
    outcome = Outcome.SKIPPED if isinstance(err, LockedError) else Outcome.FAILED
    return AgentResult(agent, outcome, options.job, options.dry_run, error=str(err))


@fewer_young_collections
def run_agent(
    app: App,
    agent: str,
    phases: Sequence[Phase],
    options: RunOptions = RunOptions(),
    *,
    files: Sequence[SessionFile] = (),
    progress: Progress | None = None,
    ahead: NightReads | None = None,
) -> AgentResult:
    """The unit of work: one job's phases for one agent, under the agent's lock.

    A dry run writes nothing at all (no run record either, unless it may call the model)
    and skips light, whose whole job is writing the corpus."""
    night = _Night(app, agent, phases, options, progress, ahead)
    with app.lock(agent, options.job or "+".join(phases)) as held:
        night.open()
        try:
            for phase in phases:
                held.check()  # a fleet run whose lock died stops before the next phase
                night.run_phase(phase, files)
            held.check()  # ...and is not recorded as a clean run
        except BaseException as err:
            if isinstance(err, KeyboardInterrupt):  # Ctrl-C, or SIGTERM in the CLI
                night.settle()
            night.record_failure(err)
            raise
        result = night.close()
    log.info("run %s for %s done: %s", result.run_id, agent, result.outcome)
    return result


class _Night:
    """One agent's run in steps: open the run record, run each phase, close the record."""

    def __init__(
        self,
        app: App,
        agent: str,
        phases: Sequence[Phase],
        options: RunOptions,
        progress: Progress | None,
        ahead: NightReads | None = None,
    ) -> None:
        self.app, self.agent, self.options, self.progress = app, agent, options, progress
        self.ahead = ahead
        self.phases = list(phases)
        self.engine = app.engine(agent)
        self.summaries: dict[Phase, Summary] = {}
        self.degraded: list[str] = []
        self.on_budget = False
        self.run_id: int | None = None
        self.llm: LLMAccess | None = None
        self.adopted: list[str] = []
        self.refused: str | None = None

    @property
    def preview(self) -> bool:
        """A dry run that may call the model gets a run record, so what it spent shows in
        `runs` as in `status`; one that called nothing leaves no trace (see `close`)."""
        return self.options.dry_run and self.options.profile is not None

    def open(self) -> None:
        options, engine, agent = self.options, self.engine, self.agent
        if not options.dry_run:
            forgetting.complete_pending(engine, self.app.paths, agent)  # an interrupted purge first
            if abandoned := close_abandoned(engine, agent):
                log.warning("agent %s: %d run(s) of a dead process abandoned", agent, abandoned)
            # A lost database (deleted, replaced, rolled back) knows none of the managed
            # lines the file shows: adopted first, or this night's write would drop them.
            # Lines of entries the database retired are not adopted (its decision stands).
            adopted = adopt(engine, self.app.paths, agent, dry_run=False, reconcile=False)
            self.adopted = [a["key"] for a in adopted.adopted]
            if self.adopted:
                log.warning(
                    "agent %s: adopted %d managed MEMORY.md line(s) the database had no"
                    " record of (sources unknown)",
                    agent,
                    len(self.adopted),
                )
        if not options.dry_run or self.preview:
            self.run_id = start_run(engine, agent, [str(p) for p in self.phases], options.job)
        # One budget for the whole run: REM's diary and deep's decisions draw on it
        # together, through clients that share the process's circuit breaker (so do the
        # other agents' runs in this process).
        factory = self.app.client_factory(options.profile)
        if factory is not None:
            from dreaming.llm.calls import LLMAccess, run_budget

            budget = options.budget or self.app.settings.budget
            ledger = self.app.ledger()
            self.llm = LLMAccess(factory, run_budget(engine, agent, budget, ledger=ledger))

    def run_phase(self, phase: Phase, files: Sequence[SessionFile]) -> None:
        app, options = self.app, self.options
        if phase in (Phase.REM, Phase.DEEP):
            # One writer per MEMORY.md: where OpenClaw's own dreaming consolidates the
            # agent, REM (DREAMS.md) and deep (MEMORY.md) leave it to that; light still runs.
            refused = app.paths.not_written(self.agent)
            if refused is not None:
                if self.refused is None:
                    log.info("agent %s: %s", self.agent, refused)
                self.refused = refused
                return
        llm_phase: dict[str, Any] = {
            "llm": self.llm,
            "dry_run": options.dry_run,
            "run_id": self.run_id,
        }
        if phase == Phase.LIGHT and not options.dry_run:
            light = LightPhase(
                self.engine,
                app.paths,
                app.registry,
                progress=self.progress,
                reingest=options.reingest,
                ahead=self.ahead,
            )
            self.summaries[phase] = light.run(self.agent, files)
        elif phase == Phase.REM:
            # Imported when REM runs, as deep's phase is below: a light-only run starts
            # without either.
            from dreaming.phases.rem import RemPhase

            rem = RemPhase(self.engine, app.paths, app.registry, **llm_phase).run(self.agent)
            if rem.degraded:
                self.degraded.append(f"rem: {rem.degraded}")
            self.summaries[phase] = rem
        elif phase == Phase.DEEP:
            # Imported when deep runs: a light-only run (the cheap, frequent one) then starts
            # without deep's model client, prompt templates and reply schema.
            from dreaming.phases.deep import DeepPhase

            settings = app.settings.deep.model_copy(update=dict(options.deep or {}))
            deep = DeepPhase(
                self.engine,
                app.paths,
                app.registry,
                settings=settings,
                progress=self.progress,
                **llm_phase,
            ).run(self.agent)
            self.on_budget = self.on_budget or deep.ended_on_budget
            self.degraded += [f"deep: {why}" for why in deep.degraded]
            self.summaries[phase] = deep

    def result(self, outcome: Outcome) -> AgentResult:
        options = self.options
        return AgentResult(
            self.agent,
            outcome,
            options.job,
            options.dry_run,
            self.run_id,
            dict(self.summaries),
            tuple(self.degraded),
            # A fault to alert on outranks a budget kept: the model was wanted and failed.
            reason="; ".join(self.degraded) if self.degraded else None,
            adopted=tuple(self.adopted),
            refused=self.refused,
        )

    def settle(self) -> None:
        """An interrupted night leaves the files in step with what it committed: the corpus
        files hold every committed line and MEMORY.md every committed decision, so `verify`
        passes and the next run goes on from there. An interrupt during this leaves the rest
        to the next run, as a crash would (both are repaired at its start)."""
        if self.options.dry_run:
            return
        app, agent = self.app, self.agent
        try:
            corpus.flush_files(self.engine, agent, app.paths.corpus_dir(agent))
            with self.engine.connect() as conn:
                dirty = state.get(conn, agent, StateKey.MEMORY_DIRTY) == "1"
            if dirty:
                files = memory_sync.Files.of(app.paths, agent)
                memory_sync.write(self.engine, agent, files, self.run_id)
        except KeyboardInterrupt:
            log.warning("agent %s: interrupted again; the next run writes the files", agent)
        except (OSError, SQLAlchemyError, StorageError, WorkspaceFileError) as err:
            log.warning(
                "agent %s: files not brought up to date (the next run does): %s", agent, err
            )

    def record_failure(self, err: BaseException) -> None:
        if self.run_id is None:
            return
        outcome = Outcome.INTERRUPTED if isinstance(err, KeyboardInterrupt) else Outcome.FAILED
        summary = self.result(outcome).to_dict() | {"error": str(err)}
        finish_run(self.engine, self.run_id, outcome, summary)

    def close(self) -> AgentResult:
        outcome = Outcome.BUDGET if self.on_budget else Outcome.OK
        if self.degraded:
            outcome = Outcome.DEGRADED
        if self.options.dry_run:
            outcome = Outcome.PREVIEW
        if (
            self.preview
            and self.run_id is not None
            and not run_has_calls(self.engine, self.agent, self.run_id)
        ):
            delete_run(self.engine, self.run_id)
            self.run_id = None
        result = self.result(outcome)
        if self.run_id is not None:
            finish_run(self.engine, self.run_id, outcome, result.to_dict())
        return result


__all__ = [
    "NOT_RUN",
    "AgentResult",
    "Outcome",
    "RunOptions",
    "forget",
    "run",
    "run_agent",
    "run_deep",
    "run_light",
    "summary_from_dict",
]
