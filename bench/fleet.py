"""Fleet load benchmark: the full night (light, rem, deep) over many agents, per worker count
and executor (in-process, or Procrastinate workers on one PostgreSQL database).

    .venv/bin/python bench/fleet.py --quick                 # 50 agents x 20 sessions, < 60 s
    .venv/bin/python bench/fleet.py                         # 1,000 agents x 50 sessions
    .venv/bin/python bench/fleet.py --agents 1000 --sessions 50 --workers 1,2,4 \\
        --data-dir /tmp/fleet-1000x50 --pin HEAD --profile  # reuse the set; pin the library
    .venv/bin/python bench/fleet.py --quick --executor both # fleet mode next to in-process
    .venv/bin/python bench/fleet.py --executor procrastinate \\
        --database-url postgresql://me@db:5432/postgres     # an existing PostgreSQL server

What it does, in one run:

1. Generates a deterministic (seeded) fleet of OpenClaw transcripts into a temporary folder,
   or into `--data-dir`, where a fleet with the same parameters is reused instead of
   regenerated (a manifest, written last, records the spec and the file sizes). Each agent
   has `--sessions` sessions (`<root>/agents/<agentId>/sessions/<sessionId>.jsonl` plus a
   `sessions.json` index; one session in ten is a Discord group chat, the rest direct
   chats), each 3-6 turns over a few KB: a user message that often states one of the
   agent's own facts (a small per-agent pool drawn from bench/_synth.py's vocabulary, with
   paraphrases, so the same facts recur across that agent's sessions and candidates and
   entries form), chit-chat and a request; often a tool step (thinking, a read or a test
   run, its result); a final assistant reply. Sessions start over four weeks. Generation
   runs on every core, one chunk of agents per process.
2. For each `--workers` count: a fresh state folder holding only a `dreaming.toml` with
   `read_state_dir = false` and one `[[sources]] kind = "openclaw"` pointing at the shared
   fleet folder (transcripts are not copied; databases, MEMORY.md and corpus files go to
   the fresh state folder), then the documented command in a subprocess:
   `dreaming --state-dir S run --workers N --json`. Measured: wall time of that process,
   peak RSS of its whole process tree (psutil, every 100 ms, RSS of the CLI process plus
   all its descendants summed; the maximum sample is reported, with the largest process
   count seen), agents/minute, sessions/s, corpus lines/s and input MB/s, and what the
   night produced (sessions read, corpus lines, candidates, entries added to MEMORY.md).
   Every agent's run outcome must be `ok`, and `dreaming verify` must exit 0 on a few
   agents (first, middle, last; `--verify` sets how many).
3. With `--executor procrastinate` (or `both`: each worker count measured with the
   in-process executor and then with this one, back to back, so the two share the
   machine's state and the ratio is fair), fleet mode instead: all agents' state in one
   PostgreSQL database, the work handed out by the Procrastinate queue. Per worker count
   N: a fresh database (CREATE DATABASE) and a fresh state folder whose dreaming.toml has
   the same source plus `database_url` and `jobs_dir` (a jobs folder holding `nightly`:
   light, rem, deep, every agent); N `dreaming --state-dir S worker --poll 0.2` processes
   are started and waited for until they have registered with the queue (start-up,
   imports and migrations are not timed); then the clock starts and
   `dreaming --state-dir S jobs run nightly --executor procrastinate --json` enqueues one
   task per agent (with `--agent ...` for each agent of a sample), and the bench polls
   procrastinate_jobs every 100 ms until every task has succeeded or failed: that is the
   wall time. Then the workers get SIGTERM. Measured besides: peak RSS of the worker
   processes' trees plus the enqueueing CLI (same sampler), their CPU over the wall time,
   the PostgreSQL server's peak PSS and CPU (when the bench runs the server), how long the
   enqueue command took, when the first run started and the last one ended, and from the
   `runs` table how many distinct workers (runs.worker, host:pid) ran runs and how many
   each. What the night produced is summed from the run records' summaries as from
   `run --json`. Every task must end `succeeded`, every run `ok`, one run per agent, and
   `dreaming verify` must exit 0 on the same few agents. The server is a throwaway one
   started by this process from the installed binaries (tests/pg.py's PostgresServer;
   the repo root is put on sys.path for it), or the server of `--database-url` (a role
   that may CREATE DATABASE; each run's database is dropped afterwards unless --keep).
   With neither available the bench stops with a message saying so. Sampling (pilot,
   `--max-minutes`, `--sample W:K`) is decided per worker count as above and applies to
   both executors alike; the pilot runs the in-process executor only.
   On a 2-core machine, 4 worker processes cannot beat 2: the runs are CPU-bound Python,
   and the PostgreSQL server needs a share of the same two cores.
4. Prints a table (workers, executor, agents, wall s, agents/min, sessions/s, lines/s,
   peak RSS MB, speed-up), or with --json one JSON document on stdout (progress goes to
   stderr). The speed-up compares throughput (agents/min) against the 1-worker row of
   the first executor measured (the in-process one, with `both`: a same-run baseline), so
   it stays meaningful when the 1-worker run measured a sample. The machine's core count
   is printed: N cores cap the speed-up at about N, whatever --workers says.

Long runs: unless `--max-minutes 0`, a fleet of more than 100 agents first gets a short
pilot (1 worker on spread-out samples of 4 and of 16 agents, not reported as measurements:
the difference gives seconds per agent, the rest is the fixed cost of a run); any worker
count whose full run the pilot predicts to take longer than `--max-minutes` (default 25)
is measured on every k-th agent instead (k = 4, or the next power of two that fits), via
repeated `--agent` options, and the output says so on that row. `--sample 1:4` forces
that for a worker count.

Pinning: other people edit the tree while a long run goes on; `--pin HEAD` extracts the
library (dreaming, prompts, jobs) as committed at that revision into the work dir and
makes every child import it (PYTHONPATH). The report names the library and its commit.

`--profile` adds a cProfile of one agent's night as a worker process runs it
(`dreaming.app._run_agent_in_worker`: App.open, light, rem, deep, close) in a child
process with a fresh state, after one unprofiled agent has warmed it up; the hot spots are
printed (top functions by own time and by cumulative time).

Note on memory: RSS summed over processes counts shared pages (the interpreter, shared
libraries) once per process, so the tree peak overstates what the tree costs the machine
by roughly (processes - 1) x the shared part; the largest single process is reported too.

The children (workers and enqueue command included) run this venv's `dreaming` (or
`python -c 'from dreaming.cli import main'`) with this process's environment minus
DREAMING_* variables, so the library measured is whatever `import dreaming` finds (or the
--pin snapshot). The procrastinate mode needs the `fleet` extra (psycopg, procrastinate).
Exit status 0 when every run and every verify succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from _synth import (
    _CHITCHAT,
    _FACT_TEMPLATES,
    _MODEL,
    _MODULES,
    _NARRATION,
    _NOUN,
    _PROJECTS,
    _REPLIES,
    _REQUESTS,
    _SENDERS,
    _UNIQUE,
    _code_corpus,
    _fill,
    _iso,
    _log_corpus,
    _lognormal_size,
    _paraphrase,
    _prose_corpus,
    _session_key,
    _Slicer,
    _uuid,
    human,
)

FLEET_VERSION = 1
MANIFEST = "fleet-set.json"
DEFAULT_AGENTS = 1000
DEFAULT_SESSIONS = 50
QUICK_AGENTS = 50
QUICK_SESSIONS = 20
DEFAULT_WORKERS = "1,2,4"
# Measured per worker count, in this order; the first one's 1-worker row is the baseline.
EXECUTORS = {
    "in-process": ("in-process",),
    "procrastinate": ("procrastinate",),
    "both": ("in-process", "procrastinate"),
}
PILOT_AGENTS = 16
PILOT_MIN_FLEET = 100  # smaller fleets are measured whole, without a pilot
POLL_S = 0.1
MB = 1e6
FACTS_PER_AGENT = 12
CORE_FACTS = 5  # the facts an agent keeps coming back to

_START = datetime(2026, 1, 5, tzinfo=UTC).timestamp()
_SPAN_S = 28 * 86400  # sessions start over four weeks
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the fleet


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


class _Session:
    """One short session: header, model change, 3-6 turns of speech and the odd tool step."""

    def __init__(self, rng: random.Random, facts: list[str], corpora: _Corpora, sid: str) -> None:
        self.rng = rng
        self.facts = facts
        self.corpora = corpora
        self.sid = sid
        self.ms = int((_START + rng.random() * _SPAN_S) * 1000)
        self.parent: str | None = None
        self.out: list[str] = []

    def _hex(self, bits: int = 32) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def _tick(self, lo: float, hi: float) -> None:
        self.ms += int(self.rng.uniform(lo, hi) * 1000)

    def _entry(self, obj: dict[str, Any]) -> None:
        line_id = self._hex()
        obj = {"type": obj.pop("type"), "id": line_id, "parentId": self.parent, **obj}
        obj["timestamp"] = _iso(self.ms)
        self.parent = line_id
        self.out.append(_dumps(obj))

    def _message(self, message: dict[str, Any]) -> None:
        message["timestamp"] = self.ms
        self._entry({"type": "message", "message": message})

    def _fact(self) -> str:
        rng = self.rng
        pool = self.facts[:CORE_FACTS] if rng.random() < 0.6 else self.facts
        return _paraphrase(rng.choice(pool), rng)

    def _user_text(self) -> str:
        rng = self.rng
        parts: list[str] = []
        if rng.random() < 0.55:
            parts.append(self._fact())
        if rng.random() < 0.25:
            parts.append(rng.choice(_CHITCHAT))
        parts.append(_fill(rng.choice(_REQUESTS), rng))
        body = " ".join(parts)
        if rng.random() < 0.15:
            label, sender_id, user = rng.choice(_SENDERS)
            meta = {"label": label, "id": sender_id, **({"username": user} if user else {})}
            stamp = time.strftime("%a %Y-%m-%d %H:%M", time.gmtime(self.ms // 1000))
            body = (
                "Sender (untrusted metadata):\n```json\n"
                + json.dumps(meta, indent=2, ensure_ascii=False)
                + f"\n```\n\n[{stamp} GMT+1] {body}"
            )
        return body

    def _assistant(self, content: list[dict[str, Any]], stop: str) -> None:
        rng = self.rng
        inp, out = rng.randrange(200, 20000), rng.randrange(20, 2000)
        api, provider, model = _MODEL
        self._message(
            {
                "role": "assistant",
                "content": content,
                "api": api,
                "provider": provider,
                "model": model,
                "usage": {"input": inp, "output": out, "totalTokens": inp + out},
                "stopReason": stop,
            }
        )

    def _tool_step(self) -> None:
        rng, c = self.rng, self.corpora
        self._tick(2, 30)
        mod, noun = rng.choice(_MODULES), rng.choice(_NOUN)
        call_id = "toolu_" + self._hex(96)
        if rng.random() < 0.5:
            name = "read"
            args: dict[str, Any] = {"path": f"src/{mod}/{noun}.py"}
            result = c.code.take(rng, _lognormal_size(rng, 350, 0.7, 4000))
        else:
            name = "bash"
            args = {"command": f"pytest -q tests/test_{mod}.py -k {noun}", "timeout": 120}
            result = c.logs.take(rng, _lognormal_size(rng, 300, 0.7, 4000))
        content: list[dict[str, Any]] = [
            {"type": "thinking", "thinking": c.prose.take(rng, rng.randrange(100, 350))}
        ]
        if rng.random() < 0.6:
            content.append({"type": "text", "text": _fill(rng.choice(_NARRATION), rng)})
        content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args})
        self._assistant(content, "toolUse")
        self._tick(0.1, 15)
        self._message(
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{"type": "text", "text": result}],
                "isError": False,
            }
        )

    def render(self) -> tuple[str, int]:
        """The file's text and its line count."""
        rng = self.rng
        header = {"type": "session", "version": 3, "id": self.sid, "timestamp": _iso(self.ms)}
        header["cwd"] = f"/home/dev/projects/{rng.choice(_PROJECTS)}"
        self.out.append(_dumps(header))
        self._entry({"type": "model_change", "provider": _MODEL[1], "modelId": _MODEL[2]})
        for _ in range(rng.randint(3, 6)):
            self._tick(60, 1800)
            self._message(
                {"role": "user", "content": [{"type": "text", "text": self._user_text()}]}
            )
            if rng.random() < 0.5:
                self._tool_step()
            self._tick(2, 30)
            parts = [_fill(rng.choice(_REPLIES), rng)]
            if rng.random() < 0.25:
                parts.append(_fill(_UNIQUE, rng))
            if rng.random() < 0.1:
                parts.append("Noted: " + rng.choice(self.facts))
            self._assistant([{"type": "text", "text": " ".join(parts)}], "stop")
        return "\n".join(self.out) + "\n", len(self.out)


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
            sid = _uuid(rng)
            session = _Session(rng, facts, corpora, sid)
            text, n = session.render()
            data = text.encode()
            path = sessions_dir / f"{sid}.jsonl"
            with open(path, "wb") as f:
                f.write(data)
            size += len(data)
            lines += n
            key, extra = _session_key(agent, i, rng)
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
                _log(f"  generating: {len(results)}/{len(agents)} agents ...")
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


