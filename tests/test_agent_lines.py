"""The agent's own lines corroborate candidates, they do not create them (unless
`[deep] promote_agent_only` is on), and REM still hears what only the agent kept saying."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from dreaming.cli import cli
from dreaming.memory import diary
from tests import backends
from tests.openclaw_builder import FakeOpenClaw

pytestmark = pytest.mark.usefixtures("backend")

START = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
SERVER = "The staging server is called rimazu and it hosts every release build."
PIPELINE = (
    "I rebuilt the zorblat pipeline cache and reran the zorblat pipeline checks.",
    "The zorblat pipeline checks are green again after the cache rebuild.",
    "I reran the zorblat pipeline once more and its checks still pass.",
)


def seed(root: Path, config: str = "") -> Path:
    """Three sessions on three days: the owner names the staging server once (the agent
    repeats it, once before the owner in the same file); the agent alone keeps talking
    about the zorblat pipeline."""
    fake = FakeOpenClaw(root)
    talk = {
        "s-1": [("assistant", SERVER), ("user", SERVER), ("assistant", PIPELINE[0])],
        "s-2": [("user", "Thanks, that helps."), ("assistant", PIPELINE[1])],
        "s-3": [("user", "Ok."), ("assistant", PIPELINE[2]), ("assistant", SERVER)],
    }
    for i, (sid, turns) in enumerate(talk.items()):
        fake.session(
            "main", sid, turns, key=f"agent:main:main:{sid}", start=START + dt.timedelta(days=i)
        )
    (root / "dreaming.toml").write_text(config)
    backends.CURRENT.configure(root)
    return root


def invoke(root: Path, *args: str) -> str:
    from dreaming.cli import _forget, _run, _runs  # noqa: F401

    result = CliRunner().invoke(
        cli,
        ["--state-dir", str(root), "--config", str(root / "dreaming.toml"), *args],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def run_json(root: Path, *phases: str) -> dict[str, Any]:
    args = [a for p in phases for a in ("--phase", p)]
    return json.loads(invoke(root, "run", *args, "--json"))["agents"]["main"]


def sql(root: Path, statement: str) -> list[Any]:
    from tests.deep_helpers import open_app

    app = open_app(root)
    try:
        with app.engine("main").connect() as conn:
            return list(conn.execute(text(statement)).all())
    finally:
        app.close()


def candidates(root: Path) -> list[str]:
    return [r[0] for r in sql(root, "SELECT text FROM candidates ORDER BY id")]


def test_the_agent_alone_creates_no_candidate_but_backs_the_owner(tmp_path: Path) -> None:
    root = seed(tmp_path / "s")
    light = run_json(root, "light")["light"]
    assert not [c for c in candidates(root) if "zorblat" in c]
    assert light["candidates"]["agent_unmatched"] >= len(PIPELINE)
    [(cid, owner, agent)] = sql(
        root,
        "SELECT c.id, sum(CASE WHEN e.origin_class = 'owner' THEN 1 ELSE 0 END),"
        " sum(CASE WHEN e.origin_class = 'agent' THEN 1 ELSE 0 END)"
        " FROM candidates c JOIN candidate_evidence e ON e.candidate_id = c.id"
        " WHERE c.text LIKE '%rimazu%' GROUP BY c.id",
    )
    # The owner's one statement, backed by the agent twice: once before it in the same file.
    assert (owner, agent) == (1, 2), cid
    assert "agent's own claims: " in invoke(root, "runs", "show", "1")


def test_rem_still_dreams_of_what_the_agent_kept_saying(tmp_path: Path) -> None:
    root = seed(tmp_path / "s")
    rem = run_json(root, "light", "rem")["rem"]
    concepts = [t["concept"].casefold() for t in rem["themes"]]
    assert any("zorblat" in c for c in concepts), rem["themes"]
    assert set(rem["read_sessions"]) == {"s-1", "s-2", "s-3"}
    body = diary.entries((root / "workspace" / "DREAMS.md").read_text())[0].body
    assert "zorblat" in body.casefold()
    # The diary entry drew on the agent's words of every session: forgetting one takes it.
    report = json.loads(invoke(root, "forget", "--agent", "main", "--session", "s-2", "--json"))
    assert report["diary_entries_removed"] == [rem["day"]]
    assert diary.entries((root / "workspace" / "DREAMS.md").read_text()) == []


def test_promote_agent_only_lets_the_agent_create(tmp_path: Path) -> None:
    root = seed(tmp_path / "s", "[deep]\npromote_agent_only = true\n")
    light = run_json(root, "light")["light"]
    assert light["candidates"]["agent_unmatched"] == 0
    assert [c for c in candidates(root) if "zorblat" in c]


def test_turning_promote_agent_only_on_folds_the_stored_agent_lines_once(
    tmp_path: Path,
) -> None:
    root = seed(tmp_path / "s")
    run_json(root, "light")
    before = candidates(root)
    assert not [c for c in before if "zorblat" in c]
    config = root / "dreaming.toml"
    backend_only = config.read_text()  # what the backend fixture wrote (a database URL)
    config.write_text(backend_only + "[deep]\npromote_agent_only = true\n")
    light = run_json(root, "light")["light"]
    after = candidates(root)
    assert after[: len(before)] == before, "what was there stays, with its ids"
    assert len([c for c in after if "zorblat" in c]) >= 2
    assert light["candidates"]["new"] == len(after) - len(before)
    # Once: the next night finds nothing more to fold.
    again = run_json(root, "light")["light"]
    assert again["candidates"]["new"] == 0 and candidates(root) == after
    # The evidence was not doubled: one row per (candidate, line).
    [(rows, distinct)] = sql(
        root,
        "SELECT count(*), count(DISTINCT CAST(candidate_id AS TEXT) || '-' ||"
        " CAST(corpus_line_id AS TEXT))"
        " FROM candidate_evidence",
    )
    assert rows == distinct
    # Off again: nothing is taken away, and the mark is cleared for the next time it is on.
    config.write_text(backend_only)
    run_json(root, "light")
    assert candidates(root) == after
    assert sql(root, "SELECT value FROM agent_state WHERE key = 'agent_lines'") == []
