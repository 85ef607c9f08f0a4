"""The fleet bench's plan (imported as `_fleet_plan` from bench/): what is built and what is
measured. The fleet's spec, its deterministic transcripts (generated on every core, or
reused from a folder whose manifest matches), and the schedule: per worker count, the whole
fleet or every k-th agent, as the pilot's estimate and --max-minutes decide."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _common import log
from _sessions import ShortSession, session_key, session_uuid
from _vocab import _FACT_TEMPLATES, _code_corpus, _fill, _log_corpus, _prose_corpus, _Slicer

FLEET_VERSION = 1
MANIFEST = "fleet-set.json"
FACTS_PER_AGENT = 12


@dataclass(frozen=True)
class FleetSpec:
    agents: int
    sessions: int
    seed: int = 1

    def agent_ids(self) -> list[str]:
        width = max(4, len(str(self.agents)))
        return [f"agent{i:0{width}d}" for i in range(1, self.agents + 1)]


@dataclass
class Fleet:
    root: Path
    spec: FleetSpec
    agent_bytes: dict[str, int]  # transcript bytes per agent (sessions.json not counted)
    agent_lines: dict[str, int]
    files: int
    generate_s: float
    generated: bool  # False: reused from an earlier run

    @property
    def total_bytes(self) -> int:
        return sum(self.agent_bytes.values())

    @property
    def total_lines(self) -> int:
        return sum(self.agent_lines.values())


class _Corpora:
    """Bulk text for tool results and thinking, sliced at random: built once per process."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(f"{seed}/fleet-corpus")
        self.code = _Slicer(_code_corpus(rng, 400_000))
        self.logs = _Slicer(_log_corpus(rng, 200_000))
        self.prose = _Slicer(_prose_corpus(rng, 150_000))


_CORPORA: dict[int, _Corpora] = {}


def _corpora(seed: int) -> _Corpora:
    if seed not in _CORPORA:
        _CORPORA[seed] = _Corpora(seed)
    return _CORPORA[seed]


def _agent_facts(seed: int, agent: str) -> list[str]:
    rng = random.Random(f"{seed}/{agent}/facts")
    facts: list[str] = []
    while len(facts) < FACTS_PER_AGENT:
        fact = _fill(rng.choice(_FACT_TEMPLATES), rng)
        if fact not in facts:
            facts.append(fact)
    return facts


def _write_agents(args: tuple[Path, FleetSpec, list[str]]) -> list[tuple[str, int, int]]:
    """Write these agents' sessions; (agent, bytes, lines) each. Runs in a pool process."""
    root, spec, agents = args
    corpora = _corpora(spec.seed)
    out = []
    for agent in agents:
        sessions_dir = root / "agents" / agent / "sessions"
        sessions_dir.mkdir(parents=True)
        facts = _agent_facts(spec.seed, agent)
        index: dict[str, Any] = {}
        size = lines = 0
        for i in range(spec.sessions):
            rng = random.Random(f"{spec.seed}/{agent}/{i}")
            sid = session_uuid(rng)
            session = ShortSession(rng, facts, corpora, sid)
            data, n = session.render()
            path = sessions_dir / f"{sid}.jsonl"
            with open(path, "wb") as f:
                f.write(data)
            size += len(data)
            lines += n
            key, extra = session_key(agent, i, rng)
            index[key] = {
                "sessionId": sid,
                "sessionFile": str(path),
                "updatedAt": session.ms,
                **extra,
            }
        with open(sessions_dir / "sessions.json", "w", encoding="utf-8") as f:
            json.dump(index, f, indent=2)
        out.append((agent, size, lines))
    return out


