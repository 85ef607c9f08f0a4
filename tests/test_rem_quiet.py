"""A quiet night's REM: when it would read exactly what an earlier run read, that run's themes
are tonight's (taken from its run record) instead of being worked out again; anything that
changes what REM reads - new input, a purge, the settings, DREAMS.md - works them out anew."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from dreaming.phases.rem import RemPhase
from tests.openclaw_builder import append
from tests.test_rem_diary import START, cli_json, night, state

pytestmark = pytest.mark.usefixtures("backend")

SAID = [
    [("user", "The walnut orchard needs netting before the crows arrive.")],
    [("user", "I checked the walnut orchard netting again this morning.")],
    [("user", "The walnut orchard gave forty kilos this year, a record.")],
]


@pytest.fixture
def worked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times REM worked its themes out (one entry per run that did)."""
    calls: list[int] = []
    themes = RemPhase._themes

    def counted(self: RemPhase, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return themes(self, *args, **kwargs)

    monkeypatch.setattr(RemPhase, "_themes", counted)
    return calls


def _shown(rem: dict[str, Any]) -> dict[str, Any]:
    return {k: rem[k] for k in ("day", "themes", "read_sessions", "candidates_in_window")}


def test_a_quiet_night_shows_the_last_dream_without_working_it_out(
    tmp_path: Path, worked: list[int]
) -> None:
    root = state(tmp_path / "s", SAID)
    first, body = night(root)
    assert first["themes"] and len(worked) == 1
    dreams = (root / "workspace" / "DREAMS.md").read_bytes()
    for _ in range(2):
        again, again_body = night(root)
        assert _shown(again) == _shown(first)
        assert again_body == body and not again["diary_written"]
    assert len(worked) == 1  # neither quiet night worked anything out
    assert (root / "workspace" / "DREAMS.md").read_bytes() == dreams


def test_new_input_works_the_themes_out_again(tmp_path: Path, worked: list[int]) -> None:
    root = state(tmp_path / "s", SAID)
    night(root)
    night(root)
    path = root / "agents" / "main" / "sessions" / "s-02.jsonl"
    later = START + dt.timedelta(days=2, hours=3)
    append(path, "user", "The walnut harvest goes to the co-op in Tavistock.", later, "late-1")
    after, _ = night(root)
    assert len(worked) == 2
    assert after["candidates_in_window"] >= 1


def test_a_purge_works_the_themes_out_again_and_keeps_no_purged_word(
    tmp_path: Path, worked: list[int]
) -> None:
    said = [*SAID, [("user", "The quince hedge by the greenhouse needs cutting back.")]]
    root = state(tmp_path / "s", said)
    night(root)
    night(root)
    report = cli_json(root, "forget", "--agent", "main", "--session", "s-00")
    assert report["counts"]["tombstones"] == 1
    after, _ = night(root)
    assert len(worked) == 2
    assert "s-00" not in after["read_sessions"]
    assert "crows" not in json.dumps(after)


def test_other_settings_work_the_themes_out_again(tmp_path: Path, worked: list[int]) -> None:
    root = state(tmp_path / "s", SAID)
    night(root)
    config = root / "dreaming.toml"
    config.write_text(config.read_text() + "\n[rem]\nlookback_days = 2\n")
    night(root)
    assert len(worked) == 2


def test_a_diary_a_person_edited_works_the_themes_out_again(
    tmp_path: Path, worked: list[int]
) -> None:
    root = state(tmp_path / "s", SAID)
    night(root)
    dreams = root / "workspace" / "DREAMS.md"
    dreams.write_text(dreams.read_text() + "\nA note of mine.\n")
    night(root)
    assert len(worked) == 2
