"""The library's front door: settings, paths and registry for one state folder, and the
phases run over its agents. The CLI is a thin layer over this."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from dreaming import sources
from dreaming.config import (
    BudgetSettings,
    Paths,
    Settings,
    default_state_dir,
    find_config,
    load_settings,
)
from dreaming.errors import StateError
from dreaming.llm import LLMClient
from dreaming.messages import SessionFile
from dreaming.phases.deep import DeepPhase
from dreaming.phases.light import LightPhase, Progress
from dreaming.runs import finish_run, start_run
from dreaming.store import agent_lock, open_engine
from dreaming.tags import TagRegistry, build_registry

log = logging.getLogger(__name__)
PHASES = ("light", "rem", "deep")


@dataclass
class App:
    paths: Paths
    registry: TagRegistry
    config_path: Path | None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    _engines: dict[str, Engine] = field(default_factory=dict)

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

    def engine(self, agent: str, *, create: bool = True) -> Engine:
        if agent not in self._engines:
            self._engines[agent] = open_engine(self.paths.database(agent), create=create)
        return self._engines[agent]

    def close(self) -> None:
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()

    def discover(self) -> dict[str, list[SessionFile]]:
        return sources.discover(self.paths)

    def agents(self, only: Sequence[str] | None = None) -> list[str]:
        """Agents with transcripts or state, or exactly `only` (unknown names are errors)."""
        known = sorted(set(self.discover()) | set(self.paths.known_agents()))
        if not only:
            return known
        missing = [a for a in only if a not in known]
        if missing:
            raise StateError(
                f"unknown agent(s): {', '.join(missing)} (known: {', '.join(known) or 'none'})"
            )
        return list(only)

    def run_light(
        self, agents: Sequence[str] | None = None, progress: Progress | None = None
    ) -> list[dict[str, Any]]:
        files = self.discover()
        results = []
        for agent in self.agents(agents):
            engine = self.engine(agent)
            with agent_lock(self.paths.lock(agent), agent, "light"):
                run_id = start_run(engine, agent, ["light"])
                try:
                    summary = LightPhase(engine, self.paths, self.registry, progress=progress).run(
                        agent, files.get(agent, [])
                    )
                except BaseException:
                    finish_run(engine, run_id, "failed", {})
                    raise
                data = summary.to_dict()
                data["run_id"] = run_id
                finish_run(engine, run_id, "ok", data)
            log.info("light done for %s: %s new corpus lines", agent, summary.corpus_lines)
            results.append(data)
        return results

    def client_factory(self, profile_name: str | None) -> Callable[[], LLMClient] | None:
        if profile_name is None:
            return None
        profile = self.settings.llm.profiles[profile_name]
        return lambda: LLMClient(profile, env=self.env)

    def run_deep(
        self,
        agents: Sequence[str] | None = None,
        *,
        dry_run: bool = False,
        budget: BudgetSettings | None = None,
        llm: str | None = None,
    ) -> list[dict[str, Any]]:
        """Promote candidates for each agent. `llm` overrides the configured profile."""
        profile = llm if llm is not None else self.settings.deep.llm
        if profile is not None and profile not in self.settings.llm.profiles:
            raise StateError(f"no LLM profile {profile!r} under [llm.profiles] in the settings")
        results = []
        for agent in self.agents(agents):
            engine = self.engine(agent)
            with agent_lock(self.paths.lock(agent), agent, "deep"):
                # A dry run leaves no trace: not even a run record.
                run_id = None if dry_run else start_run(engine, agent, ["deep"])
                try:
                    summary = DeepPhase(
                        engine,
                        self.paths,
                        self.registry,
                        client_factory=self.client_factory(profile),
                        budget=budget,
                        dry_run=dry_run,
                        run_id=run_id,
                    ).run(agent)
                except BaseException:
                    if run_id is not None:
                        finish_run(engine, run_id, "failed", {})
                    raise
                data = summary.to_dict()
                data["run_id"] = run_id
                if run_id is not None:
                    outcome = "budget" if summary.ended_on_budget else "ok"
                    finish_run(engine, run_id, outcome, data)
            results.append(data)
        return results
