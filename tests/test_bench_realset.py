"""bench/ingest.py --real: a set of perturbed copies of the real OpenClaw/pi sessions, which
light reads like any agent's sessions (needs ../shared/data; skipped without it)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench_support import bench_module, light_over


@pytest.fixture(scope="module")
def realset() -> ModuleType:
    module = bench_module("_realset")
    if not module.available():
        pytest.skip(f"no real transcripts in {module.REAL_DIR}")
    return module


def test_the_real_set_is_perturbed_copies_light_reads(realset: ModuleType, tmp_path: Path) -> None:
    from _synth import SynthSpec

    spec = SynthSpec(total_bytes=600_000, agents=2, sessions_per_agent=3, seed=5)
    root = tmp_path / "set"
    made = realset.ensure_real_set(spec, root, log=lambda _msg: None)
    assert made.generated and made.real and len(made.files) == 6
    assert len({f.session_id for f in made.files}) == 6
    for f in made.files:
        header = json.loads((root / f.path).read_text(encoding="utf-8").splitlines()[0])
        assert header["type"] == "session" and header["id"] == f.session_id
        assert (root / f.path).stat().st_size == f.bytes
    # Two copies of one source (every len(sources)-th file) say different things, on other days.
    step = len([p for p in realset.sources() if p.stat().st_size >= realset._WHOLE_SESSION])
    one, other = (
        [json.loads(x) for x in (root / made.files[k].path).read_text("utf-8").splitlines()]
        for k in (0, step)
    )
    assert one[1]["timestamp"] != other[1]["timestamp"]
    assert [x.get("message") for x in one] != [x.get("message") for x in other]
    # Reused when it matches, never regenerated.
    again = realset.ensure_real_set(spec, root, log=lambda _msg: None)
    assert not again.generated and [f.path for f in again.files] == [f.path for f in made.files]

    out = light_over(root / "agents", tmp_path / "state")
    assert sum(a["sessions"]["read"] for a in out) == 6
    assert sum(a["corpus_lines"] for a in out) > 0
    assert all(not a["skips"] for a in out)
