"""`dreaming verify` passes on a clean night and names each kind of violation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from dreaming import runner
from dreaming.cli import cli
from dreaming.memory import memory_file as mf
from tests.deep_helpers import build_state, open_app

# Every test here runs on per-agent SQLite files and on a fleet's PostgreSQL database.
pytestmark = pytest.mark.usefixtures("backend")


def verify(root: Path) -> tuple[int, str]:
    from dreaming.cli import _verify  # noqa: F401

    result = CliRunner().invoke(
        cli, ["--state-dir", str(root), "--config", str(root / "dreaming.toml"), "verify"]
    )
    return result.exit_code, result.output


@pytest.fixture
def night(tmp_path: Path) -> Path:
    root = build_state(tmp_path / "s")
    app = open_app(root)
    runner.run(app, ["light", "rem", "deep"])
    app.close()
    return root


def sql(root: Path, statement: str) -> None:
    app = open_app(root)
    with app.engine("main").begin() as conn:
        conn.execute(text(statement))
    app.close()


def test_clean_night_verifies(night: Path) -> None:
    assert verify(night) == (0, "agent bob: ok\nagent main: ok\n")


def _drop_block(root: Path) -> None:
    path = root / "workspace/MEMORY.md"
    block = mf.read(path).blocks[0]
    path.write_text(path.read_text().replace(block.raw, ""))


def _orphan_origin(root: Path) -> None:
    sql(
        root,
        "INSERT INTO origins VALUES "
        "('main', 'm:00000000000000aa', 's-main-01', NULL, 'owner', NULL)",
    )


def _unsourced(root: Path) -> None:
    sql(root, "DELETE FROM origins WHERE entry_key = (SELECT key FROM entries LIMIT 1)")


def _tombstoned(root: Path) -> None:
    sql(
        root,
        "INSERT INTO tombstones (agent, session_id, reason, created_at) "
        "VALUES ('main', 's-main-01', 'forgotten', '2026-03-20')",
    )


def _index(root: Path) -> None:
    sql(root, "DELETE FROM entries_fts WHERE key = (SELECT key FROM entries LIMIT 1)")


def _corpus(root: Path) -> None:
    folder = root / "workspace/memory/.dreams/session-corpus"
    next(folder.glob("*.txt")).write_text("[main/sessions/main/x#L1] invented\n")


@pytest.mark.parametrize(
    ("tamper", "check"),
    [
        (_drop_block, "memory_file"),
        (_orphan_origin, "orphan_origins"),
        (_unsourced, "entries_without_origins"),
        (_tombstoned, "tombstoned_sessions"),
        (_index, "search_index"),
        (_corpus, "corpus_files"),
    ],
)
def test_each_violation_is_named(night: Path, tamper: Callable[[Path], None], check: str) -> None:
    tamper(night)
    code, output = verify(night)
    assert code == 1
    assert f"violation: {check}:" in output


def test_person_edit_is_a_note_not_a_violation(night: Path) -> None:
    path = night / "workspace/MEMORY.md"
    block = mf.read(path).blocks[0]
    path.write_text(path.read_text().replace(block.text, block.text + " (edited)"))
    code, output = verify(night)
    assert code == 0
    assert "note: MEMORY.md block" in output


def test_an_entry_line_written_twice_is_named_once(night: Path) -> None:
    path = night / "workspace/MEMORY.md"
    blocks = mf.read(path).blocks
    first, second = blocks[0], blocks[1]
    content = path.read_text()
    # The first line three times and the second twice, in a file of many lines.
    content = content.replace(first.raw, first.raw * 3).replace(second.raw, second.raw * 2)
    path.write_text(content)
    code, output = verify(night)
    assert code == 1
    named = [line for line in output.splitlines() if "appears more than once" in line]
    assert len(named) == 2, output
    assert all(f"block {b.key} appears more than once" in output for b in (first, second))
