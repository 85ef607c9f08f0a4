"""Light reads the candidate folder (every candidate's tokens, the held entries, MEMORY.md's
keys, DREAMS.md's lines) only when it has lines to fold. An unreadable DREAMS.md still fails
the run at its start, before anything commits, as when the folder was read first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dreaming import runner
from dreaming.app import App
from dreaming.ingest.candidates import Folder
from dreaming.runner import AgentResult, Phase
from tests.openclaw_builder import FakeOpenClaw, append

DAY = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _light(root: Path) -> AgentResult:
    app = App.open(root, None, env={})
    try:
        [result] = runner.run(app, [Phase.LIGHT], None)
    finally:
        app.close()
    return result


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The agents whose folder was read, in order."""
    seen: list[str] = []
    real = Folder.load.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Folder], conn: Any, agent: str, *args: Any, **kwargs: Any) -> Folder:
        seen.append(agent)
        return real(cls, conn, agent, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(Folder, "load", classmethod(counted))
    return seen


def _session(root: Path) -> Path:
    turns = [("user", "My sister Anna lives in Lisbon."), ("user", "I'm allergic to peanuts.")]
    return FakeOpenClaw(root).session("main", "s1", turns, start=DAY)


def test_a_night_with_nothing_new_reads_no_folder(tmp_path: Path, loads: list[str]) -> None:
    root = tmp_path / "state"
    path = _session(root)
    first = _light(root)
    assert first.outcome == "ok" and loads == ["main"]
    quiet = _light(root)
    assert quiet.outcome == "ok" and loads == ["main"]  # nothing new: not read
    assert quiet.phase_dicts()["light"]["corpus_lines"] == 0
    append(path, "user", "My brother Tom lives in Porto.", DAY + timedelta(hours=1), "s1-9")
    more = _light(root)
    assert more.outcome == "ok" and loads == ["main", "main"]
    assert more.phase_dicts()["light"]["corpus_lines"] == 1


def test_an_unreadable_dreams_file_fails_light_with_nothing_new(tmp_path: Path) -> None:
    root = tmp_path / "state"
    _session(root)
    assert _light(root).outcome == "ok"
    (root / "workspace" / "DREAMS.md").write_bytes(b"# DREAMS.md\n\xff\xfe not text\n")
    failed = _light(root)
    assert failed.outcome == "failed"
    assert "DREAMS.md" in (failed.error or "") and "UTF-8" in (failed.error or "")
