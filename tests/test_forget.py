"""`dreaming forget` end to end: needles seeded in email-derived and direct sessions, a full
night with an LLM (so prompts carry transcript text), a dry run that changes nothing, the
purge, a search of every artifact, and nights after it that bring nothing back."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dreaming import demo
from dreaming.cli import cli
from tests import backends
from tests.deep_helpers import decide_all, tree_hash
from tests.fake_openai import DEFAULT_KEY, DEFAULT_MODEL, FakeOpenAI
from tests.openclaw_builder import FakeOpenClaw

NEEDLES = ("GRIFFIN-4471", "Zanzibar-Quokka", "tangerine-octopus")
SHARED = "The boat Dorado is moored at pier nine."
KEPT = "The staging database is called bluebird."
START = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)

# Every test here runs on per-agent SQLite files and on a fleet's PostgreSQL database.
pytestmark = pytest.mark.usefixtures("backend")


def seed(root: Path, base_url: str) -> Path:
    demo.build(root)
    fake = FakeOpenClaw(root)
    fake.index["main"] = json.loads((root / "agents/main/sessions/sessions.json").read_text())
    for i, (sid, day) in enumerate((("mail-1", 1), ("mail-2", 4))):
        fake.session(
            "main",
            sid,
            [
                ("user", f"Remember: my gym locker code is {NEEDLES[0]}."),
                ("user", f"Please remember the wifi password is {NEEDLES[1]}."),
                ("user", SHARED),
            ],
            key=f"agent:main:hook:gmail:{sid}",
            hookExternalContentSource="gmail",
            start=START + dt.timedelta(days=day),
            sessionStartedAt=int((START + dt.timedelta(days=day)).timestamp() * 1000) + i,
        )
    fake.session(
        "main",
        "dm-sam",
        [
            ("user", f"Remember my nickname at work is {NEEDLES[2]}."),
            ("user", f"Remember my nickname at work is {NEEDLES[2]}."),
            ("assistant", "Noted."),
        ],
        key="agent:main:telegram:default:dm:sam99",
        channel="telegram",
        chatType="direct",
        origin={"provider": "telegram", "from": "telegram:sam99"},
        start=START + dt.timedelta(days=3),
    )
    for sid, day in (("kept-1", 2), ("kept-2", 5)):
        fake.session(
            "main",
            sid,
            [("user", SHARED), ("user", KEPT)],
            key=f"agent:main:main:{sid}",
            start=START + dt.timedelta(days=day),
        )
    # The email policy would keep mail out entirely; here email is admitted so it can be purged.
    (root / "dreaming.toml").write_text(
        "[deep]\nllm = 'test'\nmin_sessions = 2\n"
        f"[llm.profiles.test]\nbase_url = '{base_url}'\nmodel = '{DEFAULT_MODEL}'\n"
        "price_input_per_mtok = 1.0\nprice_output_per_mtok = 1.0\n"
    )
    backends.CURRENT.configure(root)
    return root


def cli_json(root: Path, *args: str) -> Any:
    from dreaming.cli import _entries, _forget, _run  # noqa: F401

    result = CliRunner(env={"OPENAI_API_KEY": DEFAULT_KEY}).invoke(
        cli,
        ["--state-dir", str(root), "--config", str(root / "dreaming.toml"), *args, "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def every_artifact(root: Path) -> str:
    """All text anywhere under the state folder except the transcripts themselves (a purge
    never edits what the agent wrote): databases both as raw bytes, with their write-ahead
    logs (freed pages and old frames must not keep purged text either), and dumped table by
    table, the search index included."""
    parts = []
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if not p.is_file() or rel.startswith("agents/"):
            continue
        parts.append(p.read_bytes().decode("utf-8", errors="replace"))
        if p.suffix == ".sqlite":
            conn = sqlite3.connect(p)
            try:
                parts.append("\n".join(conn.iterdump()))
                parts.append("\n".join(str(r) for r in conn.execute("SELECT * FROM entries_fts")))
            finally:
                conn.close()
    shared = backends.CURRENT.dump()  # a fleet's state: every row of the PostgreSQL database
    if shared is not None:
        parts.append(shared)
    return "\n".join(parts)


@pytest.fixture
def purged_state(tmp_path: Path, fake_openai: FakeOpenAI) -> tuple[Path, dict[str, Any]]:
    fake_openai.default = decide_all("add")
    root = seed(tmp_path / "s", fake_openai.base_url)
    cli_json(root, "run")
    text = every_artifact(root)
    assert all(n in text for n in NEEDLES), "the night should have taken the needles in"
    entries = cli_json(root, "entries", "--agent", "main")["entries"]
    # Email is untrusted: its own facts are never promoted, but the boat fact the owner
    # also stated carries the mail sessions among its origins.
    assert any(NEEDLES[2] in e["text"] for e in entries)
    assert not any(NEEDLES[0] in e["text"] for e in entries)
    boat = next(e for e in entries if "Dorado" in e["text"])
    assert {o["session_id"] for o in boat["origins"]} == {"kept-1", "kept-2", "mail-1", "mail-2"}
    before = tree_hash(root)
    dry = cli_json(root, "forget", "--agent", "main", "--hook-source", "gmail", "--dry-run")
    assert tree_hash(root) == before, "a dry run must not change a single byte"
    assert {s["session_id"] for s in dry["sessions"]} == {"mail-1", "mail-2", "s-main-04"}
    report = cli_json(root, "forget", "--agent", "main", "--hook-source", "gmail")
    assert report["counts"] == dry["counts"]
    second = cli_json(root, "forget", "--agent", "main", "--participant", "sam99")
    assert [s["session_id"] for s in second["sessions"]] == ["dm-sam"]
    return root, report


def test_purge_removes_every_copy(purged_state: tuple[Path, dict[str, Any]]) -> None:
    root, report = purged_state
    assert report["counts"]["corpus_lines"] >= 4
    assert report["counts"]["tombstones"] == 3
    assert report["counts"]["llm_calls"] >= 1
    assert any(m["other_sessions"] for m in report["mixed_lineage"])  # the shared boat fact
    text = every_artifact(root)
    for needle in NEEDLES:
        assert needle not in text, needle


def test_kept_facts_survive_and_nothing_comes_back(
    purged_state: tuple[Path, dict[str, Any]],
) -> None:
    root, _ = purged_state
    entries = cli_json(root, "entries", "--agent", "main")["entries"]
    assert any("bluebird" in e["text"] for e in entries)
    assert any("peanut" in e["text"].lower() for e in entries)
    cli_json(root, "run")
    cli_json(root, "run", "--phase", "light", "--reingest")
    cli_json(root, "run")
    text = every_artifact(root)
    for needle in NEEDLES:
        assert needle not in text, needle
    # The shared fact may come back, from the kept sessions alone.
    boat = [
        e for e in cli_json(root, "entries", "--agent", "main")["entries"] if "Dorado" in e["text"]
    ]
    for e in boat:
        assert {o["session_id"] for o in e["origins"]} <= {"kept-1", "kept-2"}


def test_deleting_the_database_does_not_resurrect(
    purged_state: tuple[Path, dict[str, Any]],
) -> None:
    root, _ = purged_state
    shutil.rmtree(root / "dreaming" / "agents", ignore_errors=True)
    backends.CURRENT.wipe()
    cli_json(root, "run")
    text = every_artifact(root)
    for needle in NEEDLES:
        assert needle not in text, needle


def test_repeating_a_purge_finds_nothing_left(purged_state: tuple[Path, dict[str, Any]]) -> None:
    root, _ = purged_state
    again = cli_json(root, "forget", "--agent", "main", "--hook-source", "gmail")
    assert again["nothing_left"] is True
    assert all(s["status"] == "already forgotten" for s in again["sessions"])


def test_unresolved_ids_are_reported_and_tombstoned(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    root = seed(tmp_path / "s", fake_openai.base_url)
    args = ["forget", "--agent", "main", "--session", "no-such-session"]
    args += ["--session", "agent:main:main:kept-1"]
    # A typo is an error that forgets nothing, not a tombstone for nothing.
    from dreaming.cli import _forget  # noqa: F401

    config = ["--config", str(root / "dreaming.toml")]
    refused = CliRunner().invoke(cli, ["--state-dir", str(root), *config, *args, "--json"])
    assert refused.exit_code == 2 and "has no session 'no-such-session'" in refused.output
    assert "--pre-tombstone" in refused.output
    assert not (root / "dreaming" / "tombstones" / "main.jsonl").exists()
    report = cli_json(root, *args, "--pre-tombstone")
    assert report["unresolved"] == ["no-such-session"]
    assert {s["session_id"] for s in report["sessions"]} == {"no-such-session", "kept-1"}
    # A later file with that id is never read.
    FakeOpenClaw(root).session(
        "main", "no-such-session", [("user", "Secret plan: Operation Walrus-Teacup.")]
    )
    light = cli_json(root, "run", "--phase", "light")
    assert "Walrus-Teacup" not in every_artifact(root)
    assert light["agents"]["main"]["light"]["sessions"]["not_admitted"]["forgotten"] == 2


def test_curated_writes_are_reported_not_edited(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    root = seed(tmp_path / "s", fake_openai.base_url)
    path = root / "agents/main/sessions/kept-2.jsonl"
    with path.open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "type": "message",
                    "id": "w1",
                    "parentId": None,
                    "timestamp": "2026-03-07T10:00:00Z",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "toolCall",
                                "id": "t1",
                                "name": "write",
                                "arguments": {"path": "/home/demo/notes/boat.md", "content": "x"},
                            }
                        ],
                    },
                }
            )
            + "\n"
        )
    report = cli_json(root, "forget", "--agent", "main", "--session", "kept-2", "--dry-run")
    assert [w["path"] for w in report["curated_writes"]] == ["/home/demo/notes/boat.md"]