# --------------------------------------------------------------------------- one measurement


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
    repo = Path(__file__).resolve().parent.parent
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
            if isinstance(data.get("duration_s"), int | float):  # rem reports none
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


def _spread(items: list[str], k: int) -> list[str]:
    """k items spread evenly over `items`, first and last included."""
    if k >= len(items):
        return list(items)
    if k <= 1:
        return items[:1]
    step = (len(items) - 1) / (k - 1)
    return [items[round(i * step)] for i in range(k)]


def measure(
    fleet: Fleet, work: Path, workers: int, every: int, verify_k: int, keep: bool
) -> dict[str, Any]:
    """One full night with `workers` workers over the fleet (or every `every`-th agent)."""
    all_agents = fleet.spec.agent_ids()
    chosen = all_agents[::every]
    state = fresh_state(work, f"state-w{workers}", fleet.root)
    label = f"{len(chosen)} agents" + (f" (every {every}th: a sample)" if every > 1 else "")
    _log(f"measuring: in-process, {workers} worker(s), {label} ...")
    try:
        r = run_night(state, workers, chosen if every > 1 else None)
        r["verify"] = verify_agents(state, _spread(chosen, verify_k))
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
    _log(
        f"  {wall:.1f} s, {r['agents_per_min']:.0f} agents/min, "
        f"peak RSS {r['peak_rss_bytes'] / MB:.0f} MB, {'ok' if r['ok'] else 'NOT OK'}"
    )
    return r


