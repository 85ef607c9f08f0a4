"""bench/ingest.py --chat: a chat-dense set of many short sessions, every line speech, which
light reads like any agent's sessions."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench_support import bench_module, light_over


@pytest.fixture(scope="module")
def chatset() -> ModuleType:
    return bench_module("_chatset")


def test_the_chat_set_is_many_short_sessions_light_reads(
    chatset: ModuleType, tmp_path: Path
) -> None:
    from _synth import SynthSpec

    spec = SynthSpec(total_bytes=200_000, agents=2, sessions_per_agent=1, seed=3)
    root = tmp_path / "set"
    made = chatset.ensure_chat_set(spec, root, log=lambda _msg: None)
    n = chatset.sessions_per_agent(spec)
    assert made.generated and made.kind == "chat" and not made.real
    assert len(made.files) == 2 * n and n == 29  # 200 KB of ~3.5 KB sessions
    assert {f.agent for f in made.files} == {"agent1", "agent2"}
    assert 100_000 < made.total_bytes < 250_000  # about: a small set's names are shorter
    for f in made.files:
        lines = (root / f.path).read_text(encoding="utf-8").splitlines()
        assert len(lines) == f.lines and (root / f.path).stat().st_size == f.bytes
        assert json.loads(lines[0])["type"] == "session"
        assert all(json.loads(x)["type"] == "message" for x in lines[1:])
    # The two agents say different things; the same spec writes the same bytes.
    one, other = (root / "agents" / a / "sessions" for a in ("agent1", "agent2"))
    assert {p.name for p in one.glob("*.jsonl")}.isdisjoint(p.name for p in other.glob("*.jsonl"))
    again_root = tmp_path / "again"
    again = chatset.ensure_chat_set(spec, again_root, log=lambda _msg: None)
    assert [(root / f.path).read_bytes() for f in made.files] == [
        (again_root / f.path).read_bytes() for f in again.files
    ]
    # Reused when it matches, as a chat set; never taken for another kind of set.
    reused = chatset.ensure_chat_set(spec, root, log=lambda _msg: None)
    assert not reused.generated and reused.kind == "chat"
    from _synth import load

    assert load(spec, root) is None  # not a synthetic set of that spec
    ingest = bench_module("ingest")
    shown = ingest._data_report(made, spec)
    assert (shown["kind"], shown["files"], shown["sessions_per_agent"]) == ("chat", 2 * n, n)

    out = light_over(root / "agents", tmp_path / "state")
    assert sum(a["sessions"]["read"] for a in out) == 2 * n
    # Nearly every line is speech: a corpus line for each message.
    assert sum(a["corpus_lines"] for a in out) == made.total_lines - len(made.files)
    assert sum(a["candidates"]["new"] for a in out) > n
    assert all(not a["skips"] for a in out)


def test_real_and_chat_are_refused_together() -> None:
    ingest = bench_module("ingest")
    with pytest.raises(SystemExit) as stop:
        ingest.main(["--real", "--chat", "--size", "1MB"])
    assert stop.value.code == 2
