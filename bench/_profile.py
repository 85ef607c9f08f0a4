"""cProfile for the benchmarks (imported as `_profile` from bench/, or run as a program).

Imported: `top_functions` turns a `cProfile.Profile` into the listings deep.py and forget.py
print (function as path:line(name), ncalls, own and cumulative seconds), in the views each
asks for.

Run (`python bench/_profile.py STATE CONFIG WARM AGENT TOP`, by bench/fleet.py --profile):
one agent's night as a worker process runs it (`dreaming.runner._run_agent_in_worker`: App.open,
light, rem, deep, close), first plainly and then under cProfile, each after one unprofiled
agent (WARM) has paid the one-off costs; the profiled night runs on a fresh copy of the state
folder, so the state is as fresh as it was for the plain one. Prints one JSON line last:
wall and CPU seconds, phase seconds, own time by group, and the top TOP functions by own and
by cumulative time.
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# -- listings (deep.py, forget.py) -----------------------------------------------------------

VIEWS = ("cumulative", "cumulative, dreaming/ only", "own time")


def function_rows(profile: cProfile.Profile) -> list[dict[str, Any]]:
    """Every profiled function: its file shortened to dreaming/..., site-packages/... or
    lib/python3..., calls, and own and cumulative seconds (3 decimals)."""
    stats = pstats.Stats(profile)
    rows = []
    for (file, line, name), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        short = file
        for marker in ("/dreaming/", "/site-packages/", "/lib/python3"):
            if marker in file:
                short = file[file.index(marker) + 1 :]
                break
        rows.append(
            {
                "function": f"{short}:{line}({name})",
                "ncalls": ncalls,
                "tottime_s": round(tottime, 3),
                "cumtime_s": round(cumtime, 3),
            }
        )
    return rows


def top_functions(
    profile: cProfile.Profile, limit: int, views: Sequence[str] = VIEWS
) -> list[dict[str, Any]]:
    """The top `limit` functions in each of `views` (names from VIEWS), in that order."""
    rows = function_rows(profile)
    by_cum = sorted(rows, key=lambda r: -r["cumtime_s"])
    listings = {
        "cumulative": by_cum,
        "cumulative, dreaming/ only": [r for r in by_cum if r["function"].startswith("dreaming/")],
        "own time": sorted(rows, key=lambda r: -r["tottime_s"]),
    }
    return [{"view": view, "rows": listings[view][:limit]} for view in views]


# -- one agent's night (bench/fleet.py --profile) --------------------------------------------


class AgentNight:
    """Runs one agent's night as a worker process would, in the state folder `state`."""

    def __init__(self, state: str, config: str) -> None:
        from dreaming.app import App

        app = App.open(Path(state), Path(config))
        self.files = app.discover()
        app.close()
        self.state, self.config = state, config

    def run(self, agent: str) -> Any:
        from dreaming.phases import PHASES
        from dreaming.runner import RunOptions, _run_agent_in_worker

        return _run_agent_in_worker(
            self.state,
            self.config,
            dict(os.environ),
            agent,
            list(PHASES),
            self.files[agent],
            RunOptions(),
        )

    def fresh_copy(self) -> AgentNight:
        """The same night in a second state folder (`<state>-prof`) holding only the
        settings file; the discovered files are kept."""
        state2 = Path(self.state).with_name(Path(self.state).name + "-prof")
        state2.mkdir()
        (state2 / "dreaming.toml").write_bytes((Path(self.state) / "dreaming.toml").read_bytes())
        copy = AgentNight.__new__(AgentNight)
        copy.files, copy.state, copy.config = self.files, str(state2), str(state2 / "dreaming.toml")
        return copy


def _plain(night: AgentNight, agent: str) -> tuple[float, float]:
    """(wall s, CPU s) of the agent's night, unprofiled."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    night.run(agent)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def _profiled(night: AgentNight, agent: str) -> tuple[pstats.Stats, Any, float]:
    """(stats, the night's result, wall s) of the agent's night under cProfile."""
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    result = night.run(agent)
    prof.disable()
    return pstats.Stats(prof), result, time.perf_counter() - t0


def _ranked(stats: pstats.Stats, key: str, top: int) -> list[dict[str, Any]]:
    stats.sort_stats(key)
    out = []
    for func in stats.fcn_list[:top]:  # type: ignore[attr-defined]
        _cc, nc, tt, ct, _ = stats.stats[func]  # type: ignore[attr-defined]
        out.append(
            {
                "function": pstats.func_std_string(func),
                "ncalls": nc,
                "tottime_s": round(tt, 4),
                "cumtime_s": round(ct, 4),
            }
        )
    return out


def _group(func: tuple[str, int, str]) -> str:
    """Where a function's own time goes: the library, SQL, the OS, parsing, ..."""
    name = func[0]
    if "/sqlalchemy/" in name or "/sqlmodel/" in name:
        return "sqlalchemy/sqlmodel (Python)"
    if name == "~" and "sqlite3" in func[2]:
        return "sqlite3 (C: execute, commit, ...)"
    if name == "~" and ("fsync" in func[2] or "posix" in func[2]):
        return "os calls (fsync, open, rename, ...)"
    if "/dreaming/" in name:
        return "dreaming (own code)"
    if "/pydantic" in name:
        return "pydantic"
    if name.endswith(("json/decoder.py", "json/encoder.py", "json/__init__.py")) or (
        name == "~" and "json" in func[2]
    ):
        return "json"
    if name == "~" and ("Pattern" in func[2] or "re." in func[2]):
        return "regular expressions (C)"
    return "other"


def _own_time_by_group(stats: pstats.Stats) -> dict[str, float]:
    groups: dict[str, float] = {}
    for func, (_cc, _nc, tt, _ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        g = _group(func)
        groups[g] = groups.get(g, 0.0) + tt
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]))


def profile_agent_night(state: str, config: str, warm: str, agent: str, top: int) -> dict[str, Any]:
    """One agent's night, plain and then profiled (see the module docstring)."""
    night = AgentNight(state, config)
    night.run(warm)
    plain_wall, plain_cpu = _plain(night, agent)
    night = night.fresh_copy()
    night.run(warm)
    stats, result, prof_wall = _profiled(night, agent)
    by_own = _ranked(stats, "tottime", top)
    groups = _own_time_by_group(stats)
    by_cum = _ranked(stats, "cumulative", top)
    return {
        "agent": agent,
        "plain_wall_s": plain_wall,
        "plain_cpu_s": plain_cpu,
        "profiled_wall_s": prof_wall,
        "phase_s": {str(p): s.to_dict().get("duration_s") for p, s in result.summaries.items()},
        "sessions_read": result.light.sessions_read if result.light else 0,
        "own_time_by_group": groups,
        "by_own_time": by_own,
        "by_cumulative_time": by_cum,
    }


def main(argv: Sequence[str]) -> None:
    state, config, warm, agent, top = argv[:5]
    print(json.dumps(profile_agent_night(state, config, warm, agent, int(top))))


if __name__ == "__main__":
    main(sys.argv[1:])