def generate(spec: FleetSpec, root: Path) -> Fleet:
    """Write a fresh fleet under `root` (its `agents/` folder and manifest are replaced)."""
    started = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(root / "agents", ignore_errors=True)
    agents = spec.agent_ids()
    procs = max(1, min(os.cpu_count() or 1, len(agents)))
    step = max(1, math.ceil(len(agents) / (procs * 8)))
    chunks = [(root, spec, agents[i : i + step]) for i in range(0, len(agents), step)]
    results: list[tuple[str, int, int]] = []
    last_report = started
    context = multiprocessing.get_context("spawn" if sys.platform == "darwin" else "fork")
    with context.Pool(procs) as pool:
        for done in pool.imap(_write_agents, chunks):
            results.extend(done)
            now = time.perf_counter()
            if now - last_report > 5:
                last_report = now
                log(f"  generating: {len(results)}/{len(agents)} agents ...")
    fleet = Fleet(
        root=root,
        spec=spec,
        agent_bytes={a: b for a, b, _ in results},
        agent_lines={a: n for a, _, n in results},
        files=len(agents) * spec.sessions,
        generate_s=time.perf_counter() - started,
        generated=True,
    )
    manifest = {
        "fleet_version": FLEET_VERSION,
        "spec": asdict(spec),
        "generate_s": fleet.generate_s,
        "files": fleet.files,
        "agent_bytes": fleet.agent_bytes,
        "agent_lines": fleet.agent_lines,
    }
    tmp = root / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest), encoding="utf-8")
    os.replace(tmp, root / MANIFEST)
    return fleet


def load(spec: FleetSpec, root: Path) -> Fleet | None:
    """The fleet already under `root` when its manifest matches `spec` and its files are
    intact (per agent: the number of transcripts and their total size)."""
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if manifest.get("fleet_version") != FLEET_VERSION or manifest.get("spec") != asdict(spec):
        return None
    agent_bytes: dict[str, int] = manifest["agent_bytes"]
    for agent, expected in agent_bytes.items():
        try:
            with os.scandir(root / "agents" / agent / "sessions") as it:
                sizes = [e.stat().st_size for e in it if e.name.endswith(".jsonl")]
        except OSError:
            return None
        if len(sizes) != spec.sessions or sum(sizes) != expected:
            return None
    return Fleet(
        root=root,
        spec=spec,
        agent_bytes=agent_bytes,
        agent_lines=manifest["agent_lines"],
        files=manifest["files"],
        generate_s=manifest.get("generate_s", 0.0),
        generated=False,
    )


def ensure_fleet(spec: FleetSpec, root: Path) -> Fleet:
    """Reuse the fleet under `root` if it matches `spec`, else generate it there. Refuses
    a non-empty folder that holds no fleet of ours, so a mistyped --data-dir deletes nothing."""
    found = load(spec, root)
    if found is not None:
        return found
    if root.exists() and any(root.iterdir()) and not (root / MANIFEST).exists():
        raise SystemExit(f"{root} is not empty and holds no fleet; pick another folder")
    return generate(spec, root)


def spread(items: list[str], k: int) -> list[str]:
    """k items spread evenly over `items`, first and last included."""
    if k >= len(items):
        return list(items)
    if k <= 1:
        return items[:1]
    step = (len(items) - 1) / (k - 1)
    return [items[round(i * step)] for i in range(k)]


def plan(
    fleet: Fleet,
    workers: list[int],
    forced: dict[int, int],
    pilot_result: dict[str, Any] | None,
    max_minutes: float,
    cores: int,
) -> dict[int, tuple[int, float | None]]:
    """worker count -> (sample every k-th agent, estimated full wall s). The estimate
    assumes a speed-up of 0.9 x min(workers, cores), which is optimistic on purpose only
    for the multi-worker runs that are measured whole anyway."""
    out: dict[int, tuple[int, float | None]] = {}
    for w in workers:
        est = None
        every = forced.get(w, 1)
        if pilot_result is not None:
            speedup = 1.0 if w == 1 else 0.9 * min(w, cores)
            per_agent, fixed = pilot_result["s_per_agent"], pilot_result["fixed_s"]
            est = fixed + per_agent * fleet.spec.agents / speedup
            if w not in forced and max_minutes > 0 and est > max_minutes * 60:
                every = 4
                while est / every > max_minutes * 60 and every < fleet.spec.agents:
                    every *= 2
        out[w] = (every, est)
    return out
