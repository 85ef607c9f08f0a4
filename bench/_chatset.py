"""A chat-dense benchmark set: many short sessions of short turns, as a messaging agent's
owner writes them (the forget bench's transcripts, bench/_forget_data.py).

The synthetic and real sets are coding sessions: most of their bytes are tool output, which
light reads past, and a corpus line comes every few KB. Here every line is speech: a user
states one or two facts (each said in one to four sessions), sometimes asks something, the
agent acknowledges; sessions of about 3.5 KB and a dozen turns. Per MB that is about six
times the corpus lines of the synthetic set and eighteen times the real one's, and most of
what the owner says is said once, so nearly every owner line makes a candidate: light's
work per line (claims, folding, the rescore), not its parsing, is what this set measures.

The set has the synthetic set's shape (`SynthSet`, the same manifest file with its own
generator tag). `--size` sets the number of sessions (`SESSION_BYTES` each, spread over
`--agents`), so the size is about right from some thousands of sessions on (a small set's
code names are shorter); `--sessions-per-agent` is not used.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from _forget_data import write_transcripts
from _synth import MANIFEST, SynthFile, SynthSet, SynthSpec, ensure_set, save_manifest

GENERATOR = "chat-1"
SESSION_BYTES = 3_500  # what the forget bench's 10,000 sessions average
ENTRIES_PER_SESSION = 2  # facts enough for two entries a session, as the forget bench


def sessions_per_agent(spec: SynthSpec) -> int:
    return max(1, round(spec.total_bytes / SESSION_BYTES / spec.agents))


def generate(spec: SynthSpec, root: Path, log: Callable[[str], None] = print) -> SynthSet:
    """Write the set under `root` (its `agents/` folder and manifest are replaced)."""
    started = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(root / "agents", ignore_errors=True)
    n = sessions_per_agent(spec)
    out = SynthSet(root=root, spec=spec, generated=True, kind="chat")
    for a in range(spec.agents):
        agent = f"agent{a + 1}"
        log(f"  writing {n:,} chat sessions of {agent} ...")
        write_transcripts(root, n, n * ENTRIES_PER_SESSION, f"{spec.seed}/{agent}", agent)
        for path in sorted((root / "agents" / agent / "sessions").glob("*.jsonl")):
            data = path.read_bytes()
            rel = str(path.relative_to(root))
            out.files.append(SynthFile(agent, path.stem, rel, len(data), data.count(b"\n")))
    out.generate_s = time.perf_counter() - started
    save_manifest(out, GENERATOR)
    return out


def ensure_chat_set(spec: SynthSpec, root: Path, log: Callable[[str], None] = print) -> SynthSet:
    """Reuse the set under `root` if this module made it for `spec`, else build it there
    (`_synth.ensure_set`, which refuses a non-empty folder that holds no benchmark set)."""
    return ensure_set(spec, root, log, generator=GENERATOR, make=generate, kind="chat")
