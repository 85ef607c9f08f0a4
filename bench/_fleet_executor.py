"""The fleet bench's in-process executor and the child processes every executor shares
(imported as `_fleet_executor` from bench/).

Owns: the `dreaming` command the children run and their environment (with --pin, a library
snapshot on PYTHONPATH), fresh state folders over the shared fleet, the process-tree
samplers (RSS, busy CPU), one `dreaming run --workers N --json` night watched every 100 ms,
what a night did (summed from its JSON), `dreaming verify` spot checks, the rates a row
reports, the pilot, and the cProfile child (bench/_profile.py). The Procrastinate executor
is _fleet_procrastinate.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from _common import REPO, log
from _fleet_plan import Fleet, spread

POLL_S = 0.1
MB = 1e6
PILOT_AGENTS = 16
PROFILER = Path(__file__).resolve().with_name("_profile.py")


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("dreaming")
    if exe.is_file():
        return [str(exe)]
    return [sys.executable, "-c", "from dreaming.cli import main; main()"]


_PINNED: list[Path] = []  # set by --pin: the library snapshot the children import


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMING_")}
    if _PINNED:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_PINNED[0]), *filter(None, [env.get("PYTHONPATH")])]
        )
    return env


def pin_library(rev: str, work: Path) -> dict[str, Any]:
    """Extract `dreaming`, `prompts` and `jobs` at git revision `rev` of this checkout into
    `work` and make every child import that snapshot (PYTHONPATH), so other people's edits to
    the working tree during a long run do not change what is measured."""
    repo = REPO
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", rev], capture_output=True, text=True
    )
    if head.returncode != 0:
        raise SystemExit(f"--pin: not a revision of {repo}: {rev!r}")
    commit = head.stdout.strip()
    dest = work / f"lib-{commit}"
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", commit, "dreaming", "prompts", "jobs"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    _PINNED[:] = [dest]
    return {"rev": rev, "commit": commit, "path": str(dest)}


def fresh_state(work: Path, name: str, data: Path, head: str = "") -> Path:
    """A state folder holding only a dreaming.toml that reads the shared fleet folder
    (`head`: more top-level settings, such as database_url)."""
    state = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    # A JSON string is a valid TOML basic string (same escapes for what a path can hold).
    (state / "dreaming.toml").write_text(
        head + "read_state_dir = false\n\n"
        "[[sources]]\n"
        'kind = "openclaw"\n'
        f"path = {json.dumps(str(data.resolve()))}\n",
        encoding="utf-8",
    )
    return state


def _tree_rss(proc: psutil.Process) -> tuple[int, int, int]:
    """(summed RSS, process count, largest single RSS) of `proc` and its descendants."""
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        procs = [proc]
    total = largest = count = 0
    for p in procs:
        try:
            rss = p.memory_info().rss
        except psutil.Error:
            continue
        total += rss
        largest = max(largest, rss)
        count += 1
    return total, count, largest


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (all cores, everything not idle)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def run_night(state: Path, workers: int, agents: list[str] | None) -> dict[str, Any]:
    """`dreaming --state-dir S run --workers N --json` in a subprocess, watched every 100 ms."""
    base = [*_cli(), "--state-dir", str(state), "run", "--workers", str(workers), "--json"]
    cmd = list(base)
    for agent in agents or ():
        cmd += ["--agent", agent]
    out_path, err_path = state / "run.json", state / "run.stderr"
    peak = peak_procs = peak_single = samples = 0
    timeline: list[tuple[float, int]] = []
    busy0 = _busy_cpu_s()
    started = time.perf_counter()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=_child_env(), cwd=state)
        watched = psutil.Process(proc.pid)
        while True:
            total, count, largest = _tree_rss(watched)
            samples += 1
            timeline.append((time.perf_counter() - started, total))
            peak, peak_procs = max(peak, total), max(peak_procs, count)
            peak_single = max(peak_single, largest)
            try:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            except ChildProcessError:  # pragma: no cover - only if someone else reaped it
                raise SystemExit("lost track of the run process") from None
            if pid:
                break
            time.sleep(POLL_S)
    wall = time.perf_counter() - started
    busy = _busy_cpu_s() - busy0
    proc.returncode = os.waitstatus_to_exitcode(status)
    # wait4's rusage covers the CLI process and every worker it waited for.
    tree_cpu = usage.ru_utime + usage.ru_stime
    result: dict[str, Any] = {
        "command": " ".join(base) + (f" --agent ... ({len(agents)} agents)" if agents else ""),
        "exit_status": proc.returncode,
        "wall_s": wall,
        "peak_rss_bytes": peak,
        "peak_processes": peak_procs,
        "peak_single_rss_bytes": peak_single,
        "rss_samples": samples,
        # The tree's RSS (the highest sample) in each quarter of the run: flat or growing.
        "rss_by_quarter_bytes": [
            max((b for t, b in timeline if q * wall / 4 <= t <= (q + 1) * wall / 4), default=0)
            for q in range(4)
        ],
        "cpu_s": tree_cpu,
        "others_cores": max(0.0, busy - tree_cpu) / wall if wall else 0.0,
        "max_rss_kb_rusage": usage.ru_maxrss,
    }
    try:
        doc = json.loads(out_path.read_bytes())
    except ValueError:
        tail = err_path.read_text(errors="replace")[-2000:]
        raise SystemExit(f"run with {workers} workers printed no JSON:\n{tail}") from None
    result.update(summarize(doc))
    if proc.returncode != 0:
        result["stderr_tail"] = err_path.read_text(errors="replace")[-2000:]
    return result


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    """What the night did, summed over agents, from the `run --json` document."""
    runs = doc.get("runs", [])
    outcomes: dict[str, int] = {}
    for r in runs:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    sums = {
        "sessions_read": 0,
        "messages": 0,
        "corpus_lines": 0,
        "bytes_read": 0,
        "candidates_new": 0,
        "deep_selected": 0,
        "entries_added": 0,
        "diaries_written": 0,
        "memory_files_written": 0,
    }
    actions: dict[str, int] = {}
    phase_s: dict[str, float] = {}
    for phases in doc.get("agents", {}).values():
        light = phases.get("light", {})
        sums["sessions_read"] += light.get("sessions", {}).get("read", 0)
        sums["messages"] += light.get("messages", 0)
        sums["corpus_lines"] += light.get("corpus_lines", 0)
        sums["bytes_read"] += light.get("bytes_read", 0)
        sums["candidates_new"] += light.get("candidates", {}).get("new", 0)
        rem = phases.get("rem", {})
        sums["diaries_written"] += int(bool(rem.get("diary_written")))
        deep = phases.get("deep", {})
        sums["deep_selected"] += deep.get("selected", 0)
        for action, n in deep.get("actions", {}).items():
            actions[action] = actions.get(action, 0) + n
        sums["memory_files_written"] += int(bool(deep.get("memory", {}).get("written")))
        for name, data in phases.items():
            if isinstance(data.get("duration_s"), int | float):
                phase_s[name] = phase_s.get(name, 0.0) + data["duration_s"]
    sums["entries_added"] = actions.get("add", 0)
    failed = [r for r in runs if r["outcome"] != "ok"]
    return {
        "agents_run": len(runs),
        "outcomes": outcomes,
        "all_ok": bool(runs) and not failed,
        "failures": [{k: r.get(k) for k in ("agent", "outcome", "error")} for r in failed[:10]],
        **sums,
        "deep_actions": dict(sorted(actions.items())),
        "phase_s_sum": {k: round(v, 3) for k, v in phase_s.items()},
    }


def verify_agents(state: Path, agents: list[str]) -> dict[str, Any]:
    """`dreaming verify --agent ...` on a few agents: exit status 0 and no violations."""
    cmd = [*_cli(), "--state-dir", str(state), "verify", "--json"]
    for agent in agents:
        cmd += ["--agent", agent]
    proc = subprocess.run(cmd, capture_output=True, env=_child_env(), cwd=state, check=False)
    try:
        doc = json.loads(proc.stdout)
        verdicts = {v["agent"]: v["ok"] for v in doc.get("agents", [])}
    except ValueError:
        verdicts = {}
    return {
        "agents": agents,
        "exit_status": proc.returncode,
        "verdicts": verdicts,
        "ok": proc.returncode == 0 and len(verdicts) == len(agents) and all(verdicts.values()),
        **({"stderr": proc.stderr.decode(errors="replace")[-1000:]} if proc.returncode else {}),
    }


def _rates(
    r: dict[str, Any],
    fleet: Fleet,
    chosen: list[str],
    wall: float,
    executor: str,
    workers: int,
    every: int,
) -> dict[str, Any]:
    """What one measurement reports per second and per minute, either executor."""
    lines = sum(fleet.agent_lines[a] for a in chosen)
    return {
        "executor": executor,
        "workers": workers,
        "sample_every": every,
        "agents": len(chosen),
        "sessions": len(chosen) * fleet.spec.sessions,
        "input_bytes": sum(fleet.agent_bytes[a] for a in chosen),
        "input_lines": lines,
        "agents_per_min": len(chosen) / wall * 60,
        "sessions_per_s": r["sessions_read"] / wall,
        "corpus_lines_per_s": r["corpus_lines"] / wall,
        "input_lines_per_s": lines / wall,
        "mb_per_s": r["bytes_read"] / MB / wall,
        "cpu_utilization": r["cpu_s"] / wall,
    }


def measure(
    fleet: Fleet, work: Path, workers: int, every: int, verify_k: int, keep: bool
) -> dict[str, Any]:
    """One full night with `workers` workers over the fleet (or every `every`-th agent)."""
    all_agents = fleet.spec.agent_ids()
    chosen = all_agents[::every]
    state = fresh_state(work, f"state-w{workers}", fleet.root)
    label = f"{len(chosen)} agents" + (f" (every {every}th: a sample)" if every > 1 else "")
    log(f"measuring: in-process, {workers} worker(s), {label} ...")
    try:
        r = run_night(state, workers, chosen if every > 1 else None)
        r["verify"] = verify_agents(state, spread(chosen, verify_k))
    finally:
        if not keep:
            shutil.rmtree(state, ignore_errors=True)
    wall = r["wall_s"]
    r.update(_rates(r, fleet, chosen, wall, "in-process", workers, every))
    r.update(
        {
            "state_dir": str(state) if keep else None,
            "ok": r["exit_status"] == 0
            and r["all_ok"]
            and r["agents_run"] == len(chosen)
            and r["sessions_read"] == len(chosen) * fleet.spec.sessions
            and r["verify"]["ok"],
        }
    )
    log(
        f"  {wall:.1f} s, {r['agents_per_min']:.0f} agents/min, "
        f"peak RSS {r['peak_rss_bytes'] / MB:.0f} MB, {'ok' if r['ok'] else 'NOT OK'}"
    )
    return r


def library_info(work: Path) -> dict[str, Any]:
    """Which `dreaming` the children import, and its git commit when it is a checkout."""
    proc = subprocess.run(
        [sys.executable, "-c", "import dreaming; print(dreaming.__file__)"],
        capture_output=True,
        env=_child_env(),
        cwd=work,
        check=False,
        text=True,
    )
    folder = Path(proc.stdout.strip()).parent if proc.returncode == 0 else None
    info: dict[str, Any] = {"path": str(folder) if folder else None, "commit": None}
    if folder is not None:
        git = ["git", "-C", str(folder.parent)]
        head = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        if head.returncode == 0:
            dirty = subprocess.run(
                [*git, "status", "--porcelain", "--", str(folder)], capture_output=True, text=True
            )
            info["commit"] = head.stdout.strip()
            info["uncommitted_changes"] = bool(dirty.stdout.strip())
    return info


def pilot(fleet: Fleet, work: Path) -> dict[str, Any]:
    """1 worker over two spread-out samples of agents (a few, then more), for planning only:
    the difference gives seconds per agent, the rest is the run's fixed cost (start-up and
    discovering every transcript of the fleet, which does not shrink with the sample)."""
    sizes = (PILOT_AGENTS // 4, PILOT_AGENTS)
    walls = []
    log(f"pilot: 1 worker on {sizes[0]}, then {sizes[1]} agents, to estimate the full runs ...")
    for n in sizes:
        state = fresh_state(work, "pilot", fleet.root)
        try:
            r = run_night(state, 1, spread(fleet.spec.agent_ids(), n))
        finally:
            shutil.rmtree(state, ignore_errors=True)
        if r["exit_status"] != 0 or not r["all_ok"]:
            raise SystemExit(f"pilot run failed: {r.get('failures')} {r.get('stderr_tail', '')}")
        walls.append(r["wall_s"])
    # Noise can make the difference small or negative; a quarter of the plain mean is the floor.
    per_agent = max((walls[1] - walls[0]) / (sizes[1] - sizes[0]), walls[1] / sizes[1] / 4)
    fixed = max(0.0, walls[1] - per_agent * sizes[1])
    log(f"  {per_agent:.2f} s per agent at 1 worker, {fixed:.1f} s fixed per run")
    return {"agents": list(sizes), "wall_s": walls, "s_per_agent": per_agent, "fixed_s": fixed}


def profile_one(fleet: Fleet, work: Path, top: int) -> dict[str, Any]:
    """cProfile of one agent's night, as a worker runs it, in a child with a fresh state."""
    agents = fleet.spec.agent_ids()
    warm, agent = agents[0], agents[len(agents) // 2]
    state = fresh_state(work, "profile", fleet.root)
    log(f"profiling one agent's night ({agent}, after {warm} as warm-up) ...")
    try:
        proc = subprocess.run(
            [
                *(sys.executable, str(PROFILER)),
                *(str(state), str(state / "dreaming.toml")),
                *(warm, agent, str(top)),
            ],
            capture_output=True,
            env=_child_env(),
            cwd=state,
            check=False,
        )
    finally:
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(state.with_name(state.name + "-prof"), ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"profile child failed:\n{proc.stderr.decode(errors='replace')[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    return result
