"""The readers on real transcripts from ../shared/data (skipped when that folder is absent)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from dreaming.ingest.transcripts import TranscriptReader, detect_format, discover_claude_code
from dreaming.messages import Format, Kind, Role, SessionKind

from .transcript_builders import read

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TRANSCRIPTS = DATA / "transcripts"
SPOTTER = TRANSCRIPTS / "claude-code" / "spotter"
BIG_SESSION = "4d5611e5-241a-462a-8d15-5122611a9569"

pytestmark = pytest.mark.skipif(
    not TRANSCRIPTS.is_dir(),
    reason=f"real transcripts not found at {TRANSCRIPTS} (shared data lives beside the repo)",
)


def _all_files() -> list[Path]:
    return sorted(TRANSCRIPTS.rglob("*.jsonl")) if TRANSCRIPTS.is_dir() else []


@pytest.mark.parametrize("path", _all_files(), ids=lambda p: p.name)
def test_every_real_file_reads_cleanly(path: Path) -> None:
    expected = Format.OPENCLAW if "openclaw" in path.parts else Format.CLAUDE_CODE
    assert detect_format(path) is expected
    messages, reader = read(path)
    assert reader.format is expected
    assert reader.cursor.offset == path.stat().st_size
    assert messages
    lines = [m.line for m in messages]
    assert lines == sorted(lines)
    assert all(1 <= n <= reader.cursor.line for n in lines)
    assert all(m.blocks or m.writes for m in messages)
    assert all(m.timestamp is None or m.timestamp.utcoffset() is not None for m in messages)
    # Rereading from the cursor yields nothing.
    again, _ = read(path, start=reader.cursor)
    assert again == []


def test_pi_v1_before_compaction_user_messages() -> None:
    path = TRANSCRIPTS / "openclaw" / "pi-v1-before-compaction.jsonl"
    messages, reader = read(path)
    roles = Counter(m.role for m in messages)
    assert roles[Role.USER] == 55
    assert 300 <= roles[Role.ASSISTANT] <= 484
    assert reader.cursor.line == 1003
    assert not reader.skips
    assert all(m.kind is Kind.SPEECH and m.message_id is None for m in messages)
    assert any(m.writes for m in messages)


def test_openclaw_v3_excerpt() -> None:
    path = TRANSCRIPTS / "openclaw" / "openclaw-v3-real-excerpt.jsonl"
    messages, reader = read(path)
    assert not reader.skips
    users = [m for m in messages if m.role is Role.USER]
    assert len(users) == 4
    assert all(m.message_id for m in messages)  # v3 lines carry ids
    # The error reply with content [] yields nothing; the "failed before reply" text does.
    assert messages[0].line == 2 and messages[0].role is Role.ASSISTANT


def test_claude_code_big_session_real_prompts_and_harness_lines() -> None:
    path = SPOTTER / f"{BIG_SESSION}.jsonl"
    messages, reader = read(path)
    assert not reader.skips
    speech = [m for m in messages if m.role is Role.USER and m.kind is Kind.SPEECH]
    harness = [m for m in messages if m.kind is Kind.HARNESS]
    assert 1 <= len(speech) <= 5
    assert speech[0].text.startswith("Work on bead spotter-dov")
    assert any(m.text.startswith("This session is being continued") for m in harness)
    assert any(m.text.startswith("<task-notification>") for m in harness)
    # Lines of one API message were joined: fewer assistant messages than assistant lines.
    assistant = [m for m in messages if m.role is Role.ASSISTANT]
    ids = [m.message_id for m in assistant]
    assert len(ids) == len(set(ids))
    assert any(m.writes for m in assistant)


def test_claude_code_harness_lines_in_small_sessions() -> None:
    messages, _ = read(SPOTTER / "tool_heavy.jsonl")
    users = [(m.kind, m.text[:30]) for m in messages if m.role is Role.USER]
    assert (Kind.SPEECH, "start phoenix in background") in users
    kinds = Counter(kind for kind, _ in users)
    assert kinds[Kind.HARNESS] >= 4  # interruptions, caveat, /mcp command, its stdout
    messages, _ = read(SPOTTER / "subagent.jsonl")
    prompts = [m.text for m in messages if m.role is Role.USER and m.kind is Kind.SPEECH]
    assert prompts == ["create the beads"]


def test_claude_code_edge_cases_fixture_counts_its_garbage() -> None:
    messages, reader = read(TRANSCRIPTS / "claude-code" / "claude-code-log" / "edge_cases.jsonl")
    assert reader.skips["not-an-object"] == 3
    assert reader.skips["unknown-line-type"] == 2
    harness = [m.text[:20] for m in messages if m.kind is Kind.HARNESS]
    assert len(harness) == 3


def test_claude_code_discovery_on_the_spotter_folder() -> None:
    found = {s.session_id: s for s in discover_claude_code(SPOTTER, "claude")}
    assert found["agent-acompact-e1f845"].kind is SessionKind.COMPACTION
    assert found["agent-a2898e3"].kind is SessionKind.SUBAGENT
    assert found["agent-a2898e3"].extra["parent_session"] == BIG_SESSION
    assert found[BIG_SESSION].kind is SessionKind.INTERACTIVE
    for info in found.values():
        assert list(TranscriptReader(info))
