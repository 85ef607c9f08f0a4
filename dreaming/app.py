"""The library's front door: settings, paths and registry for one state folder, and the
phases run over its agents. The CLI is a thin layer over this."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, exists, select, union
from sqlalchemy.exc import SQLAlchemyError

from dreaming import sources
from dreaming.config import (
    BudgetSettings,
    Paths,
    Settings,
    default_state_dir,
    find_config,
    load_settings,
)
from dreaming.errors import (
    LockedError,
    NoAgentsError,
    SchemaTooNewError,
    StateError,
    WorkspaceFileError,
)
from dreaming.forget import Purge, Selector, complete_pending
from dreaming.llm import CircuitBreaker
from dreaming.llm.calls import LLMAccess, run_budget
from dreaming.messages import SessionFile
from dreaming.phases.deep import DeepPhase
from dreaming.phases.light import LightPhase
from dreaming.phases.rem import RemPhase
from dreaming.progress import Progress
from dreaming.runs import (
    close_abandoned,
    delete_run,
    finish_run,
    run_has_calls,
    start_run,
)
from dreaming.store import advisory_lock, agent_lock, open_engine, open_shared_engine
from dreaming.store.engine import HeldLock
from dreaming.store.tables import RUNS, SESSIONS
from dreaming.tags import TagRegistry, build_registry

if TYPE_CHECKING:
    from dreaming.llm import Ledger, LLMClient, RateLimiter

log = logging.getLogger(__name__)
PHASES = ("light", "rem", "deep")


@dataclass
class App:
    paths: Paths
    registry: TagRegistry
    config_path: Path | None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    _engines: dict[str, Engine] = field(default_factory=dict)
    _shared: Engine | None = None
    pool_size: int = 5  # the fleet engine's; a worker with --concurrency N asks for more
    _limits: Engine | None = None

    @classmethod
    def open(
        cls,
        state_dir: Path | None = None,
        config: Path | None = None,
        env: Mapping[str, str] = os.environ,
    ) -> App:
        state = (state_dir or default_state_dir(env)).expanduser()
        config_path = find_config(config, state, env)
        settings = load_settings(config_path)
        registry = build_registry(
            env=env,
            config_tags=settings.tags.declarations,
            plugin_dirs=settings.tags.plugin_dirs,
        )
        return cls(Paths(state, settings), registry, config_path, env)

    @property
    def settings(self) -> Settings:
        return self.paths.settings

    @property
    def fleet(self) -> bool:
        """State in one shared PostgreSQL database (database_url) rather than per-agent files."""
        return self.settings.database_url is not None

    def shared_engine(self) -> Engine:
        """The fleet database; opened (and migrated) once per process."""
        url = self.settings.database_url
        if url is None:
            raise StateError("no database_url in the settings: this is not a fleet install")
        if self._shared is None:
            self._shared = open_shared_engine(url, pool_size=self.pool_size)
        return self._shared

    def engine(self, agent: str, *, create: bool = True) -> Engine:
        if self.fleet:
            return self.shared_engine()
        if agent not in self._engines:
            if create:
                self.paths.remember_name(agent)
            self._engines[agent] = open_engine(self.paths.database(agent), create=create)
        return self._engines[agent]

    def has_state(self, agent: str) -> bool:
        """Whether `agent` has been run before (has a database, or rows in the fleet's)."""
        if not self.fleet:
            return self.paths.database(agent).exists()
        # Two index probes, not a scan: a fleet database holds every agent's rows.
        query = select(
            exists().where(SESSIONS.c.agent == agent) | exists().where(RUNS.c.agent == agent)
        )
        with self.shared_engine().connect() as conn:
            return bool(conn.execute(query).scalar())

    def agents_with_state(self, only: Sequence[str] | None = None) -> list[str]:
        """Agents that have been run (for status, runs, entries, verify): `only` checked
        one by one, else every agent with state, found in one query."""
        if only:
            return [a for a in self.agents(only) if self.has_state(a)]
        return self.known_agents()

    def known_agents(self) -> list[str]:
        if not self.fleet:
            return self.paths.known_agents()
        query = union(select(SESSIONS.c.agent).distinct(), select(RUNS.c.agent).distinct())
        with self.shared_engine().connect() as conn:
            return sorted(r[0] for r in conn.execute(query))

    @contextlib.contextmanager
    def lock(self, agent: str, holder: str) -> Iterator[HeldLock]:
        """The agent's exclusive lock for a run or a purge. Both kinds die with their
        process: flock on this machine, a PostgreSQL advisory lock in a fleet, which holds
        across every machine that shares the database."""
        if self.fleet:
            with advisory_lock(self.shared_engine(), agent, holder) as held:
                yield held
        else:
            with agent_lock(self.paths.lock(agent), agent, holder) as held:
                yield held

    def release(self, agent: str) -> None:
        engine = self._engines.pop(agent, None)
        if engine is not None:
            engine.dispose()

    def close(self) -> None:
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()
        for shared in (self._shared, self._limits):
            if shared is not None:
                shared.dispose()
        self._shared = self._limits = None

    def discover(self, agents: Sequence[str] | None = None) -> dict[str, list[SessionFile]]:
        """Transcripts per agent; only those of `agents` when given (a fleet's worker runs
        one agent and must not open every agent's files to find its own)."""
        return sources.discover(self.paths, list(agents) if agents else None)

    def agents(
        self,
        only: Sequence[str] | None = None,
        discovered: Mapping[str, Sequence[SessionFile]] | None = None,
    ) -> list[str]:
        """Agents with transcripts or state, or exactly `only` (unknown names are errors).
        Pass `discovered` when the caller has just scanned the transcripts: a fleet's
        discovery opens every file."""
        found = self.discover(only) if discovered is None else discovered
        if not only:
            names = sorted(set(found) | set(self.known_agents()))
            if not names and not self._has_agent_folders():
                raise NoAgentsError(self.nothing_found())
            return names
        missing = [a for a in only if a not in found and not self.has_state(a)]
        if missing:
            known = sorted(set(found) | set(self.known_agents()))
            raise StateError(
                f"unknown agent(s): {', '.join(missing)} (known: {', '.join(known) or 'none'})"
            )
        return list(only)

    def _has_agent_folders(self) -> bool:
        """An OpenClaw root with agent folders but no transcripts yet is a real install."""
        folder = self.paths.state_dir / "agents"
        return (
            self.settings.read_state_dir
            and folder.is_dir()
            and any(p.is_dir() for p in folder.iterdir())
        )

    def nothing_found(self) -> str:
        """What was looked for, for the error a state folder with no agents gets."""
        state = self.paths.state_dir
        places = []
        if self.settings.read_state_dir:
            places.append(f"OpenClaw transcripts in {state / 'agents'}/<agent>/sessions/")
        places += [f"{s.kind.value} transcripts in {s.path}" for s in self.settings.sources]
        places.append(
            "dreaming's state in the fleet database"
            if self.fleet
            else f"dreaming's state in {self.paths.home / 'agents'}"
        )
        return (
            f"no agents found under {state}: looked for "
            + "; ".join(places)
            + " (is --state-dir or DREAMING_STATE_DIR right?)"
        )

    def run_light(
        self, agents: Sequence[str] | None = None, progress: Progress | None = None
    ) -> list[dict[str, Any]]:
        return [r["phases"]["light"] for r in self.run(["light"], agents, progress=progress)]

    def run_deep(
        self,
        agents: Sequence[str] | None = None,
        *,
        dry_run: bool = False,
        budget: BudgetSettings | None = None,
        llm: str | None = None,
    ) -> list[dict[str, Any]]:
        return [
            r["phases"]["deep"]
            for r in self.run(["deep"], agents, dry_run=dry_run, budget=budget, llm=llm)
        ]

    def client_factory(
        self, profile_name: str | None, breaker: CircuitBreaker | None = None
    ) -> Callable[[], LLMClient] | None:
        """Clients for one run; those sharing `breaker` stop calling an endpoint whose
        failure retries did not cure."""
        if profile_name is None:
            return None
        from dreaming.llm import LLMClient  # the HTTP stack loads only when a run needs it

        profile = self.settings.llm.profiles[profile_name]
        limiter = self.rate_limiter(profile_name)
        return lambda: LLMClient(profile, env=self.env, rate_limiter=limiter, breaker=breaker)

    def limits_engine(self) -> Engine:
        """Where limits shared by every agent live: the fleet database, or on one machine
        a small SQLite file beside the agents' (shared by `run --workers N` processes)."""
        if self.fleet:
            return self.shared_engine()
        if self._limits is None:
            self._limits = open_engine(self.paths.home / "limits.sqlite")
        return self._limits

    def ledger(self) -> Ledger | None:
        """The fleet-wide daily budget ([fleet] daily_max_*), or None when none is set."""
        fleet = self.settings.fleet
        caps = (fleet.daily_max_usd, fleet.daily_max_tokens, fleet.daily_max_calls)
        if all(c is None for c in caps):
            return None
        from dreaming.llm import Ledger
        from dreaming.llm.calls import utc_today
        from dreaming.llm.ledger import server_clock

        engine = self.limits_engine()
        clock = server_clock(engine)

        def server_today() -> str:  # the day turns at one instant for every host
            return datetime.fromtimestamp(clock(), UTC).date().isoformat()

        return Ledger(
            engine,
            max_usd=fleet.daily_max_usd,
            max_tokens=fleet.daily_max_tokens,
            max_calls=fleet.daily_max_calls,
            today=server_today if self.fleet else utc_today,
        )

    def rate_limiter(self, profile_name: str) -> RateLimiter | None:
        """The profile's requests_per_minute, counted across every process that shares
        the limits database."""
        profile = self.settings.llm.profiles[profile_name]
        if profile.requests_per_minute is None:
            return None
        from dreaming.llm import RateLimiter
        from dreaming.llm.ledger import server_clock

        engine = self.limits_engine()
        clock = server_clock(engine) if self.fleet else time.time  # one minute for all hosts
        return RateLimiter(engine, profile_name, profile.requests_per_minute, clock=clock)

    def run(
        self,
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
    ) -> list[dict[str, Any]]:
        """Run `phases` (in their natural order) for each agent: one lock, one run record.
        `deep` overrides [deep] settings for this run (promote's --limit, --min-score)."""
        ordered = [p for p in PHASES if p in phases]
        unknown = set(phases) - set(PHASES)
        if unknown:
            raise StateError(f"unknown phase(s): {', '.join(sorted(unknown))}")
        profile = llm if llm is not None else self.settings.deep.llm
        if profile is not None and profile not in self.settings.llm.profiles:
            raise StateError(f"no LLM profile {profile!r} under [llm.profiles] in the settings")
        files = self.discover(agents) if "light" in ordered else {}
        names = self.agents(agents, files if "light" in ordered else None)
        options: dict[str, Any] = {
            "job": job,
            "dry_run": dry_run,
            "budget": budget,
            "profile": profile,
            "reingest": reingest,
            "deep": dict(deep) if deep else None,
        }
        if workers > 1 and len(names) > 1:
            return self._run_parallel(names, ordered, files, options, workers)
        results: list[dict[str, Any]] = []
        busy: list[LockedError] = []
        for agent in names:
            try:
                results.append(
                    self.run_agent(
                        agent, ordered, files=files.get(agent, []), progress=progress, **options
                    )
                )
            except LockedError as err:
                # Another run has this agent: the others still get their night.
                busy.append(err)
                results.append(_skipped(agent, err, options))
            except (OSError, SQLAlchemyError, SchemaTooNewError, WorkspaceFileError) as err:
                # One agent's broken state (a file it cannot open, a corrupt database) is
                # that agent's failed night, reported; the others still get theirs.
                log.error("agent %s failed: %s", agent, err)
                results.append(_skipped(agent, err, options))
            finally:
                # A fleet night visits thousands of agents: keep no engine (pool, page
                # cache) open past its agent's run, or memory grows with the fleet.
                self.release(agent)
        if busy and len(busy) == len(names):
            raise busy[0]
        return results

    def _run_parallel(
        self,
        names: Sequence[str],
        phases: Sequence[str],
        files: Mapping[str, Sequence[SessionFile]],
        options: dict[str, Any],
        workers: int,
    ) -> list[dict[str, Any]]:
        """Agents in worker processes: each agent's state is its own SQLite file, so they
        share nothing but the machine. One agent's failure does not stop the others."""
        context = multiprocessing.get_context("spawn")  # no inherited locks or connections
        state = (str(self.paths.state_dir), str(self.config_path) if self.config_path else None)
        results: dict[str, dict[str, Any]] = {}
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {
                pool.submit(
                    _run_agent_in_worker,
                    *state,
                    dict(self.env),
                    agent,
                    list(phases),
                    list(files.get(agent, [])),
                    options,
                ): agent
                for agent in names
            }
            for future in as_completed(futures):
                agent = futures[future]
                try:
                    results[agent] = future.result()
                except Exception as err:  # reported per agent; the run goes on
                    log.error("agent %s failed: %s", agent, err)
                    results[agent] = _skipped(agent, err, options)
        return [results[a] for a in names]

    def run_agent(
        self,
        agent: str,
        phases: Sequence[str],
        *,
        files: Sequence[SessionFile] = (),
        job: str | None = None,
        dry_run: bool = False,
        budget: BudgetSettings | None = None,
        profile: str | None = None,
        progress: Progress | None = None,
        reingest: bool = False,
        deep: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The unit of work: one job's phases for one agent, under the agent's lock.

        A dry run writes nothing at all (no run record either) and skips light, whose whole
        job is writing the corpus."""
        engine = self.engine(agent)
        result: dict[str, Any] = {"agent": agent, "job": job, "phases": {}, "dry_run": dry_run}
        with self.lock(agent, job or "+".join(phases)) as held:
            if not dry_run:
                complete_pending(engine, self.paths, agent)  # an interrupted purge first
                if abandoned := close_abandoned(engine, agent):
                    log.warning("agent %s: %d run(s) of a dead process abandoned", agent, abandoned)
            # A preview that may call the model gets a run record, so what it spent shows
            # in `runs` as in `status`; one that called nothing leaves no trace.
            preview = dry_run and profile is not None
            run_id = start_run(engine, agent, list(phases), job) if not dry_run or preview else None
            result["run_id"] = run_id
            outcome = "ok"
            degraded: list[str] = []  # where a fallback decided what the model should have
            # One budget for the whole run: REM's diary and deep's decisions draw on it
            # together, through clients that share one circuit breaker.
            factory = self.client_factory(profile, CircuitBreaker())
            llm = (
                LLMAccess(
                    factory,
                    run_budget(engine, agent, budget or self.settings.budget, ledger=self.ledger()),
                )
                if factory is not None
                else None
            )
            llm_phase: dict[str, Any] = {"llm": llm, "dry_run": dry_run, "run_id": run_id}
            try:
                for phase in phases:
                    held.check()  # a fleet run whose lock died stops before the next phase
                    if phase == "light" and not dry_run:
                        light = LightPhase(
                            engine, self.paths, self.registry, progress=progress, reingest=reingest
                        )
                        result["phases"]["light"] = light.run(agent, files).to_dict()
                    elif phase == "rem":
                        rem = RemPhase(engine, self.paths, self.registry, **llm_phase)
                        rem_summary = rem.run(agent)
                        if rem_summary.degraded:
                            degraded.append(f"rem: {rem_summary.degraded}")
                        result["phases"]["rem"] = rem_summary.to_dict()
                    elif phase == "deep":
                        settings = self.settings.deep.model_copy(update=dict(deep or {}))
                        deep_phase = DeepPhase(
                            engine,
                            self.paths,
                            self.registry,
                            settings=settings,
                            progress=progress,
                            **llm_phase,
                        )
                        summary = deep_phase.run(agent)
                        if summary.ended_on_budget:
                            outcome = "budget"
                        degraded += [f"deep: {why}" for why in summary.degraded]
                        result["phases"]["deep"] = summary.to_dict()
                held.check()  # ...and is not recorded as a clean run
            except BaseException as err:
                if run_id is not None:
                    kind = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
                    finish_run(engine, run_id, kind, result | {"error": str(err)})
                raise
            for data in result["phases"].values():
                data["run_id"] = run_id
            if degraded:
                # A fault to alert on outranks a budget kept: the model was wanted and failed.
                outcome = "degraded"
                result["reason"] = "; ".join(degraded)
            result["degraded"] = degraded
            if dry_run:
                outcome = "preview"
            result["outcome"] = outcome
            if preview and run_id is not None and not run_has_calls(engine, agent, run_id):
                delete_run(engine, run_id)
                run_id = result["run_id"] = None
                for data in result["phases"].values():
                    data["run_id"] = None
            if run_id is not None:
                finish_run(engine, run_id, outcome, result)
        log.info("run %s for %s done: %s", run_id, agent, outcome)
        return result

    def forget(
        self, agent: str, selector: Selector, *, dry_run: bool, pre_tombstone: bool = False
    ) -> dict[str, Any]:
        """Purge everything derived from the selected sessions of `agent` (see forget.py).

        A dry run writes nothing at all: no tombstone, no lock file, no database. A session
        id nothing knows is an error (a typo would otherwise tombstone nothing and leave the
        real session), unless `pre_tombstone` says forgetting it before it appears is meant."""
        files = sources.discover(self.paths, [agent]).get(agent, [])
        has_state = self.has_state(agent)
        if not files and not has_state:
            self.agents([agent])  # unknown agent: a clean error naming the known ones
        engine = self.engine(agent, create=False) if has_state else None
        if not pre_tombstone and selector.sessions:
            probe = Purge(engine, self.paths, agent).run(selector, files, dry_run=True)
            unknown = [t.session_id for t in probe.targets if not t.resolved]
            if unknown:
                raise StateError(
                    f"agent {agent} has no session {', '.join(map(repr, unknown))}"
                    " (nothing forgotten; see `dreaming status` for its sessions, or pass"
                    " --pre-tombstone to keep such a session out before it ever appears)"
                )
        if dry_run:
            return Purge(engine, self.paths, agent).run(selector, files, dry_run=True).to_dict()
        engine = self.engine(agent)
        with self.lock(agent, "forget"):
            return Purge(engine, self.paths, agent).run(selector, files, dry_run=False).to_dict()


def _run_agent_in_worker(
    state_dir: str,
    config: str | None,
    env: dict[str, str],
    agent: str,
    phases: list[str],
    files: list[SessionFile],
    options: dict[str, Any],
) -> dict[str, Any]:
    """The unit of work in a worker process: plain, picklable arguments in and out."""
    app = App.open(Path(state_dir), Path(config) if config else None, env)
    try:
        return app.run_agent(agent, phases, files=files, **options)
    finally:
        app.close()


def _skipped(agent: str, err: Exception, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "agent": agent,
        "phases": {},
        "run_id": None,
        "outcome": "skipped" if isinstance(err, LockedError) else "failed",
        "error": str(err),
        "dry_run": options["dry_run"],
        "job": options["job"],
    }