# --------------------------------------------------------------------------- fleet mode

RUN_TASK = "dreaming.run_agent_job"
JOB_NAME = "nightly"
WORKER_POLL_S = 0.2  # `dreaming worker --poll`
WORKER_READY_S = 90.0  # workers must have registered with the queue within this
STALL_S = 300.0  # no task finished for this long: the measurement is given up
DB_POLL_S = 1.0  # the PostgreSQL server's memory (PSS, slower to read than RSS)
REPO = Path(__file__).resolve().parent.parent


def _libpq(url: str) -> str:
    """A SQLAlchemy-style or libpq PostgreSQL URL as a libpq connection string."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise SystemExit(f"--database-url: not a database URL: {url!r}") from None
    if parsed.get_backend_name() != "postgresql":
        raise SystemExit(f"--database-url must be postgresql://..., not {url!r}")
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


class Postgres:
    """Where the procrastinate runs' databases live: a throwaway server (tests/pg.py's
    PostgresServer, run by this process) or the server of --database-url. Every
    measurement gets a fresh database (CREATE DATABASE), dropped afterwards."""

    def __init__(self, database_url: str | None) -> None:
        try:
            import procrastinate  # noqa: F401
            import psycopg  # noqa: F401
        except ImportError as e:
            raise SystemExit(
                f"--executor procrastinate needs the fleet extra (pip install -e '.[fleet]'): {e}"
            ) from None
        self.server: Any = None
        if database_url:
            self.admin = _libpq(database_url)
            self.kind = "--database-url"
            return
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))
        from tests.pg import PostgresServer, PostgresUnavailable

        server = PostgresServer()
        _log("starting a throwaway PostgreSQL server (tests/pg.py) ...")
        try:
            server.start()
        except PostgresUnavailable as e:
            raise SystemExit(
                "--executor procrastinate needs PostgreSQL: no --database-url was given and no "
                f"local server could be started ({e.reason.splitlines()[0]}). Install the "
                "server binaries (Debian: apt-get install postgresql; or set DREAMING_PG_BIN), "
                "or pass --database-url postgresql://USER@HOST:PORT/postgres (a role that may "
                "CREATE DATABASE)."
            ) from None
        self.server = server
        self.admin = server.dsn("postgres")
        self.kind = "throwaway server"

    def describe(self) -> dict[str, Any]:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return {
            "kind": self.kind,
            "server_version": row[0] if row else None,
            "dsn": self.admin if self.server else _hide_password(self.admin),
        }

    def dsn(self, name: str) -> str:
        from sqlalchemy.engine import make_url

        url = make_url(self.admin).set(database=name)
        return url.render_as_string(hide_password=False)

    def create(self, name: str) -> str:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)

    def drop(self, name: str) -> None:
        import psycopg
        from psycopg import sql

        try:
            with psycopg.connect(self.admin, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        except psycopg.Error as e:
            _log(f"  could not drop database {name}: {e}")

    def process(self) -> psutil.Process | None:
        """The postmaster, when this process runs the server (its RSS and CPU are measured)."""
        pid = self.server.pid if self.server is not None else None
        return psutil.Process(pid) if pid else None

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def _hide_password(dsn: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(dsn).render_as_string(hide_password=True)


def _tree_cpu_s(proc: psutil.Process | None) -> float:
    """CPU seconds (user+sys) of `proc`, its reaped children and its live descendants."""
    if proc is None:
        return 0.0
    try:
        t = proc.cpu_times()
        total = float(t.user + t.system + t.children_user + t.children_system)
        children = proc.children(recursive=True)
    except psutil.Error:
        return 0.0
    for child in children:
        try:
            c = child.cpu_times()
        except psutil.Error:
            continue
        total += c.user + c.system
    return total


def _tree_pss(proc: psutil.Process) -> int:
    """Summed PSS of `proc` and its descendants: a PostgreSQL server's shared buffers are
    mapped by every backend, so their RSS would count them once per backend."""
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        procs = [proc]
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except (psutil.Error, AttributeError):
            continue
    return total


def _queue_states(conn: Any) -> dict[str, int]:
    rows = conn.execute(
        "SELECT status, count(*) FROM procrastinate_jobs WHERE task_name = %s GROUP BY status",
        (RUN_TASK,),
    ).fetchall()
    return {str(status): int(n) for status, n in rows}


def _tail(path: Path, limit: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def start_workers(state: Path, n: int) -> list[subprocess.Popen[bytes]]:
    """`dreaming --state-dir S worker --poll 0.2`, n times; output to S/worker-<i>.log."""
    cmd = [*_cli(), "--state-dir", str(state), "worker", "--poll", str(WORKER_POLL_S)]
    procs = []
    for i in range(n):
        with open(state / f"worker-{i}.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, env=_child_env(), cwd=state
                )
            )
    return procs


def wait_workers_ready(dsn: str, procs: list[subprocess.Popen[bytes]], state: Path) -> float:
    """Until every worker has registered with the queue (procrastinate_workers): they have
    created the schemas and are listening. Seconds it took."""
    import psycopg

    started = time.perf_counter()
    deadline = started + WORKER_READY_S
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            dead = [i for i, p in enumerate(procs) if p.poll() is not None]
            if dead:
                raise RuntimeError(
                    f"worker {dead[0]} exited with {procs[dead[0]].returncode} at start:\n"
                    + _tail(state / f"worker-{dead[0]}.log")
                )
            row = conn.execute("SELECT to_regclass('procrastinate_workers')").fetchone()
            if row is not None and row[0] is not None:
                count = conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
                if count is not None and count[0] >= len(procs):
                    return time.perf_counter() - started
            if time.perf_counter() > deadline:
                raise RuntimeError(f"workers not registered after {WORKER_READY_S:.0f} s")
            time.sleep(POLL_S)


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> list[int | None]:
    """SIGTERM (finish the running task, then exit), SIGKILL after 30 s; exit statuses."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    codes: list[int | None] = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=30))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            codes.append(None)  # had to be killed
    return codes


