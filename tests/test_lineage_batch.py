"""A batch of decisions applied together leaves what applying them one by one leaves: the
batch reads once and writes together, but a decision still sees what the ones before it did
(an add of a key the batch just added, a merge into it, a supersede of it)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dreaming import demo
from dreaming.cli import _run, cli  # noqa: F401  (register)
from dreaming.memory import lineage
from dreaming.memory.decisions import Action
from dreaming.memory.memory_file import entry_key
from dreaming.runs import start_run
from dreaming.store import open_engine


def _lit(tmp_path: Path) -> Path:
    root = demo.build(tmp_path / "demo")
    done = CliRunner().invoke(cli, ["--state-dir", str(root), "run", "--phase", "light"])
    assert done.exit_code == 0, done.output
    return root


def _decisions(db: Path) -> list[lineage.Applied]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, key FROM candidates ORDER BY id LIMIT 8").fetchall()
    assert len(rows) == 8
    c = [(int(i), str(k)) for i, k in rows]

    def d(n: int, action: Action, text: str | None, *targets: str, **kw: Any) -> lineage.Applied:
        return lineage.Applied(c[n][0], c[n][1], action, targets, text, "deterministic", **kw)

    a, b = "Alice runs the billing migration.", "The staging bucket is in Frankfurt."
    return [
        d(0, Action.ADD, a),
        d(1, Action.ADD, a),  # the same text: the entry the batch just added grows
        d(2, Action.MERGE, "Alice runs the billing migration now.", entry_key(a)),
        d(3, Action.ADD, b, also=((c[4][0], c[4][1]),)),
        d(5, Action.SUPERSEDE, "The staging bucket moved to Dublin.", entry_key(b)),
        d(6, Action.SKIP, None),
        d(7, Action.ADD, "Ask Dmitri before any deploy."),
    ]


def _apply(root: Path, together: bool) -> dict[str, list[Any]]:
    db = root / "dreaming" / "agents" / "main.sqlite"
    decisions = _decisions(db)
    engine = open_engine(db)
    try:
        run_id = start_run(engine, "main", ["deep"], None)
        with engine.begin() as conn:
            groups = [decisions] if together else [[d] for d in decisions]
            keys = [k for g in groups for k in lineage.apply_batch(conn, "main", g, run_id)]
    finally:
        engine.dispose()
    with sqlite3.connect(db) as conn:

        def q(sql: str) -> list[Any]:
            return conn.execute(sql).fetchall()

        return {
            "keys": keys,
            "entries": q("SELECT key, text, status, recall_count FROM entries ORDER BY key"),
            "origins": q("SELECT entry_key, session_id, origin_class FROM origins ORDER BY 1, 2"),
            "evidence": q("SELECT entry_key, session_id, line FROM entry_evidence ORDER BY 1,2,3"),
            "index": q(
                "SELECT f.key, f.text, r.key FROM entries_fts f"
                " LEFT JOIN entry_index_rows r ON r.fts_rowid = f.rowid ORDER BY f.key"
            ),
            "index_rows": q("SELECT key FROM entry_index_rows ORDER BY key"),
            "journal": q("SELECT kind, ref, before, sessions FROM entry_journal ORDER BY 1, 2"),
            "superseded": q("SELECT new_key, old_key FROM supersessions ORDER BY 1, 2"),
            "decisions": q(
                "SELECT candidate_key, action, targets, entry_key FROM decisions ORDER BY id"
            ),
            "candidates": q("SELECT id, status, decided_evidence FROM candidates ORDER BY id"),
        }


def test_a_batch_applied_together_equals_one_decision_at_a_time(tmp_path: Path) -> None:
    base = _lit(tmp_path)
    other = tmp_path / "other"
    shutil.copytree(base, other, symlinks=True)
    got, want = _apply(base, together=True), _apply(other, together=False)
    assert got == want
    a, b = "Alice runs the billing migration.", "The staging bucket is in Frankfurt."
    live = {k: t for k, t, s, _ in got["entries"] if s == "live"}
    assert entry_key(a) not in live and entry_key(b) not in live  # merged, superseded
    assert "Alice runs the billing migration now." in live.values()
    # Every indexed row is a live entry's, and every live entry is indexed once.
    assert sorted(k for k, _, r in got["index"] if r == k) == sorted(live)


@pytest.mark.parametrize("together", [True, False])
def test_the_journal_holds_each_key_as_it_was_before_the_batch(
    tmp_path: Path, together: bool
) -> None:
    root = _lit(tmp_path)
    journal = {(k, r): b for k, r, b, _ in _apply(root, together)["journal"]}
    a = "Alice runs the billing migration."
    # New to this run: no image (undo removes them); candidates: as they stood.
    assert journal[("entry", entry_key(a))] is None
    assert all(b is not None for (k, _), b in journal.items() if k == "candidate")
