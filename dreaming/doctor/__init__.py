"""`dreaming doctor`: check an installation and say what to fix.

Each check gives one finding per problem (and one for what is fine): `ok`, `warn` (it works,
but not as the operator probably means: an unbounded LLM spend, a MEMORY.md OpenClaw loads
only part of) or `fail` (something will not work: a settings file that does not load, a
source that is not there, a key variable that is not set, an invariant `verify` finds
broken), with the fix. The checks, in order: the state folder, `dreaming.toml`,
`openclaw.json`, the injected-tag registry, the transcript sources, one writer per MEMORY.md,
the caps (LLM budget, MEMORY.md's size against what OpenClaw loads), the LLM endpoint, and
each agent's `verify`.

Nothing is written, and nothing goes over the network but the endpoint check's one small
request, made only when asked (`llm=True`): the settings are read the way `App.open` reads
them, step by step, so one that fails is reported and the others still run where they can.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dreaming.app import App
from dreaming.config import default_state_dir
from dreaming.doctor._agents import check_caps, check_coexist, check_endpoint_of, check_verify
from dreaming.doctor._findings import Diagnosis, Finding, Level
from dreaming.doctor._install import (
    check_openclaw,
    check_settings,
    check_sources,
    check_state_folder,
    check_tags,
    known_agents,
    openclaw_agents,
)
from dreaming.paths import Paths


def diagnose(
    state_dir: Path | None,
    config: Path | None,
    env: Mapping[str, str],
    *,
    llm: bool = False,
    timeout_s: float | None = None,
) -> Diagnosis:
    """Every check on the installation at `state_dir` (None: DREAMING_STATE_DIR, else
    ~/.openclaw) with the settings `config` names (None: found as every command finds them)."""
    state = (state_dir or default_state_dir(env)).expanduser()
    d = Diagnosis(state)
    check_state_folder(d, state)
    settings, config_path = check_settings(d, state, config, env)
    openclaw = check_openclaw(d, state, settings, env)
    if settings is None:
        return d
    registry = check_tags(d, settings, env)
    paths = Paths(state, settings, openclaw)
    discovered = check_sources(d, paths)
    app = App(paths, registry, config_path, env)
    try:
        agents = sorted(set(discovered) | set(known_agents(d, app)))
        if openclaw is not None:
            check_coexist(d, paths, agents)
        check_caps(d, paths, openclaw_agents(discovered) if openclaw is not None else [])
        check_endpoint_of(d, settings, env, llm=llm, timeout_s=timeout_s)
        if openclaw is not None:
            check_verify(d, app, discovered)
    finally:
        app.close()
    return d


__all__ = ["Diagnosis", "Finding", "Level", "diagnose"]