def run_queue(
    state: Path,
    dsn: str,
    workers: list[subprocess.Popen[bytes]],
    agents: list[str] | None,
    pg: Postgres,
) -> dict[str, Any]:
    """Enqueue the nightly job (`jobs run nightly --executor procrastinate --json`) while
    the workers wait, and watch every 100 ms until every task succeeded or failed: the
    RSS of the workers' trees (and of the enqueueing CLI while it runs) and the queue."""
    import psycopg

    base = [*_cli(), "--state-dir", str(state), "jobs", "run", JOB_NAME]
    base += ["--executor", "procrastinate", "--json"]
    cmd = list(base)
    for agent in agents or ():
        cmd += ["--agent", agent]
    out_path, err_path = state / "enqueue.json", state / "enqueue.stderr"
    watched = [psutil.Process(p.pid) for p in workers]
    db_proc = pg.process()
    peak = peak_procs = peak_single = db_peak = 0
    timeline: list[tuple[float, int]] = []
    failures: list[str] = []
    enqueue: dict[str, Any] = {}
    states: dict[str, int] = {}
    total: int | None = None
    usage = None
    conn = psycopg.connect(dsn, autocommit=True)
    try:
        cpu0 = sum(_tree_cpu_s(w) for w in watched)
        db_cpu0 = _tree_cpu_s(db_proc)
        busy0 = _busy_cpu_s()
        wall0 = time.time()
        started = time.perf_counter()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=_child_env(), cwd=state)
        enqueuer = psutil.Process(proc.pid)
        last_finished, last_progress = -1, started
        db_next = started
        while True:
            now = time.perf_counter()
            total_rss = count = 0
            for p in [*watched, *([enqueuer] if usage is None else [])]:
                t, c, largest = _tree_rss(p)
                total_rss, count = total_rss + t, count + c
                peak_single = max(peak_single, largest)
            timeline.append((now - started, total_rss))
            peak, peak_procs = max(peak, total_rss), max(peak_procs, count)
            if db_proc is not None and now >= db_next:
                db_next = now + DB_POLL_S
                db_peak = max(db_peak, _tree_pss(db_proc))
            if usage is None:
                pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    usage = ru
                    proc.returncode = os.waitstatus_to_exitcode(status)
                    enqueue = {"exit_status": proc.returncode, "s": now - started}
                    try:
                        queued = json.loads(out_path.read_bytes())["queued"]
                    except (ValueError, KeyError):
                        failures.append("enqueue printed no JSON: " + _tail(err_path))
                        break
                    kinds: dict[str, int] = {}
                    for q in queued:
                        kinds[q["outcome"]] = kinds.get(q["outcome"], 0) + 1
                    enqueue["outcomes"] = kinds
                    total = kinds.get("queued", 0)
                    if proc.returncode != 0 or total != len(queued):
                        failures.append(f"enqueue: exit {proc.returncode}, outcomes {kinds}")
            states = _queue_states(conn)
            finished = states.get("succeeded", 0) + states.get("failed", 0)
            if total is not None and finished >= total:
                break
            if finished != last_finished:
                last_finished, last_progress = finished, now
            elif now - last_progress > STALL_S:
                failures.append(f"no task finished for {STALL_S:.0f} s; queue {states}")
                break
            if all(w.poll() is not None for w in workers):
                failures.append(f"every worker exited; queue {states}")
                break
            time.sleep(POLL_S)
        wall = time.perf_counter() - started
        cpu = sum(_tree_cpu_s(w) for w in watched) - cpu0
        db_cpu = _tree_cpu_s(db_proc) - db_cpu0 if db_proc is not None else None
        busy = _busy_cpu_s() - busy0
    finally:
        conn.close()
    if usage is None:  # gave up before the enqueue finished
        proc.kill()
        _, _, usage = os.wait4(proc.pid, 0)
    enqueue_cpu = usage.ru_utime + usage.ru_stime
    tree_cpu = cpu + enqueue_cpu
    return {
        "command": " ".join(base) + (f" --agent ... ({len(agents)} agents)" if agents else ""),
        "worker_command": " ".join([*_cli(), "--state-dir", "S", "worker", "--poll"])
        + f" {WORKER_POLL_S}",
        "wall_s": wall,
        "wall_started_at": wall0,
        "enqueue": enqueue,
        "queue_total": total,
        "queue_states_at_end": states,
        "peak_rss_bytes": peak,
        "peak_processes": peak_procs,
        "peak_single_rss_bytes": peak_single,
        "rss_samples": len(timeline),
        "rss_by_quarter_bytes": [
            max((b for t, b in timeline if q * wall / 4 <= t <= (q + 1) * wall / 4), default=0)
            for q in range(4)
        ],
        "cpu_s": tree_cpu,
        "worker_cpu_s": cpu,
        "enqueue_cpu_s": enqueue_cpu,
        "db_cpu_s": db_cpu,
        "db_peak_pss_bytes": db_peak if db_proc is not None else None,
        # PostgreSQL's CPU is the system under test here, not another job competing.
        "others_cores": max(0.0, busy - tree_cpu - (db_cpu or 0.0)) / wall if wall else 0.0,
        "watch_failures": failures,
    }


