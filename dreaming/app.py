"""The state handle: settings, paths and tag registry for one state folder, its agents,
their databases and locks, and the LLM clients, budget ledger and rate limits a run draws
on. Running phases over agents is `dreaming.runner`'s; the CLI is a thin layer over both."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, exists, select, union

from dreaming.config import Settings, default_state_dir, find_config, load_settings
from dreaming.errors import (
    NoAgentsError,
    NoSuchError,
    StateError,
)
from dreaming.ingest import sources
from dreaming.ingest.tags import TagRegistry, build_registry
from dreaming.llm import CircuitBreaker
from dreaming.messages import SessionFile
from dreaming.openclaw_config import load_openclaw
from dreaming.paths import Paths
from dreaming.store import advisory_lock, agent_lock, open_engine, open_shared_engine
from dreaming.store.engine import HeldLock
from dreaming.store.tables import RUNS, SESSIONS

if TYPE_CHECKING:
    from dreaming.llm import Ledger, LLMClient, RateLimiter


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
    _breaker: CircuitBreaker | None = None

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
        openclaw = load_openclaw(state, settings.openclaw.config, env)
        registry = build_registry(
            env=env,
            config_tags=settings.tags.declarations,
            plugin_dirs=settings.tags.plugin_dirs,
        )
        return cls(Paths(state, settings, openclaw), registry, config_path, env)

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
    def lock(self, agent: str, holder: str, *, wait_s: float = 0) -> Iterator[HeldLock]:
        """The agent's exclusive lock for a run or a purge. Both kinds die with their
        process: flock on this machine, a PostgreSQL advisory lock in a fleet, which holds
        across every machine that shares the database. `wait_s` > 0 waits that long for
        it, ahead of any run that comes meanwhile (`forget --wait`)."""
        if self.fleet:
            with advisory_lock(self.shared_engine(), agent, holder, wait_s=wait_s) as held:
                yield held
        else:
            with agent_lock(self.paths.lock(agent), agent, holder, wait_s=wait_s) as held:
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
        A Claude Code source's pooled agent left from before its projects became agents of
        their own is run only when named.
        Pass `discovered` when the caller has just scanned the transcripts; without it no
        transcript is opened (`sources.agents_with_transcripts`)."""
        found = (
            sources.agents_with_transcripts(self.paths, list(only) if only else None)
            if discovered is None
            else set(discovered)
        )
        if not only:
            # A Claude Code source's pooled agent of an older state is kept, not run: its
            # projects are agents of their own now (`status` says so).
            kept = {a for a in self.known_agents() if not self.paths.pooled_projects(a)}
            names = sorted(set(found) | kept)
            if not names and not self._has_agent_folders():
                raise NoAgentsError(self.nothing_found())
            return names
        missing = [a for a in only if a not in found and not self.has_state(a)]
        if missing:
            known = sorted(set(found) | set(self.known_agents()))
            raise NoSuchError(
                f"unknown agent(s): {', '.join(missing)} (known: {', '.join(known) or 'none'})"
            )
        return list(only)

    def source_warnings(self) -> list[str]:
        """One line per configured transcript source whose path does not exist: a typo
        there reads as a quiet night (`sessions: 0 seen`) unless someone says so."""
        where = f" in {self.config_path}" if self.config_path else ""
        return [
            f"[[sources]] path {src.path} ({src.kind.value}) does not exist: nothing is read"
            f" from it (check the path{where})"
            for src in self.settings.sources
            if not src.path.exists()
        ]

    def check_llm(self, profile_name: str) -> None:
        """Raise LLMConfigError now when `profile_name` cannot be used as configured (its
        key variable is not set), before a run has done half its agents."""
        factory = self.client_factory(profile_name)
        if factory is not None:
            factory().close()

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
        shared = breaker if breaker is not None else self.breaker
        return lambda: LLMClient(profile, env=self.env, rate_limiter=limiter, breaker=shared)

    @property
    def breaker(self) -> CircuitBreaker:
        """The process's circuit breaker: every agent's run here shares it, so a dead
        endpoint costs one agent its retries, not each (see `dreaming.llm._breaker`)."""
        if self._breaker is None:
            from dreaming.llm._breaker import WINDOW_S

            self._breaker = CircuitBreaker(window_s=WINDOW_S)
        return self._breaker

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
        from dreaming.llm import Ledger, utc_today
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
