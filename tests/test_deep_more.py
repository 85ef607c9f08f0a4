"""More deep-phase rules: supersession, the memory size budget, a rejected key, and the CLI."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from dreaming import runner
from dreaming.cli import cli
from dreaming.memory import memory_file as mf
from tests.deep_helpers import build_state, decide_all, ids_in, open_app
from tests.fake_openai import FakeOpenAI, Reply
from tests.openclaw_builder import append

# Every test here runs on per-agent SQLite files and on a fleet's PostgreSQL database.
pytestmark = pytest.mark.usefixtures("backend")


def night(root: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    from dreaming.app import App

    app = App.open(root, root / "dreaming.toml", env=env) if env is not None else open_app(root)
    try:
        runner.run_light(app)
        return {d["agent"]: d for d in runner.run_deep(app)}
    finally:
        app.close()


def rows(root: Path, sql: str) -> list[Any]:
    app = open_app(root)
    try:
        with app.engine("main").connect() as conn:
            return list(conn.execute(text(sql)).all())
    finally:
        app.close()


def test_supersede_replaces_and_records_the_old_key(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    root = build_state(tmp_path / "s", base_url=fake_openai.base_url)
    fake_openai.default = decide_all("add")
    night(root)
    memory = mf.read(root / "workspace/MEMORY.md")
    meetings = next(b for b in memory.blocks if "meetings" in b.text)
    append(
        root / "agents/main/sessions/s-main-07.jsonl",
        "user",
        "Remember that I now prefer meetings after 11am on weekdays.",
        dt.datetime(2026, 3, 21, tzinfo=dt.UTC),
        "n1",
    )

    def supersede(request: dict[str, Any]) -> Reply:
        cids, eids = ids_in(request)
        body = json.dumps(request)
        decisions = []
        for cid in cids:
            if "11am" in body and eids:
                target = eids[0]
                decisions.append(
                    {
                        "candidate": cid,
                        "action": "supersede",
                        "targets": [target],
                        "reason": "changed",
                        "text": "The user prefers meetings after 11am on weekdays.",
                    }
                )
            else:
                decisions.append(
                    {"candidate": cid, "action": "skip", "targets": [], "text": None, "reason": ""}
                )
        return Reply({"decisions": decisions})

    fake_openai.default = supersede
    out = night(root)["main"]
    assert out["actions"].get("supersede") == 1, out["fallbacks"]
    new_key = mf.entry_key("The user prefers meetings after 11am on weekdays.")
    keys = {b.key for b in mf.read(root / "workspace/MEMORY.md").blocks}
    assert new_key in keys and meetings.key not in keys
    assert rows(root, "SELECT new_key, old_key FROM supersessions") == [(new_key, meetings.key)]
    origins = {
        r[0] for r in rows(root, f"SELECT session_id FROM origins WHERE entry_key='{new_key}'")
    }
    assert "s-main-07" in origins and "s-main-02" in origins  # union with the superseded entry's


def test_memory_size_budget_archives_what_does_not_fit(tmp_path: Path) -> None:
    # The deprecated [deep] max_memory_chars is still MEMORY.md's budget; what does not fit
    # is archived (not held back as pending candidates, as it was before).
    root = build_state(tmp_path / "s", extra="\n[deep]\nmax_memory_chars = 300\n")
    out = night(root)["main"]
    assert "memory_budget" not in out["deferred"]
    assert len((root / "workspace/MEMORY.md").read_text()) <= 300
    archived = rows(root, "SELECT count(*) FROM entries WHERE status='archived' AND agent='main'")[
        0
    ][0]
    assert archived >= 1 and out["archived"] == archived
    assert out["memory"]["max_chars"] == 300 and out["memory"]["chars"] <= 300


def test_rejected_key_says_which_variable_and_falls_back(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    root = build_state(tmp_path / "s", base_url=fake_openai.base_url)
    out = night(root, env={"OPENAI_API_KEY": "wrong"})["main"]
    assert out["paths"] == {"deterministic": out["selected"]}
    assert any("OPENAI_API_KEY" in f for f in out["fallbacks"])
    assert out["llm"]["calls"] == 1  # a 401 is not retried


def cli_run(root: Path, *args: str) -> Any:
    from dreaming.cli import _entries, _run  # noqa: F401

    return CliRunner().invoke(
        cli,
        ["--state-dir", str(root), "--config", str(root / "dreaming.toml"), *args],
        catch_exceptions=False,
    )


def test_cli_dry_run_promote_and_entries(tmp_path: Path) -> None:
    root = build_state(tmp_path / "s")
    assert cli_run(root, "run", "--phase", "light").exit_code == 0
    dry = cli_run(root, "promote", "--dry-run", "--agent", "main")
    assert dry.exit_code == 0
    assert "preview: nothing written" in dry.stdout
    assert re.search(r"^\+- .+ <!--m:[0-9a-f]{6}-->$", dry.stdout, re.MULTILINE)
    assert "<!--m:" not in (root / "workspace/MEMORY.md").read_text()
    real = cli_run(root, "promote", "--apply", "--json")
    data = json.loads(real.stdout)
    assert data["agents"]["main"]["deep"]["actions"]["add"] >= 1
    listing = json.loads(cli_run(root, "entries", "--agent", "main", "--json").stdout)["entries"]
    peanut = next(e for e in listing if "peanut" in e["text"])
    assert {o["session_id"] for o in peanut["origins"]} >= {"s-main-01", "s-main-07"}
    shown = cli_run(root, "entries", "show", peanut["key"])
    assert shown.exit_code == 0
    assert "[main/sessions/main/s-main-01#L2]" in shown.stdout
    missing = CliRunner().invoke(
        cli,
        [
            "--state-dir",
            str(root),
            "--config",
            str(root / "dreaming.toml"),
            "entries",
            "show",
            "m:0000000000000000",
        ],
    )
    assert missing.exit_code == 2 and "no live entry" in missing.output


def test_run_all_runs_light_rem_then_deep(tmp_path: Path) -> None:
    root = build_state(tmp_path / "s")
    result = cli_run(root, "run", "--json")
    data = json.loads(result.stdout)
    assert set(data["agents"]["main"]) == {"light", "rem", "deep"}
    assert data["agents"]["main"]["deep"]["entries"] >= 1


def test_garbage_reply_is_reasked_once_then_falls_back(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    root = build_state(tmp_path / "s", base_url=fake_openai.base_url)
    fake_openai.default = lambda _r: Reply("this is not json at all")
    out = night(root)["main"]
    assert out["paths"] == {"deterministic": out["selected"]}
    assert sum(1 for f in out["fallbacks"] if f.startswith("invalid")) == 2
    assert "not json" not in (root / "workspace/MEMORY.md").read_text()