def _utc_seconds(value: Any) -> float | None:
    if not isinstance(value, datetime):
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def read_runs(dsn: str, wall0: float) -> dict[str, Any]:
    """The run records the workers wrote (table `runs`): what the night did, summed as for
    `run --json`, which workers ran it, and when the first run started and the last ended."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT agent, worker, started_at, ended_at, outcome, summary FROM runs "
            "WHERE job = %s ORDER BY started_at",
            (JOB_NAME,),
        ).fetchall()
        states = _queue_states(conn)
    runs: list[dict[str, Any]] = []
    agents: dict[str, Any] = {}
    by_worker: dict[str, int] = {}
    for agent, worker, _, _, outcome, summary in rows:
        try:
            doc = json.loads(summary or "{}")
        except ValueError:
            doc = {}
        runs.append({"agent": agent, "outcome": outcome, "error": doc.get("error")})
        agents[agent] = doc.get("phases") or {}
        by_worker[str(worker)] = by_worker.get(str(worker), 0) + 1
    starts = [s for s in (_utc_seconds(r[2]) for r in rows) if s is not None]
    ends = [e for e in (_utc_seconds(r[3]) for r in rows) if e is not None]
    return {
        **summarize({"runs": runs, "agents": agents}),
        "runs_by_worker": dict(sorted(by_worker.items())),
        "distinct_workers": len(by_worker),
        "duplicate_runs": len(runs) - len(agents),
        "first_run_started_s": min(starts) - wall0 if starts else None,
        "last_run_ended_s": max(ends) - wall0 if ends else None,
        "queue_states": states,
    }


def measure_procrastinate(
    fleet: Fleet, work: Path, workers: int, every: int, verify_k: int, keep: bool, pg: Postgres
) -> dict[str, Any]:
    """One night of the fleet (or every `every`-th agent) through the Procrastinate queue:
    a fresh database and state folder, `workers` worker processes started and registered
    first, then enqueue and wait until every task has succeeded or failed."""
    all_agents = fleet.spec.agent_ids()
    chosen = all_agents[::every]
    db = f"fleet_bench_{os.getpid()}_w{workers}"
    dsn = pg.create(db)
    jobs = work / f"jobs-{db}"
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / f"{JOB_NAME}.toml").write_text(
        f'name = "{JOB_NAME}"\nphases = ["light", "rem", "deep"]\nagents = "*"\n',
        encoding="utf-8",
    )
    head = f"database_url = {json.dumps(dsn)}\njobs_dir = {json.dumps(str(jobs))}\n"
    state = fresh_state(work, f"state-pq-w{workers}", fleet.root, head)
    label = f"{len(chosen)} agents" + (f" (every {every}th: a sample)" if every > 1 else "")
    _log(f"measuring: procrastinate, {workers} worker process(es), {label} ...")
    procs: list[subprocess.Popen[bytes]] = []
    r: dict[str, Any] = {"watch_failures": []}
    try:
        procs = start_workers(state, workers)
        try:
            ready_s = wait_workers_ready(dsn, procs, state)
        except RuntimeError as e:
            raise SystemExit(f"procrastinate, {workers} worker(s): {e}") from None
        r = run_queue(state, dsn, procs, chosen if every > 1 else None, pg)
        r["workers_ready_s"] = ready_s
        r["worker_exit_statuses"] = stop_workers(procs)
        r.update(read_runs(dsn, r.pop("wall_started_at")))
        r["verify"] = verify_agents(state, _spread(chosen, verify_k))
        logs = [_tail(state / f"worker-{i}.log", 4000) for i in range(workers)]
        r["worker_log_warnings"] = [
            line
            for log in logs
            for line in log.splitlines()
            if any(w in line for w in ("ERROR", "Traceback", "outcome=failed", "event=stalled"))
        ][:10]
        if r["watch_failures"]:
            r["stderr_tail"] = "\n".join(log[-1000:] for log in logs)
    finally:
        stop_workers(procs)
        if not keep:
            shutil.rmtree(state, ignore_errors=True)
            shutil.rmtree(jobs, ignore_errors=True)
            pg.drop(db)
    wall = r["wall_s"]
    r["failures"] = [*({"watch": f} for f in r["watch_failures"]), *r["failures"]]
    r.update(_rates(r, fleet, chosen, wall, "procrastinate", workers, every))
    r.update(
        {
            "state_dir": str(state) if keep else None,
            "database": db if keep else None,
            "ok": not r["watch_failures"]
            and r["all_ok"]
            and r["queue_states"] == {"succeeded": len(chosen)}
            and r["agents_run"] == len(chosen)
            and r["duplicate_runs"] == 0
            and r["sessions_read"] == len(chosen) * fleet.spec.sessions
            and r["verify"]["ok"],
        }
    )
    _log(
        f"  {wall:.1f} s, {r['agents_per_min']:.0f} agents/min, "
        f"peak RSS {r['peak_rss_bytes'] / MB:.0f} MB, runs on {r['distinct_workers']} "
        f"worker(s), {'ok' if r['ok'] else 'NOT OK'}"
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


# --------------------------------------------------------------------------- pilot, plan


def pilot(fleet: Fleet, work: Path) -> dict[str, Any]:
    """1 worker over two spread-out samples of agents (a few, then more), for planning only:
    the difference gives seconds per agent, the rest is the run's fixed cost (start-up and
    discovering every transcript of the fleet, which does not shrink with the sample)."""
    sizes = (PILOT_AGENTS // 4, PILOT_AGENTS)
    walls = []
    _log(f"pilot: 1 worker on {sizes[0]}, then {sizes[1]} agents, to estimate the full runs ...")
    for n in sizes:
        state = fresh_state(work, "pilot", fleet.root)
        try:
            r = run_night(state, 1, _spread(fleet.spec.agent_ids(), n))
        finally:
            shutil.rmtree(state, ignore_errors=True)
        if r["exit_status"] != 0 or not r["all_ok"]:
            raise SystemExit(f"pilot run failed: {r.get('failures')} {r.get('stderr_tail', '')}")
        walls.append(r["wall_s"])
    # Noise can make the difference small or negative; a quarter of the plain mean is the floor.
    per_agent = max((walls[1] - walls[0]) / (sizes[1] - sizes[0]), walls[1] / sizes[1] / 4)
    fixed = max(0.0, walls[1] - per_agent * sizes[1])
    _log(f"  {per_agent:.2f} s per agent at 1 worker, {fixed:.1f} s fixed per run")
    return {"agents": list(sizes), "wall_s": walls, "s_per_agent": per_agent, "fixed_s": fixed}


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


# --------------------------------------------------------------------------- profile

# Runs in the child. argv: state dir, config, warm-up agent, profiled agent, top N.
# One agent's night as a worker process runs it (dreaming.app._run_agent_in_worker), after
# one unprofiled agent has paid the one-off costs; prints one JSON line last.
_PROFILE_CHILD = r"""
import cProfile, io, json, os, pstats, resource, sys, time
from pathlib import Path
from dreaming.app import App, _run_agent_in_worker
state, config, warm, agent, top = sys.argv[1:6]
app = App.open(Path(state), Path(config))
files = app.discover()
app.close()
opts = dict(job=None, dry_run=False, budget=None, profile=None, reingest=False)
phases = ["light", "rem", "deep"]
def night(a):
    return _run_agent_in_worker(state, config, dict(os.environ), a, phases, files[a], opts)
