"""Acceptance: the light phase on the real transcripts in ../shared/data (skipped if absent)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from dreaming.cli import cli


def build_state(tmp_path: Path, shared_data: Path) -> Path:
    state = tmp_path / "S"
    sessions = state / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    for f in (shared_data / "transcripts" / "openclaw").glob("*.jsonl"):
        shutil.copy(f, sessions / f.name)
    (state / "dreaming.toml").write_text(
        "[[sources]]\nkind = 'claude-code'\n"
        f"path = '{shared_data / 'transcripts' / 'claude-code'}'\nagent = 'claude'\n"
        # Pooled, as before per-project agents: nothing is written beside the shared files
        # (tests/test_claude_projects.py has the per-project night, on a copy).
        "per_project = false\n"
    )
    return state


def light(state: Path) -> dict[str, dict]:
    from dreaming.cli import _run  # noqa: F401

    result = CliRunner().invoke(
        cli,
        ["--state-dir", str(state), "run", "--phase", "light", "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return {name: a["light"] for name, a in json.loads(result.stdout)["agents"].items()}


def corpus(state: Path) -> str:
    return "".join(
        p.read_text() for p in sorted(state.glob("workspace*/memory/.dreams/session-corpus/*.txt"))
    )


def test_real_transcripts_make_a_clean_corpus(tmp_path: Path, shared_data: Path) -> None:
    state = build_state(tmp_path, shared_data)
    out = light(state)
    assert set(out) == {"main", "claude"}
    assert out["main"]["corpus_lines"] > 500
    assert out["claude"]["corpus_lines"] > 50
    # Per-reason skip counts are reported (the claude-code-log edge cases hold non-object lines).
    assert out["claude"]["skips"].get("not-an-object", 0) >= 1
    assert out["claude"]["sessions"]["not_admitted"] == {"internal:compaction": 1}
    text = corpus(state)
    for banned in (
        "<system-reminder>",
        "system-reminder",
        "untrusted metadata",
        '"label":',
        "openclaw-control-ui",
        "<local-command-caveat>",
        "<command-name>",
    ):
        assert banned not in text, banned
    # The user's own words around injected blocks survive.
    assert "Please review the change." in text
    assert "The tail content still renders as user text." in text
    assert "[Sun 2026-03-08 22:03 GMT+9] はくあ" in text
    assert "MEMORY.md以外の変更を禁ずる" in text


def test_real_transcripts_rerun_is_a_noop_and_append_adds_one(
    tmp_path: Path, shared_data: Path
) -> None:
    state = build_state(tmp_path, shared_data)
    light(state)
    before = corpus(state)
    again = light(state)
    assert all(a["corpus_lines"] == 0 for a in again.values())
    assert corpus(state) == before
    path = state / "agents/main/sessions/openclaw-v3-real-excerpt.jsonl"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(
            json.dumps(
                {
                    "type": "message",
                    "id": "zz1",
                    "parentId": "x",
                    "timestamp": "2026-03-08T14:10:00.000Z",
                    "message": {
                        "role": "user",
                        "content": [{"type": "text", "text": "My cat is named Mochi."}],
                    },
                }
            )
            + "\n"
        )
    third = light(state)
    assert third["main"]["corpus_lines"] == 1
    assert third["claude"]["corpus_lines"] == 0
    assert corpus(state).count("\n") == before.count("\n") + 1
