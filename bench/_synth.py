"""Deterministic synthetic OpenClaw transcript sets for the ingestion benchmark.

A set is an OpenClaw root, `<root>/agents/<agentId>/sessions/<sessionId>.jsonl` plus a
`sessions.json` per agent, shaped like real coding-agent sessions:

- a v3 session header, then `model_change` / `thinking_level_change` / `custom` lines and
  the odd `compaction`, every line with `id`, `parentId` and an ISO timestamp;
- turns: a user message (sometimes behind injected blocks: `<relevant_memories>`, an
  OpenClaw "Sender (untrusted metadata):" fenced JSON header with an envelope timestamp, an
  `<<<EXTERNAL_UNTRUSTED_CONTENT id=..>>>` wrapper), then assistant steps (thinking, a short
  narration, tool calls: read/bash/edit/write/grep) each followed by its `toolResult`, then a
  final assistant reply;
- most bytes are tool output and tool arguments (file contents, test logs, grep hits), as in
  real sessions; speech is a few percent of the bytes;
- speech repeats a per-agent pool of facts (with small paraphrases) and chit-chat, so claims
  fold, next to requests, narration and some one-off sentences that make new candidates;
- sessions start at random times over six weeks and run for hours.

Everything is drawn from `random.Random` seeded by (seed, agent, session), so a spec always
yields byte-identical files. `ensure_set` writes a manifest last and reuses a folder whose
manifest matches the spec. The words come from _vocab.py, the sessions' lines from
_sessions.py (`CodingSession`); this module owns the set: its spec, files and manifest.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _common import human
from _sessions import CodingSession, session_key, session_uuid
from _vocab import (
    _AGENT_NAMES,
    _FACT_TEMPLATES,
    _PROJECTS,
    _code_corpus,
    _fill,
    _log_corpus,
    _prose_corpus,
    _Slicer,
)

GENERATOR_VERSION = 1
MANIFEST = "bench-set.json"

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}


def parse_size(text: str) -> int:
    """'200MB', '1GB', '1.5gb', '512MiB', '1000000' -> bytes (MB/GB are decimal)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (try 64MB, 200MB, 1GB, 512MiB)")
    size = int(float(m.group(1)) * _UNITS[unit])
    if size <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return size


@dataclass(frozen=True)
class SynthSpec:
    total_bytes: int
    agents: int = 4
    sessions_per_agent: int = 32
    seed: int = 1

    def __post_init__(self) -> None:
        if self.agents < 1 or self.sessions_per_agent < 1:
            raise ValueError("agents and sessions per agent must be at least 1")


@dataclass
class SynthFile:
    agent: str
    session_id: str
    path: str  # relative to the set's root
    bytes: int
    lines: int


@dataclass
class SynthSet:
    root: Path
    spec: SynthSpec
    files: list[SynthFile] = field(default_factory=list)
    generate_s: float = 0.0
    generated: bool = False  # False: reused from an earlier run
    # "synthetic" (this module's), "real" (copies of real transcripts, bench/_realset.py) or
    # "chat" (many short chat sessions, bench/_chatset.py)
    kind: str = "synthetic"

    @property
    def real(self) -> bool:
        return self.kind == "real"

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    @property
    def total_lines(self) -> int:
        return sum(f.lines for f in self.files)

    def agent_ids(self) -> list[str]:
        return sorted({f.agent for f in self.files})


# --------------------------------------------------------------------------- the set


def _agent_ids(n: int) -> list[str]:
    return [_AGENT_NAMES[i] if i < len(_AGENT_NAMES) else f"agent{i + 1}" for i in range(n)]


def _budgets(spec: SynthSpec) -> list[int]:
    """Per-file byte budgets: uneven (x0.3 .. x1.7 of the mean), summing to the total."""
    rng = random.Random(f"{spec.seed}/budgets")
    n = spec.agents * spec.sessions_per_agent
    weights = [rng.uniform(0.3, 1.7) for _ in range(n)]
    scale = spec.total_bytes / sum(weights)
    return [max(4096, int(w * scale)) for w in weights]


def _write_session(
    path: Path,
    budget: int,
    session: CodingSession,
) -> int:
    written = 0
    with open(path, "wb", buffering=1 << 20) as f:
        write: Callable[[bytes], int] = f.write
        for line in (session.header(session.cwd), *session.preamble()):
            written += write(line)
        while written < budget:
            for line in session.turn():
                written += write(line)
                if written >= budget:
                    break
    return written