night(warm)
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
night(agent)
plain_wall = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
plain_cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
# The profiled night runs on a copy of the agent's work in a second state folder, so the
# state is as fresh as it was for the plain one.
state2 = Path(state).with_name(Path(state).name + "-prof")
state2.mkdir()
(state2 / "dreaming.toml").write_bytes((Path(state) / "dreaming.toml").read_bytes())
state = str(state2)
config = str(state2 / "dreaming.toml")
night(warm)
prof = cProfile.Profile()
t0 = time.perf_counter()
prof.enable()
result = night(agent)
prof.disable()
prof_wall = time.perf_counter() - t0
stats = pstats.Stats(prof)
def rows(key):
    stats.sort_stats(key)
    out = []
    for func in stats.fcn_list[: int(top)]:
        cc, nc, tt, ct, _ = stats.stats[func]
        out.append({"function": pstats.func_std_string(func), "ncalls": nc,
                    "tottime_s": round(tt, 4), "cumtime_s": round(ct, 4)})
    return out
by_own = rows("tottime")
groups = {}
for func, (cc, nc, tt, ct, _) in stats.stats.items():
    name = func[0]
    if "/sqlalchemy/" in name or "/sqlmodel/" in name:
        g = "sqlalchemy/sqlmodel (Python)"
    elif name == "~" and "sqlite3" in func[2]:
        g = "sqlite3 (C: execute, commit, ...)"
    elif name == "~" and ("fsync" in func[2] or "posix" in func[2]):
        g = "os calls (fsync, open, rename, ...)"
    elif "/dreaming/" in name:
        g = "dreaming (own code)"
    elif "/pydantic" in name:
        g = "pydantic"
    elif name.endswith(("json/decoder.py", "json/encoder.py", "json/__init__.py")) or (
        name == "~" and "json" in func[2]
    ):
        g = "json"
    elif name == "~" and ("Pattern" in func[2] or "re." in func[2]):
        g = "regular expressions (C)"
    else:
        g = "other"
    groups[g] = groups.get(g, 0.0) + tt
