"""A benchmark set made of real transcripts: the OpenClaw/pi sessions in ../shared/data
(see its PROVENANCE.md), copied into as many session files as the spec asks and perturbed
so that no two copies say exactly the same thing.

Each file starts with a copy of one real session's header under a new session id (whole
sessions only: the short excerpts are left out), then that session's lines in order (again
from its start when the budget outlasts it), with:
- every ISO `timestamp` moved by whole days (the file's place in the set), so the copies
  spread over weeks of corpus days as a real agent's sessions do;
- about a third of the text blocks given one word from elsewhere in the session in place of
  one of theirs, so claims differ between copies (the same words swapped around would not:
  a claim is its set of words) while the text stays the session's own vocabulary.

Lines that are not JSON objects are copied as they are. The set has the synthetic set's shape
(`SynthSet`, the same manifest file with its own generator tag), so bench/ingest.py measures
it the same way. Needs ../shared/data; `available()` says whether it is there.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from _common import human
from _sessions import session_key, session_uuid
from _synth import MANIFEST, SynthFile, SynthSet, SynthSpec, ensure_set, save_manifest

REAL_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts" / "openclaw"
GENERATOR = "real-openclaw-1"
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
_SHIFT_DAYS = 42  # copies spread over six weeks
_WHOLE_SESSION = 64 * 1024


def sources() -> list[Path]:
    return sorted(REAL_DIR.glob("*.jsonl")) if REAL_DIR.is_dir() else []


def available() -> bool:
    return bool(sources())


class _Source:
    """One real session: its header and its other lines, parsed once."""

    def __init__(self, path: Path) -> None:
        self.header: dict[str, Any] = {}
        self.lines: list[Any] = []  # a dict per JSON object line, else the raw line (str)
        vocabulary: set[str] = set()
        with path.open(encoding="utf-8", errors="replace") as f:
            for raw in f:
                try:
                    obj = json.loads(raw)
                except ValueError:
                    self.lines.append(raw if raw.endswith("\n") else raw + "\n")
                    continue
                if isinstance(obj, dict) and obj.get("type") == "session" and not self.header:
                    self.header = obj
                    continue
                self.lines.append(obj)
                for text in _texts(obj):
                    vocabulary.update(_WORD.findall(text))
        self.vocabulary = sorted(vocabulary)


def _texts(obj: Any) -> Iterator[str]:
    msg = obj.get("message") if isinstance(obj, dict) else None
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                yield block["text"]


def _shifted(stamp: Any, days: int) -> Any:
    if not isinstance(stamp, str) or not stamp.endswith("Z"):
        return stamp
    try:
        moment = datetime.fromisoformat(stamp[:-1] + "+00:00")
    except ValueError:
        return stamp
    return (moment + timedelta(days=days)).isoformat(timespec="milliseconds")[:-6] + "Z"


def _perturbed(obj: Any, days: int, rng: random.Random, vocabulary: list[str]) -> Any:
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    if "timestamp" in out:
        out["timestamp"] = _shifted(out["timestamp"], days)
    msg = out.get("message")
    if isinstance(msg, dict) and vocabulary:
        content = msg.get("content")
        if isinstance(content, str):
            out["message"] = {**msg, "content": _nudged(content, rng, vocabulary)}
        elif isinstance(content, list):
            blocks = [
                {**b, "text": _nudged(b["text"], rng, vocabulary)}
                if isinstance(b, dict)
                and b.get("type") == "text"
                and isinstance(b.get("text"), str)
                else b
                for b in content
            ]
            out["message"] = {**msg, "content": blocks}
    return out


def _nudged(text: str, rng: random.Random, vocabulary: list[str]) -> str:
    if rng.random() >= 0.35:
        return text
    found = list(_WORD.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    return text[: m.start()] + rng.choice(vocabulary) + text[m.end() :]


def generate(spec: SynthSpec, root: Path, log: Callable[[str], None] = print) -> SynthSet:
    """Write the set under `root` (its `agents/` folder and manifest are replaced)."""
    import shutil

    started = time.perf_counter()
    found = sources()
    if not found:
        raise SystemExit(f"--real needs the real transcripts in {REAL_DIR} (see PROVENANCE.md)")
    # Whole sessions only: an excerpt of a few lines, cycled up to a session's budget, would
    # be one exchange said a hundred times, which no agent's transcript is.
    real = [_Source(p) for p in found if p.stat().st_size >= _WHOLE_SESSION]
    if not real:
        raise SystemExit(f"--real found no whole session (>= 64 KiB) in {REAL_DIR}")
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(root / "agents", ignore_errors=True)
    n = spec.agents * spec.sessions_per_agent
    budget = max(4096, spec.total_bytes // n)
    out = SynthSet(root=root, spec=spec, generated=True, kind="real")
    last_report = started
    for a in range(spec.agents):
        agent = f"agent{a + 1}"
        folder = root / "agents" / agent / "sessions"
        folder.mkdir(parents=True)
        index: dict[str, Any] = {}
        for i in range(spec.sessions_per_agent):
            k = a * spec.sessions_per_agent + i
            rng = random.Random(f"{spec.seed}/real/{k}")
            source = real[k % len(real)]
            session_id = session_uuid(rng)
            days = k % _SHIFT_DAYS
            header = {**source.header, "id": session_id}
            header["timestamp"] = _shifted(header.get("timestamp"), days)
            path = folder / f"{session_id}.jsonl"
            written, lines = _write(path, header, source, budget, days, rng)
            key, extra = session_key(agent, i, rng)  # the synthetic set's direct chats
            index[key] = {"sessionId": session_id, "sessionFile": str(path), **extra}
            out.files.append(
                SynthFile(agent, session_id, str(path.relative_to(root)), written, lines)
            )
            if time.perf_counter() - last_report > 5:
                last_report = time.perf_counter()
                log(f"  copying: {human(out.total_bytes)} of {human(spec.total_bytes)} ...")
        (folder / "sessions.json").write_text(json.dumps(index, indent=2), encoding="utf-8")
    out.generate_s = time.perf_counter() - started
    save_manifest(out, GENERATOR)
    return out


def _write(
    path: Path, header: dict[str, Any], source: _Source, budget: int, days: int, rng: random.Random
) -> tuple[int, int]:
    written = lines = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        written += f.write(json.dumps(header, ensure_ascii=False) + "\n")
        lines += 1
        while written < budget:
            for obj in source.lines:
                line = (
                    obj
                    if isinstance(obj, str)
                    else json.dumps(
                        _perturbed(obj, days, rng, source.vocabulary), ensure_ascii=False
                    )
                    + "\n"
                )
                written += len(line.encode("utf-8"))
                f.write(line)
                lines += 1
                if written >= budget:
                    break
    return path.stat().st_size, lines


def ensure_real_set(spec: SynthSpec, root: Path, log: Callable[[str], None] = print) -> SynthSet:
    """Reuse the set under `root` if this module made it for `spec`, else build it there
    (`_synth.ensure_set`, which refuses a non-empty folder that holds no benchmark set)."""
    return ensure_set(spec, root, log, generator=GENERATOR, make=generate, kind="real")