def generate(spec: SynthSpec, root: Path, log: Callable[[str], None] = print) -> SynthSet:
    """Write a fresh set under `root` (its `agents/` folder and manifest are replaced)."""
    started = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(root / "agents", ignore_errors=True)
    corpus_rng = random.Random(f"{spec.seed}/corpus")
    code = _Slicer(_code_corpus(corpus_rng, 4_000_000))
    logs = _Slicer(_log_corpus(corpus_rng, 2_000_000))
    prose = _Slicer(_prose_corpus(corpus_rng, 1_000_000))
    budgets = iter(_budgets(spec))
    out = SynthSet(root=root, spec=spec, generated=True)
    last_report = started
    for agent in _agent_ids(spec.agents):
        sessions_dir = root / "agents" / agent / "sessions"
        sessions_dir.mkdir(parents=True)
        agent_rng = random.Random(f"{spec.seed}/{agent}/facts")
        facts = [_fill(agent_rng.choice(_FACT_TEMPLATES), agent_rng) for _ in range(30)]
        index: dict[str, Any] = {}
        for i in range(spec.sessions_per_agent):
            rng = random.Random(f"{spec.seed}/{agent}/{i}")
            session_id = session_uuid(rng)
            cwd = f"/home/dev/projects/{rng.choice(_PROJECTS)}"
            session = CodingSession(rng, facts, code, logs, prose, session_id, cwd)
            path = sessions_dir / f"{session_id}.jsonl"
            size = _write_session(path, next(budgets), session)
            key, extra = session_key(agent, i, rng)
            index[key] = {
                "sessionId": session_id,
                "sessionFile": str(path),
                "updatedAt": session.ms,
                **extra,
            }
            out.files.append(
                SynthFile(agent, session_id, str(path.relative_to(root)), size, session.lines)
            )
            now = time.perf_counter()
            if now - last_report > 5:
                last_report = now
                done = out.total_bytes
                log(f"  generating: {human(done)} of {human(spec.total_bytes)} ...")
        with open(sessions_dir / "sessions.json", "w", encoding="utf-8") as f:
            json.dump(index, f, indent=2)
    out.generate_s = time.perf_counter() - started
    save_manifest(out, GENERATOR_VERSION)
    return out


def save_manifest(made: SynthSet, generator: str | int) -> None:
    """Record a set just made under its root (what `load` checks a reuse against)."""
    manifest = {
        "generator_version": generator,
        "spec": asdict(made.spec),
        "generate_s": made.generate_s,
        "files": [asdict(f) for f in made.files],
    }
    tmp = made.root / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    os.replace(tmp, made.root / MANIFEST)


def load(
    spec: SynthSpec, root: Path, generator: str | int = GENERATOR_VERSION, kind: str = "synthetic"
) -> SynthSet | None:
    """The set already under `root` when its manifest matches `spec` and the generator that
    made it (a real-transcript set is `bench/_realset.py`'s), and its files are intact."""
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if manifest.get("generator_version") != generator:
        return None
    if manifest.get("spec") != asdict(spec):
        return None
    files = [SynthFile(**f) for f in manifest["files"]]
    for f in files:
        try:
            if (root / f.path).stat().st_size != f.bytes:
                return None
        except OSError:
            return None
    return SynthSet(
        root=root,
        spec=spec,
        files=files,
        generate_s=manifest.get("generate_s", 0),
        kind=kind,
    )


def ensure_set(
    spec: SynthSpec,
    root: Path,
    log: Callable[[str], None] = print,
    *,
    generator: str | int = GENERATOR_VERSION,
    make: Callable[[SynthSpec, Path, Callable[[str], None]], SynthSet] | None = None,
    kind: str = "synthetic",
) -> SynthSet:
    """Reuse the set under `root` if `generator` made it for `spec`, else make it there
    (`make`: this module's `generate` unless another generator's is given).

    Refuses to write into a non-empty folder that holds no set of ours, so a mistyped
    --data-dir never deletes anything.
    """
    found = load(spec, root, generator, kind)
    if found is not None:
        return found
    if root.exists() and any(root.iterdir()) and not (root / MANIFEST).exists():
        raise SystemExit(f"{root} is not empty and holds no benchmark set; pick another folder")
    return (make or generate)(spec, root, log)
