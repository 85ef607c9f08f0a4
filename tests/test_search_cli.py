"""`dreaming entries search QUERY`: the memory searched through the entries' full-text index,
ranked; a query is words, never index syntax; no hits is an answer, not an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import update

from dreaming import search as search_mod
from dreaming.cli import cli
from dreaming.memory import entry_index
from dreaming.store.tables import ENTRIES
from tests.deep_helpers import build_state, open_app

# On per-agent SQLite files (FTS5) and on a fleet's PostgreSQL database (tsvector).
pytestmark = pytest.mark.usefixtures("backend")

HIT_FIELDS = {"rank", "agent", "key", "text", "status", "origins", "score"}


def invoke(root: Path, *args: str) -> Result:
    from dreaming.cli import _entries, _run, _search  # noqa: F401  (registers)

    base = ["--state-dir", str(root), "--config", str(root / "dreaming.toml")]
    return CliRunner().invoke(cli, [*base, *args])


def ok(root: Path, *args: str) -> str:
    result = invoke(root, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def found(root: Path, *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(ok(root, "entries", "search", "--json", *args))
    return doc


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The demo's two agents after a whole night (deterministic consolidator)."""
    state = build_state(tmp_path / "s")
    ok(state, "run")
    return state


def test_hits_are_ranked_and_carry_key_agent_text_and_origins(root: Path) -> None:
    doc = found(root, "bluebird", "postgres")
    assert doc["query"] == "bluebird postgres" and doc["words"] == ["bluebird", "postgres"]
    hits = doc["hits"]
    assert len(hits) == 2 and all(set(h) == HIT_FIELDS for h in hits)
    # The entry that holds both words ranks above the one that holds one of them.
    assert "Postgres 16" in hits[0]["text"] and "called bluebird" in hits[1]["text"]
    assert [h["rank"] for h in hits] == [1, 2] and hits[0]["score"] >= hits[1]["score"]
    assert {h["agent"] for h in hits} == {"bob"} and {h["status"] for h in hits} == {"live"}
    entries = json.loads(ok(root, "entries", "--json"))["entries"]
    origins = {e["key"]: len(e["origins"]) for e in entries}
    assert all(h["origins"] == origins[h["key"]] >= 1 for h in hits)

    lines = ok(root, "entries", "search", "bluebird", "postgres").splitlines()
    assert lines[0] == f"1. bob {hits[0]['key']}  ({hits[0]['origins']} origin)"
    assert lines[1] == f"    {hits[0]['text']}"
    assert lines[2].startswith(f"2. bob {hits[1]['key']}  (")
    assert len(lines) == 4

    assert len(found(root, "the staging database", "--limit", "1")["hits"]) == 1


@pytest.mark.parametrize(
    "query",
    [
        '"peanuts',
        'allergic "peanuts" "',
        "peanut*",
        "NEAR(peanuts allergic, 2)",
        "peanuts AND OR NOT",
        "-peanuts",
        "I'm allergic to peanuts",
        "text:peanuts ^allergic (peanuts",
        "peanuts'); DROP TABLE entries; --",
    ],
)
def test_index_syntax_in_a_query_is_only_words(root: Path, query: str) -> None:
    # `--` so that a query starting with `-` is not read as an option.
    doc = found(root, "--", query)
    assert [h["text"] for h in doc["hits"]][:1] == [
        "I'm allergic to peanuts, please remember that."
    ], doc
    assert all(set(w) <= set("abcdefghijklmnopqrstuvwxyz0123456789") for w in doc["words"])
    assert "peanuts" in ok(root, "entries", "search", "--", query)
    assert found(root, "peanuts")["hits"]  # the index is still there


def test_a_query_that_matches_nothing_says_so(root: Path) -> None:
    for query in ("zebra xylophone", '"*"', "-- - ^ ( ) :"):
        result = invoke(root, "entries", "search", "--", query)
        assert result.exit_code == 0, result.output
        assert result.stdout == f"no entries match {query!r}\n"
        doc = found(root, "--", query)
        assert doc["hits"] == [] and doc["query"] == query and doc["agents"] == ["bob", "main"]


def test_agent_narrows_the_search(root: Path) -> None:
    everywhere = found(root, "peanuts deploy")["hits"]  # main is allergic, bob deploys
    assert {h["agent"] for h in everywhere} == {"bob", "main"}
    mains = found(root, "peanuts deploy", "--agent", "main")["hits"]
    assert {h["agent"] for h in mains} == {"main"}
    assert found(root, "bluebird", "--agent", "main")["hits"] == []
    result = invoke(root, "entries", "search", "user", "--agent", "nobody")
    assert result.exit_code == 2 and "unknown agent(s): nobody" in result.stderr


def test_hit_text_is_printed_escaped(root: Path) -> None:
    [hit] = found(root, "peanuts")["hits"]
    hostile = "Peanuts \x1b]0;owned\x07 and \x1b[2J \u202e allergy"
    app = open_app(root)
    try:
        with app.engine("main").begin() as conn:
            conn.execute(
                update(ENTRIES)
                .where((ENTRIES.c.agent == "main") & (ENTRIES.c.key == hit["key"]))
                .values(text=hostile)
            )
            entry_index.index_entry(conn, "main", hit["key"], hostile)
    finally:
        app.close()
    out = ok(root, "entries", "search", "peanuts")
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;owned\\x07" in out and "\\u202e" in out
    assert found(root, "peanuts")["hits"][0]["text"] == hostile  # JSON keeps it whole


def test_other_statuses_join_the_search_when_asked(root: Path) -> None:
    """The library searches a set of entry statuses: entries kept elsewhere (an archive)
    join by their status, without a rewrite."""
    app = open_app(root)
    try:
        engine = app.engine("main")
        [hit] = search_mod.search([("main", engine)], "peanuts").hits
        with engine.begin() as conn:
            conn.execute(
                update(ENTRIES)
                .where((ENTRIES.c.agent == "main") & (ENTRIES.c.key == hit.key))
                .values(status="archived")
            )
        assert search_mod.search([("main", engine)], "peanuts").hits == ()
        [again] = search_mod.search(
            [("main", engine)], "peanuts", statuses=("live", "archived")
        ).hits
        assert (again.key, again.status) == (hit.key, "archived")
    finally:
        app.close()


def test_no_state_yet(tmp_path: Path) -> None:
    state = build_state(tmp_path / "s")
    result = invoke(state, "entries", "search", "peanuts")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("no entries yet")