by_cum = rows("cumulative")
print(json.dumps({
    "agent": agent,
    "plain_wall_s": plain_wall,
    "plain_cpu_s": plain_cpu,
    "profiled_wall_s": prof_wall,
    "phase_s": {p: d.get("duration_s") for p, d in result["phases"].items()},
    "sessions_read": result["phases"]["light"]["sessions"]["read"],
    "own_time_by_group": dict(sorted(groups.items(), key=lambda kv: -kv[1])),
    "by_own_time": by_own,
    "by_cumulative_time": by_cum,
}))
"""


def profile_one(fleet: Fleet, work: Path, top: int) -> dict[str, Any]:
    """cProfile of one agent's night, as a worker runs it, in a child with a fresh state."""
    agents = fleet.spec.agent_ids()
    warm, agent = agents[0], agents[len(agents) // 2]
    state = fresh_state(work, "profile", fleet.root)
    _log(f"profiling one agent's night ({agent}, after {warm} as warm-up) ...")
    try:
        proc = subprocess.run(
            [
                *(sys.executable, "-c", _PROFILE_CHILD),
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


# --------------------------------------------------------------------------- report


def _fmt_row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))


def render(report: dict[str, Any]) -> str:
    f = report["fleet"]
    m = report["machine"]
    lines = [
        f"fleet: {f['agents']:,} agents x {f['sessions_per_agent']} sessions = "
        f"{f['sessions']:,} sessions, {human(f['bytes'])}, {f['lines']:,} lines "
        f"({f['avg_session_bytes'] / 1000:.1f} KB per session; "
        + (f"generated in {f['generate_s']:.1f} s" if f["generated"] else "reused")
        + f") at {f['root']}",
        f"machine: {m['cores']} CPU cores -> a speed-up of about {m['cores']}x at best, "
        f"whatever --workers says; {m['memory_total_bytes'] / 1e9:.1f} GB RAM; "
        f"load average at start {m['loadavg_start']}",
    ]
    lib = report["library"]
    lines.append(
        f"library: {lib['path']}"
        + (
            f" (git {lib['commit']}"
            + (", with uncommitted changes" if lib.get("uncommitted_changes") else "")
            + (", pinned with --pin" if lib.get("pinned") else "")
            + ")"
            if lib.get("commit")
            else ""
        )
    )
    if report.get("pilot"):
        p = report["pilot"]
        lines.append(
            f"pilot: {p['s_per_agent']:.2f} s per agent at 1 worker plus {p['fixed_s']:.1f} s "
            f"fixed per run (1 worker on {p['agents'][0]} and on {p['agents'][1]} agents); "
            f"limit {report['max_minutes']:g} min per run"
        )
    if report.get("postgres"):
        pq = report["postgres"]
        lines.append(
            f"postgres: {pq['kind']} (PostgreSQL {pq['server_version']}) at {pq['dsn']}; "
            "one fresh database per procrastinate run"
        )
    head = ["workers", "executor", "agents", "wall s", "agents/min", "sessions/s", "lines/s"]
    head += ["MB/s", "peak RSS MB", "procs", "CPU s", "others' cores", "speed-up", "ok"]
    rows = []
    for r in report["runs"]:
        rows.append(
            [
                str(r["workers"]),
                r.get("executor", "in-process"),
                f"{r['agents']:,}" + ("*" if r["sample_every"] > 1 else ""),
                f"{r['wall_s']:.1f}",
                f"{r['agents_per_min']:.1f}",
                f"{r['sessions_per_s']:.1f}",
                f"{r['corpus_lines_per_s']:.0f}",
                f"{r['mb_per_s']:.2f}",
                f"{r['peak_rss_bytes'] / MB:.0f}",
                str(r["peak_processes"]),
                f"{r['cpu_s']:.0f}",
                f"{r['others_cores']:.2f}",
                f"{r['speedup']:.2f}x" if r.get("speedup") is not None else "-",
                "ok" if r["ok"] else "FAIL",
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    lines += ["", _fmt_row(head, widths), _fmt_row(["-" * w for w in widths], widths)]
    lines += [_fmt_row(row, widths) for row in rows]
    lines.append("")
    baseline = report.get("speedup_baseline") or "the 1-worker row"
    lines.append(
        "lines/s: corpus lines written per second; MB/s: transcript bytes read per second; "
        "peak RSS: the process tree's summed RSS (shared pages counted once per process); "
        "procs: most processes seen at once; CPU s: user+sys of the whole tree; others' "
        "cores: CPU the rest of the machine used meanwhile (other jobs competing for the "
        f"{m['cores']} cores); speed-up: agents/min against the {baseline} row."
    )
    if any(r.get("executor") == "procrastinate" for r in report["runs"]):
        lines.append(
            "procrastinate rows: wall s from the enqueue command's start until every task "
            "succeeded or failed (the workers were started and registered before, not timed); "
            "peak RSS, procs and CPU s cover the worker processes plus the enqueueing CLI, "
            "not the PostgreSQL server (its own figures are in the notes below, and its CPU "
            "is not counted in others' cores)."
        )
    for r in report["runs"]:
        if r["sample_every"] > 1:
            est = r.get("estimated_full_wall_s")
            lines.append(
                f"* {r.get('executor', 'in-process')}, {r['workers']} worker(s): measured on "
                f"every {r['sample_every']}th agent "
                f"({r['agents']} of {f['agents']:,})"
                + (f"; the pilot estimated the full run at {est / 60:.1f} min" if est else "")
                + "; its rates stand in for the full fleet."
            )
    for r in report["runs"]:
        lines.append(
            f"{r.get('executor', 'in-process')}, {r['workers']} worker(s): "
            f"{r['sessions_read']:,} sessions read, "
            f"{r['corpus_lines']:,} corpus lines, {r['candidates_new']:,} candidates, "
            f"{r['entries_added']:,} entries added (deep actions {r['deep_actions']}), "
            f"outcomes {r['outcomes']}, verify {'ok' if r['verify']['ok'] else 'FAILED'} on "
            f"{', '.join(r['verify']['agents'])}; largest process "
            f"{r['peak_single_rss_bytes'] / MB:.0f} MB; tree RSS by quarter of the run "
            f"{'/'.join(f'{b / MB:.0f}' for b in r['rss_by_quarter_bytes'])} MB; phase "
            f"seconds summed over agents {r['phase_s_sum']}"
        )
        if r.get("executor") == "procrastinate":
            lines.append("  " + _queue_notes(r))
        for fail in r["failures"]:
            lines.append(f"  failure: {fail}")
        for warning in r.get("worker_log_warnings") or ():
            lines.append(f"  worker log: {warning[-200:]}")
        if r.get("stderr_tail"):
            lines.append("  stderr: " + r["stderr_tail"].strip().replace("\n", "\n  "))
    if report.get("profile"):
        lines += ["", *render_profile(report["profile"])]
    return "\n".join(lines)


def _queue_notes(r: dict[str, Any]) -> str:
    """One procrastinate row's queue figures, for the notes under the table."""

    def secs(key: str) -> str:
        return f"{r[key]:.1f} s" if r.get(key) is not None else "-"

    enqueue = r.get("enqueue") or {}
    db = (
        f"PostgreSQL server peak PSS {r['db_peak_pss_bytes'] / MB:.0f} MB, CPU "
        f"{r['db_cpu_s']:.1f} s"
        if r.get("db_peak_pss_bytes") is not None
        else "PostgreSQL server not measured (--database-url)"
    )
    return (
        f"queue: workers registered after {secs('workers_ready_s')} (not timed); enqueue "
        f"command {enqueue.get('s', 0):.1f} s ({enqueue.get('outcomes')}); first run started "
        f"at {secs('first_run_started_s')}, last run ended at {secs('last_run_ended_s')}; "
        f"runs by {r['distinct_workers']} distinct worker(s) "
        f"{sorted(r['runs_by_worker'].values(), reverse=True)}; tasks at the end "
        f"{r['queue_states']}; worker CPU {r['worker_cpu_s']:.0f} s, enqueue CPU "
        f"{r['enqueue_cpu_s']:.1f} s; {db}; worker exit statuses {r['worker_exit_statuses']}"
    )


def render_profile(p: dict[str, Any], top: int = 15) -> list[str]:
    out = [
        f"profile of one agent's night ({p['agent']}, {p['sessions_read']} sessions): "
        f"{p['plain_wall_s']:.3f} s wall, {p['plain_cpu_s']:.3f} s CPU unprofiled; "
        f"{p['profiled_wall_s']:.3f} s under cProfile; phases {p['phase_s']}",
    ]
    total = sum(p["own_time_by_group"].values()) or 1.0
    out.append(
        "  own time by group: "
        + ", ".join(f"{g} {t:.3f} s ({t / total:.0%})" for g, t in p["own_time_by_group"].items())
    )
    for title, key in (("own time", "by_own_time"), ("cumulative time", "by_cumulative_time")):
        out += ["", f"  top functions by {title}:", "    ncalls   tottime   cumtime  function"]
        for row in p[key][:top]:
            out.append(
                f"  {row['ncalls']:>8}  {row['tottime_s']:8.3f}  {row['cumtime_s']:8.3f}  "
                f"{row['function'][-110:]}"
            )
    return out


# --------------------------------------------------------------------------- main


def _worker_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of worker counts: {text!r}") from None
    if not values or any(v < 1 or v > 64 for v in values):
        raise argparse.ArgumentTypeError("worker counts must be 1..64")
    return values


def _sample(text: str) -> tuple[int, int]:
    try:
        w, k = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WORKERS:EVERY, got {text!r}") from None
    if w < 1 or k < 1:
        raise argparse.ArgumentTypeError("WORKERS and EVERY must be at least 1")
    return w, k


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="bench/fleet.py",
        description=(
            "Fleet load benchmark: the full night (light, rem, deep) over many agents on the "
            "embedded default (one SQLite file per agent), run by `dreaming run --workers N "
            "--json` for each worker count, and/or (--executor) in fleet mode: one PostgreSQL "
            "database, the nightly job enqueued for N `dreaming worker` processes; reports "
            "wall time, peak RSS of the process tree, agents/minute, sessions/s and corpus "
            "lines/s."
        ),
        epilog=(
            "Examples: .venv/bin/python bench/fleet.py --quick | .venv/bin/python "
            "bench/fleet.py --quick --executor both | .venv/bin/python bench/fleet.py "
            "--agents 1000 --sessions 50 --workers 1,2,4 --data-dir /tmp/fleet-1000x50 --json"
        ),
    )
    ap.add_argument("--agents", type=int, default=None, help=f"default {DEFAULT_AGENTS}")
    ap.add_argument(
        "--sessions",
        type=int,
        default=None,
        help=f"sessions per agent (default {DEFAULT_SESSIONS})",
    )
    ap.add_argument(
        "--workers",
        type=_worker_list,
        default=_worker_list(DEFAULT_WORKERS),
        help=f"comma-separated worker counts, one measurement each (default {DEFAULT_WORKERS})",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_AGENTS} agents x {QUICK_SESSIONS} sessions (under a minute)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--data-dir",
        type=Path,
        help="keep the generated fleet here and reuse it when the parameters match",
    )
    ap.add_argument(
        "--work-dir", type=Path, help="where the fresh state folders go (default: a temp dir)"
    )
    ap.add_argument(
        "--max-minutes",
        type=float,
        default=25.0,
        help="measure a worker count on every 4th (8th, ...) agent when the pilot predicts "
        "its full run to take longer than this; 0: never sample (default 25)",
    )
    ap.add_argument(
        "--sample",
        type=_sample,
        action="append",
        default=[],
        metavar="WORKERS:EVERY",
        help="measure this worker count on every EVERY-th agent (repeatable), e.g. 1:4",
    )
    ap.add_argument(
        "--verify", type=int, default=3, help="agents to spot-check with `dreaming verify`"
    )
    ap.add_argument(
        "--profile", action="store_true", help="also cProfile one agent's night; print hot spots"
    )
    ap.add_argument("--top", type=int, default=25, help="functions kept per profile listing")
    ap.add_argument(
        "--pin",
        metavar="REV",
        help="measure the library as committed at this git revision (say HEAD), extracted "
        "to the work dir, instead of whatever the working tree holds while the runs go on",
    )
    ap.add_argument(
        "--executor",
        choices=("in-process", "procrastinate", "both"),
        default="in-process",
        help="in-process: `dreaming run --workers N` (per-agent SQLite files); procrastinate: "
        "one PostgreSQL database, `jobs run nightly --executor procrastinate` and N `dreaming "
        "worker` processes; both: each worker count with both, in the same run (default "
        "in-process)",
    )
    ap.add_argument(
        "--database-url",
        metavar="URL",
        help="PostgreSQL server for the procrastinate runs, as postgresql://USER@HOST:PORT/DB "
        "of a role that may CREATE DATABASE (each run gets a fresh database, dropped after); "
        "default: a throwaway server started from the installed binaries (tests/pg.py)",
    )
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the state folders (and, with --database-url, the databases)",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    args = ap.parse_args(argv)
    args.agents = args.agents or (QUICK_AGENTS if args.quick else DEFAULT_AGENTS)
    args.sessions = args.sessions or (QUICK_SESSIONS if args.quick else DEFAULT_SESSIONS)
    if args.agents < 1 or args.sessions < 1:
        ap.error("--agents and --sessions must be at least 1")
    if args.database_url and args.executor == "in-process":
        ap.error("--database-url is for --executor procrastinate or both")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spec = FleetSpec(args.agents, args.sessions, args.seed)
    cores = os.cpu_count() or 1
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    data_root = args.data_dir or work / "data"
    started = time.perf_counter()
    pg: Postgres | None = None
    postgres: dict[str, Any] | None = None
    executors = EXECUTORS[args.executor]
    try:
        if "procrastinate" in executors:  # first, so a missing server costs no generating
            pg = Postgres(args.database_url)
            postgres = pg.describe()
        _log(f"fleet: {spec.agents} agents x {spec.sessions} sessions under {data_root} ...")
        fleet = ensure_fleet(spec, data_root)
        _log(
            ("  generated" if fleet.generated else "  reused")
            + f": {fleet.files:,} files, {human(fleet.total_bytes)}"
            + (f" in {fleet.generate_s:.1f} s" if fleet.generated else "")
        )
        forced = dict(args.sample)
        pilot_result = None
        if args.max_minutes > 0 and spec.agents > PILOT_MIN_FLEET:
            pilot_result = pilot(fleet, work)
        schedule = plan(
            fleet,
            args.workers,
            forced,
            pilot_result,
            args.max_minutes,
            cores,
        )
        pinned = pin_library(args.pin, work) if args.pin else None
        library = library_info(work)
        if pinned:
            library.update(commit=pinned["commit"], uncommitted_changes=False, pinned=True)
        load_start = [round(x, 2) for x in os.getloadavg()]
        runs = []
        # Worker count by worker count, both executors back to back, so a drift in the
        # machine's load touches both alike.
        for w in args.workers:
            every, est = schedule[w]
            for executor in executors:
                if executor == "in-process":
                    r = measure(fleet, work, w, every, args.verify, args.keep)
                else:
                    assert pg is not None
                    r = measure_procrastinate(fleet, work, w, every, args.verify, args.keep, pg)
                r["estimated_full_wall_s"] = est
                runs.append(r)
        base = next((r for r in runs if r["workers"] == 1 and r["executor"] == executors[0]), None)
        for r in runs:
            r["speedup"] = r["agents_per_min"] / base["agents_per_min"] if base else None
        report: dict[str, Any] = {
            "fleet": {
                "agents": spec.agents,
                "sessions_per_agent": spec.sessions,
                "sessions": fleet.files,
                "seed": spec.seed,
                "bytes": fleet.total_bytes,
                "lines": fleet.total_lines,
                "avg_session_bytes": fleet.total_bytes / fleet.files,
                "generated": fleet.generated,
                "generate_s": fleet.generate_s,
                "root": str(fleet.root),
            },
            "machine": {
                "cores": cores,
                "memory_total_bytes": psutil.virtual_memory().total,
                "loadavg_start": load_start,
                "python": sys.version.split()[0],
            },
            "library": library,
            "executor": args.executor,
            "postgres": postgres,
            "speedup_baseline": f"{executors[0]}, 1 worker" if base else None,
            "max_minutes": args.max_minutes,
            "pilot": pilot_result,
            "runs": runs,
            "profile": profile_one(fleet, work, args.top) if args.profile else None,
            "total_s": time.perf_counter() - started,
        }
    finally:
        if pg is not None:
            pg.stop()
        if not args.keep:
            if args.data_dir is None:
                shutil.rmtree(data_root, ignore_errors=True)
            if args.work_dir is None:
                shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
