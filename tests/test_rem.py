"""REM: themes, boosts, the diary (deterministic and LLM-written), and echo recognition."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from dreaming import runner
from dreaming.memory import diary
from tests.deep_helpers import build_state, open_app
from tests.fake_openai import ErrorReply, FakeOpenAI, Reply
from tests.openclaw_builder import append

# Every test here runs on per-agent SQLite files and on a fleet's PostgreSQL database.
pytestmark = pytest.mark.usefixtures("backend")


def run(root: Path, phases: list[str], **kw: Any) -> dict[str, Any]:
    app = open_app(root)
    try:
        return {r.agent: r.phase_dicts() for r in runner.run(app, phases, **kw)}
    finally:
        app.close()


def test_themes_boost_and_diary(tmp_path: Path) -> None:
    root = build_state(tmp_path / "s")
    (root / "workspace" / "DREAMS.md").write_text("# My dreams\n\nOperator notes stay.\n")
    out = run(root, ["light", "rem"])["main"]["rem"]
    concepts = [t["concept"] for t in out["themes"]]
    assert any("allergic" in c for c in concepts), concepts
    assert not {"user", "assistant"} & set(concepts)
    assert out["boosted"] >= 1
    text_ = (root / "workspace" / "DREAMS.md").read_text()
    assert text_.startswith("# My dreams\n\nOperator notes stay.\n")
    entries = diary.entries(text_)
    assert [e.day for e in entries] == ["2026-03-14"]  # the agent's clock, not the wall clock
    for banned in ("score", "#L", "sessions/", "s-main-"):
        assert banned not in entries[0].body
    app = open_app(root)
    with app.engine("main").connect() as conn:
        boosted = conn.execute(text("SELECT text FROM candidates WHERE rem_boost > 0")).all()
    app.close()
    assert any("peanut" in r[0] for r in boosted)


def test_rem_rescores_the_boosted_and_leaves_every_score_as_a_full_rescore_gives(
    tmp_path: Path,
) -> None:
    """REM rescores only the candidates whose boost it changed: every other score was
    light's, on the same clock and words, so after the night each candidate's score is
    what scoring all of them again gives."""
    from dreaming.ingest import candidates

    root = build_state(tmp_path / "s")
    assert run(root, ["light", "rem"])["main"]["rem"]["boosted"] >= 1
    app = open_app(root)
    try:
        with app.engine("main").begin() as conn:
            query = text("SELECT id, score FROM candidates ORDER BY id")
            after_rem = conn.execute(query).all()
            candidates.rescore(conn, "main", app.paths.settings)
            assert conn.execute(query).all() == after_rem
            conn.rollback()
    finally:
        app.close()


def test_a_full_rescore_gives_each_candidate_the_score_of_its_own_signals(
    tmp_path: Path,
) -> None:
    """The rescore reads its rows by position; each stored score is what `score` gives the
    candidate's signals read by name, so a column out of place cannot go unseen."""
    from dreaming.ingest import candidates, salience
    from dreaming.ingest.candidates import _signals
    from dreaming.ingest.scoring import Rarity, Signals, score

    root = build_state(tmp_path / "s")
    run(root, ["light"])
    app = open_app(root)
    try:
        settings = app.paths.settings
        with app.engine("main").begin() as conn:
            candidates.rescore(conn, "main", settings)
            rows = conn.execute(_signals._SCORED, {"agent": "main"}).all()
            clock = candidates.read_clock(conn, "main")
            conn.rollback()
    finally:
        app.close()
    rarity = Rarity(_signals._words_of(r.tokens) for r in rows)
    for r in rows:
        signals = Signals(
            sessions=r.sessions,
            days=r.days,
            owner_lines=r.owner_lines,
            agent_lines=r.agent_lines,
            untrusted_lines=r.untrusted_lines,
            system_lines=r.system_lines,
            last_seen=r.last_seen,
            durable_cue=bool(r.durable_cue),
            rem_boost=r.rem_boost,
            salience=r.salience or 0.0,
            features=salience.parse_features(r.features),
            rarity=rarity.of(_signals._words_of(r.tokens)) if r.salience else 0.0,
            chars=r.chars or 0,
        )
        assert r.score == score(signals, clock, settings.candidates.recency_half_life_days)
    assert len({r.score for r in rows}) > 2  # scores that differ: the check is not vacuous


def test_rem_rescores_every_candidate_when_the_scores_are_not_current(tmp_path: Path) -> None:
    """A half-life changed since light scored (or a rescore left pending) makes REM's
    boosts rescore every candidate, as before it rescored only the boosted: what scoring
    them all again gives, on the settings of now."""
    from dreaming.ingest import candidates

    root = build_state(tmp_path / "s")
    run(root, ["light", "rem"])
    (root / "workspace" / "DREAMS.md").unlink()  # tonight's entry is written again
    config = root / "dreaming.toml"
    text_ = config.read_text() if config.exists() else ""
    changed = "\n[candidates]\nrecency_half_life_days = 2\n[rem]\nboost_per_theme = 0.07\n"
    config.write_text(text_ + changed)
    assert run(root, ["rem"])["main"]["rem"]["boosted"] >= 1
    app = open_app(root)
    try:
        settings = app.paths.settings
        assert settings.candidates.recency_half_life_days == 2
        with app.engine("main").begin() as conn:
            query = text("SELECT id, score FROM candidates ORDER BY id")
            after_rem = conn.execute(query).all()
            assert candidates.scores_current(conn, "main", settings)
            candidates.rescore(conn, "main", settings)
            assert conn.execute(query).all() == after_rem
            conn.rollback()
    finally:
        app.close()


def test_rem_is_idempotent_for_the_same_night(tmp_path: Path) -> None:
    root = build_state(tmp_path / "s")
    run(root, ["light", "rem"])
    first = (root / "workspace" / "DREAMS.md").read_text()
    again = run(root, ["rem"])["main"]["rem"]
    assert again["diary_written"] is False
    assert (root / "workspace" / "DREAMS.md").read_text() == first


def test_llm_narrative_and_fallback(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    root = build_state(tmp_path / "s", base_url=fake_openai.base_url)
    fake_openai.enqueue(Reply({"entry": "The user kept returning to a peanut allergy. score=0.9"}))
    fake_openai.default = lambda _r: ErrorReply(400, "bad")
    out = run(root, ["light", "rem"])
    main, bob = out["main"]["rem"], out["bob"]["rem"]
    llm_one = main if main["diary_by"] == "llm" else bob
    assert llm_one["diary_by"] == "llm"
    assert "peanut allergy" in llm_one["diary_text"] and "score=" not in llm_one["diary_text"]
    request = fake_openai.chat_requests[0].body
    assert "JSON" in json.dumps(request) and "s-main" not in json.dumps(request)


def test_diary_quoted_back_is_an_echo_not_a_candidate(tmp_path: Path) -> None:
    root = build_state(tmp_path / "s")
    run(root, ["light", "rem"])
    body = diary.entries((root / "workspace" / "DREAMS.md").read_text())[0].body
    quoted = next(line for line in body.splitlines() if "across" in line)
    append(
        root / "agents/main/sessions/s-main-07.jsonl",
        "assistant",
        "From my diary: " + quoted,
        dt.datetime(2026, 3, 14, 12, tzinfo=dt.UTC),
        "echo1",
    )
    light = run(root, ["light"])["main"]["light"]
    assert light["dropped"].get("echo") == 1
    assert light["candidates"]["new"] == 0
