"""Stored text never drives the terminal (issue #23 item 5). A model's reason, an entry's or a
candidate's text, a session key or a logged prompt may hold escape sequences (set the window
title, clear the screen, write the clipboard with OSC 52); every command that prints stored
text shows them as escapes (`\\x1b`), through the one helper `cli._output.echo`.

The state is the demo's, staged in review mode with one proposal accepted, then every stored
text a command prints is given the payload directly in the database.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dreaming import demo, runner
from dreaming.cli import cli
from tests.deep_helpers import build_state, decide_all, open_app
from tests.fake_openai import FakeOpenAI

PAYLOAD = "ok \x1b]0;PWNED\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07 \x9b31m\u202e \r"
SHOWN = "\\x1b]0;PWNED\\x07"  # the payload as the commands print it
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def invoke(root: Path, *args: str) -> Any:
    from dreaming.cli import (  # noqa: F401
        _candidates,
        _entries,
        _forget,
        _logs,
        _report,
        _review,
        _run,
        _runs,
        _status,
    )

    # color=True: click keeps escape sequences, as it does for a terminal.
    return CliRunner().invoke(
        cli,
        ["--state-dir", str(root), "--config", str(root / "dreaming.toml"), *args],
        color=True,
        catch_exceptions=False,
    )


def ok(root: Path, *args: str) -> str:
    result = invoke(root, *args)
    assert result.exit_code == 0, (args, result.output)
    return str(result.output)


def poison(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE entries SET text = text || ' ' || ?", (PAYLOAD,))
        conn.execute("UPDATE candidates SET text = text || ' ' || ?", (PAYLOAD,))
        conn.execute("UPDATE corpus_lines SET text = text || ' ' || ?", (PAYLOAD,))
        conn.execute("UPDATE decisions SET reason = ?", (PAYLOAD,))
        conn.execute(
            "UPDATE proposals SET decision = json_set(decision, '$.reason', ?),"
            " detail = json_set(detail, '$.candidate_text', ?)",
            (PAYLOAD, PAYLOAD),
        )
        conn.execute("UPDATE sessions SET session_key = ? || coalesce(session_key, '')", (PAYLOAD,))
        conn.execute("UPDATE runs SET summary = json_set(summary, '$.reason', ?)", (PAYLOAD,))
        conn.execute(
            "INSERT INTO llm_calls (agent, run_id, model, request, response, input_tokens,"
            " output_tokens, duration_s, attempt, outcome, created_at)"
            " VALUES ('main', 1, ?, ?, ?, 1, 1, 0.1, 1, 'ok', '2026-03-16 03:00:00.000000')",
            ("m" + PAYLOAD, json.dumps([{"role": "user", "content": PAYLOAD}]), PAYLOAD),
        )


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = demo.build(tmp_path_factory.mktemp("escapes") / "state")
    config = root / "dreaming.toml"
    config.write_text(config.read_text() + '\n[deep]\napply = "review"\n')
    ok(root, "run")
    proposals = json.loads(ok(root, "review", "list", "--agent", "main", "--json"))["proposals"]
    assert len(proposals) > 1
    ok(root, "review", "accept", str(proposals[0]["id"]), "--agent", "main")
    poison(root / "dreaming" / "agents" / "main.sqlite")
    return root


def _db(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / "dreaming" / "agents" / "main.sqlite")


def _entry(root: Path) -> str:
    with _db(root) as conn:
        return str(conn.execute("SELECT key FROM entries").fetchone()[0])


def _run(root: Path) -> str:
    with _db(root) as conn:
        return str(conn.execute("SELECT max(id) FROM runs WHERE agent = 'main'").fetchone()[0])


def _proposal(root: Path) -> str:
    with _db(root) as conn:
        row = conn.execute("SELECT min(id) FROM proposals WHERE status = 'pending'").fetchone()
        return str(row[0])


COMMANDS: dict[str, Any] = {
    "review list": lambda r: ["review", "list", "--agent", "main"],
    "review show": lambda r: ["review", "show", _proposal(r), "--agent", "main"],
    "entries": lambda r: ["entries", "--agent", "main"],
    "entries show": lambda r: ["entries", "show", _entry(r), "--agent", "main"],
    "candidates": lambda r: ["candidates", "--agent", "main"],
    "status": lambda r: ["status"],
    "forget --dry-run": lambda r: [
        "forget",
        "--agent",
        "main",
        "--session",
        "s-main-01",
        "--dry-run",
    ],
    "runs show": lambda r: ["runs", "show", _run(r), "--agent", "main"],
    "logs": lambda r: ["logs", "--agent", "main"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_stored_escapes_reach_the_terminal_escaped(root: Path, command: str) -> None:
    out = ok(root, *COMMANDS[command](root))
    raw = sorted({f"U+{ord(c):04X}" for c in RAW.findall(out.replace("\n", "").replace("\t", ""))})
    assert not raw, f"`{command}` printed raw control characters {raw}"
    assert SHOWN in out, f"`{command}` showed no stored text with the payload:\n{out}"


def test_the_report_on_stdout_has_no_raw_control_characters(root: Path) -> None:
    out = ok(root, "report", "--agent", "main", "--out", "-")
    assert "PWNED" in out
    assert not RAW.findall(out.replace("\n", "").replace("\t", ""))


def test_printable_keeps_text_and_shows_controls_as_escapes() -> None:
    from dreaming.cli._output import printable

    assert printable("Anna lives in Lisbon.\n\tTabs stay; ünïcødé too") == (
        "Anna lives in Lisbon.\n\tTabs stay; ünïcødé too"
    )
    assert printable(PAYLOAD) == (
        "ok \\x1b]0;PWNED\\x07\\x1b[2J\\x1b]52;c;cHduZWQ=\\x07 \\x9b31m\\u202e \\x0d"
    )


def test_every_command_prints_through_the_one_helper() -> None:
    """`click.echo` is called in `_output` alone (`tags strip` writes stdin back as it is:
    it is a filter, not a listing)."""
    folder = Path(__file__).parent.parent / "dreaming" / "cli"
    direct = [
        f"{p.name}:{n}"
        for p in sorted(folder.glob("*.py"))
        if p.name != "_output.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "click.echo(" in line or "click.secho(" in line or "print(" in line
    ]
    assert direct == []


def test_a_model_reason_with_escapes_is_shown_escaped_in_review(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """The issue's case end to end: a model over HTTP gives escape sequences as its reason,
    review mode stores it, and `review list` and `review show` print it escaped."""
    root = build_state(tmp_path / "s", base_url=fake_openai.base_url)
    decide = decide_all("add")

    def hostile(request: dict[str, Any]) -> Any:
        reply = decide(request)
        if isinstance(reply.content, dict):
            for d in reply.content.get("decisions", []):
                d["reason"] = PAYLOAD
        return reply

    fake_openai.default = hostile
    app = open_app(root)
    try:
        runner.run(app, ["light", "deep"], ["main"], deep={"apply": "review"})
    finally:
        app.close()
    listed = ok(root, "review", "list", "--agent", "main")
    proposal = json.loads(ok(root, "review", "list", "--agent", "main", "--json"))["proposals"][0]
    assert "\x1b]0;PWNED\x07" in proposal["reason"]  # stored as the model said it
    shown = ok(root, "review", "show", str(proposal["id"]), "--agent", "main")
    for out in (listed, shown):
        assert SHOWN in out and not RAW.findall(out.replace("\n", "").replace("\t", ""))
