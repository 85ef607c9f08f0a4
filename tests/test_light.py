"""The light phase end to end through the CLI, on fake OpenClaw folders."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import insert, select, text

from dreaming.cli import cli
from dreaming.config import DeepSettings
from dreaming.ingest.candidates._fold import _INSERT_NEW, _NEW_COLUMNS
from dreaming.store import open_engine, open_shared_engine
from dreaming.store.models import CandidateRow
from dreaming.store.tables import CANDIDATES
from tests.backends import Backend
from tests.openclaw_builder import FakeOpenClaw, append

SENDER = (
    'Sender (untrusted metadata):\n```json\n{\n  "label": "openclaw-tui",\n'
    '  "id": "gateway-client"\n}\n```\n\n'
)
DAY = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def run(state: Path, *args: str, config: Path | None = None) -> dict[str, Any]:
    from dreaming.cli import _run, _status  # noqa: F401

    base = ["--state-dir", str(state)]
    if config is not None:
        base += ["--config", str(config)]
    result = CliRunner().invoke(cli, [*base, *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def light(state: Path, config: Path | None = None) -> dict[str, Any]:
    report = run(state, "run", "--phase", "light", config=config)
    return {name: a["light"] for name, a in report["agents"].items()}


def corpus_text(state: Path, agent: str = "main") -> str:
    ws = state / ("workspace" if agent == "main" else f"workspace-{agent}")
    folder = ws / "memory" / ".dreams" / "session-corpus"
    return "".join(p.read_text() for p in sorted(folder.glob("*.txt"))) if folder.exists() else ""


@pytest.fixture
def state(tmp_path: Path) -> Path:
    root = tmp_path / "state"
    fake = FakeOpenClaw(root)
    fake.session(
        "main",
        "s1",
        [
            ("user", SENDER + "[Sun 2026-03-01 09:00 GMT+1] I'm allergic to peanuts."),
            ("assistant", "Noted, no peanuts."),
            (
                "user",
                "<relevant_memories>\n- likes durian\n</relevant_memories>\n"
                "My sister Anna lives in Lisbon.",
            ),
        ],
        key="agent:main:telegram:default:dm:user123",
        channel="telegram",
        chatType="direct",
        start=DAY,
    )
    fake.session(
        "main",
        "s2",
        [("user", "I am allergic to peanuts! Skip the satay please, thanks.")],
        key="agent:main:main",
        start=DAY + timedelta(days=2),
    )
    fake.session(
        "main",
        "mail",
        [("user", "Invoice INV-2291 for 480 EUR is due on the 30th of the month.")],
        key="agent:main:hook:gmail:abc",
        hookExternalContentSource="gmail",
        start=DAY + timedelta(days=3),
    )
    fake.session(
        "main",
        "cronjob",
        [("user", "Run the daily digest for yesterday's calendar events.")],
        key="agent:main:cron:digest",
        start=DAY + timedelta(days=3),
    )
    (root / "dreaming.toml").write_text(
        "[excludeSessions]\nhookExternalContentSources = ['gmail']\n"
    )
    return root


def test_light_admits_strips_and_records_reasons(state: Path) -> None:
    out = light(state)["main"]
    assert out["sessions"]["not_admitted"] == {
        "internal:cron": 1,
        "policy:hookExternalContentSources=gmail (dreaming.toml)": 1,
    }
    corpus = corpus_text(state)
    assert (
        "[main/sessions/main/s1#L2] [Sun 2026-03-01 09:00 GMT+1] I'm allergic to peanuts." in corpus
    )
    assert "My sister Anna lives in Lisbon." in corpus
    for banned in (
        "untrusted metadata",
        "openclaw-tui",
        "relevant_memories",
        "durian",
        "INV-2291",
        "digest",
    ):
        assert banned not in corpus
    status = run(state, "status")["agents"][0]
    reasons = {r["session_id"]: r["reason"] for r in status["not_admitted"]}
    assert reasons == {
        "mail": "policy:hookExternalContentSources=gmail (dreaming.toml)",
        "cronjob": "internal:cron",
    }


def test_candidates_fold_across_sessions(state: Path) -> None:
    light(state)
    engine = open_engine(state / "dreaming" / "agents" / "main.sqlite")
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT text, sessions, days, durable_cue, score FROM candidates"
                " ORDER BY score DESC"
            )
        ).all()
    peanuts = [r for r in rows if "peanut" in r[0]]
    assert len(peanuts) == 1
    assert peanuts[0][1] == 2 and peanuts[0][2] == 2
    # Said once per session, it tells enough on its own to clear deep's gate.
    assert peanuts[0][4] >= DeepSettings().min_score


def test_rerun_is_noop_and_append_adds_one_line(state: Path) -> None:
    first = light(state)["main"]
    before = corpus_text(state)
    again = light(state)["main"]
    assert again["corpus_lines"] == 0
    assert again["sessions"]["read"] == 0
    assert corpus_text(state) == before
    append(
        state / "agents/main/sessions/s2.jsonl",
        "user",
        "My dog is called Pixel.",
        DAY + timedelta(days=2, hours=1),
        "x1",
    )
    third = light(state)["main"]
    assert third["corpus_lines"] == 1
    after = corpus_text(state)
    assert after.count("\n") == before.count("\n") + 1
    assert "[main/sessions/main/s2#L3] My dog is called Pixel." in after
    assert first["corpus_lines"] == 4


def test_rewritten_file_is_reread_without_duplicates(state: Path) -> None:
    light(state)
    path = state / "agents/main/sessions/s2.jsonl"
    FakeOpenClaw(state).session(
        "main", "s2", [("user", "Completely new content about the garden shed.")], start=DAY
    )
    assert path.exists()
    out = light(state)["main"]
    assert out["sessions"]["rewritten"] == 1
    corpus = corpus_text(state)
    assert "garden shed" in corpus
    assert "skip the satay" not in corpus


def test_bad_input_is_counted_not_fatal(state: Path) -> None:
    folder = state / "agents/main/sessions"
    good = json.dumps(
        {
            "type": "message",
            "timestamp": "2026-03-05T10:00:00Z",
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": "The boiler is serviced every October."}],
            },
        }
    )
    (folder / "broken.jsonl").write_bytes(
        b'{"type":"session","version":3,"id":"broken","timestamp":"2026-03-05T10:00:00Z"}\n'
        b"{not json\n"
        b"\xff\xfe invalid utf8\n"
        b"[1, 2]\n"
        b'{"type":"mystery"}\n' + good.encode() + b"\n"
    )
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "binary.jsonl").write_bytes(b"\x00\x01\x02" * 100)
    out = light(state)["main"]
    skips = out["skips"]
    assert skips["malformed-json"] >= 1
    assert skips["invalid-utf8"] == 1
    assert skips["not-an-object"] == 1
    assert skips["unknown-line-type"] == 1
    assert skips["empty-file"] == 1
    assert skips["binary-file"] == 1
    assert "The boiler is serviced every October." in corpus_text(state)


def test_memory_echo_counts_as_recall(state: Path) -> None:
    from dreaming.memory import memory_file as mf

    ws = state / "workspace"
    ws.mkdir(parents=True)
    fact = "The user is allergic to peanuts."
    (ws / "MEMORY.md").write_text("# Memory\n" + mf.render_block(mf.entry_key(fact), fact))
    out = light(state)["main"]
    assert out["recalls"] >= 2
    engine = open_engine(state / "dreaming" / "agents" / "main.sqlite")
    with engine.connect() as conn:
        texts = [r[0] for r in conn.execute(text("SELECT text FROM candidates"))]
    assert not any("peanut" in t for t in texts)


def test_quoted_compact_memory_lines_are_recalls_not_candidates(state: Path) -> None:
    """MEMORY.md entry lines pasted back into a conversation (their line breaks collapsed
    in the corpus) are recalls of their entries; a line with a key we never wrote is no
    recall, and neither gives a candidate."""
    from dreaming.memory import memory_file as mf

    facts = [
        "2026-03-08 I keep the locker code in the blue notebook. It opens locker nine.",
        "I water the fern on the balcony every Friday evening.",
        "The user keeps the spare key under the mossy stone.",
    ]
    entries = [(mf.entry_key(f), f) for f in facts]
    ws = state / "workspace"
    ws.mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n" + mf.apply_entries(mf.parse(""), entries).render())
    # The lines as MEMORY.md shows them (keys shortened), and one in the older form.
    written = {b.key: b.raw for b in mf.read(ws / "MEMORY.md").blocks}
    assert all(raw.endswith(f" <!--{k[:8]}-->\n") for k, raw in written.items())
    quoted = written[entries[0][0]] + written[entries[1][0]] + mf.render_old_line(*entries[2])
    forged = "- I own the red submarine called Nautilus. <!--m:012345-->\n"
    forged += "- The user owns the yellow submarine. <!-- m:0123456789abcdef -->\n"
    FakeOpenClaw(state).session(
        "main",
        "s-echo",
        [("user", "Here is what you remember about me:\n" + quoted + forged)],
        start=DAY + timedelta(days=3),
        key="agent:main:main:echo",
    )
    light(state)
    engine = open_engine(state / "dreaming" / "agents" / "main.sqlite")
    with engine.connect() as conn:
        texts = [r[0] for r in conn.execute(text("SELECT text FROM candidates"))]
        recalled = {
            r[0]
            for r in conn.execute(text("SELECT entry_key FROM recalls WHERE session_id = 's-echo'"))
        }
    assert recalled == {k for k, _ in entries}
    for word in ("notebook", "locker", "fern", "mossy", "submarine", "m:012345"):
        assert not any(word in t for t in texts), word


def test_lines_a_lagging_memory_md_shows_recall_where_their_entry_went(tmp_path: Path) -> None:
    """After a crash MEMORY.md may still show entries the database has since merged away or
    superseded. A repeat of a merged one, or its block quoted back, recalls the entry it went
    into; a superseded one is no longer ours (saying it again is evidence); a block no
    decision names (a MEMORY.md older than the database) is ours, as before."""
    from dreaming.app import App
    from dreaming.ingest import claims
    from dreaming.ingest.candidates import Folder
    from dreaming.memory import memory_file as mf

    merged = "The user keeps the locker code in the blue notebook."
    replaced = "The user's manager for the billing migration is Priya."
    seeded = "The user waters the fern on the balcony every Friday evening."
    blocks = [(mf.entry_key(t), t) for t in (merged, replaced, seeded)]
    (tmp_path / "workspace").mkdir(parents=True)
    memory = tmp_path / "workspace" / "MEMORY.md"
    memory.write_text("# Memory\n" + mf.apply_entries(mf.parse(""), blocks).render())
    into = "m:00000000000000aa"
    went: dict[str, str | None] = {blocks[0][0]: into, blocks[1][0]: None}
    asked: list[set[str]] = []

    def successors(keys: Any) -> dict[str, str | None]:
        asked.append(set(keys))
        return {k: went[k] for k in keys if k in went}

    app = App.open(tmp_path, None, env={})
    try:
        with app.engine("main").connect() as conn:
            folder = Folder.load(
                conn, "main", app.settings, memory, tmp_path / "no-dreams.md", successors
            )
    finally:
        app.close()
    assert asked == [{k for k, _ in blocks}]  # the database knows none of them

    def recalls(said: str) -> str | None:
        (claim,) = claims.extract(said, min_words=3, max_words=60)
        return folder.recalled_entry(claim)

    assert recalls(merged) == into
    assert recalls(replaced) is None
    assert recalls(seeded) == blocks[2][0]
    assert folder.shown == {blocks[0][0]: into, blocks[2][0]: blocks[2][0]}


def test_tombstoned_session_is_never_read(state: Path) -> None:
    engine = open_engine(state / "dreaming" / "agents" / "main.sqlite")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO tombstones (agent, session_id, reason, created_at)"
                " VALUES ('main', 's2', 'forgotten', '2026-03-09')"
            )
        )
    out = light(state)["main"]
    assert out["sessions"]["not_admitted"]["forgotten"] == 1
    assert "satay" not in corpus_text(state)


def test_crash_between_commit_and_file_write_is_repaired(state: Path) -> None:
    light(state)
    folder = state / "workspace/memory/.dreams/session-corpus"
    files = sorted(folder.glob("*.txt"))
    expected = {p.name: p.read_text() for p in files}
    files[0].unlink()
    engine = open_engine(state / "dreaming" / "agents" / "main.sqlite")
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO corpus_dirty_days VALUES ('main', '{files[0].stem}')"))
    light(state)
    assert {p.name: p.read_text() for p in sorted(folder.glob("*.txt"))} == expected


def test_unknown_agent_is_a_clean_error(state: Path) -> None:
    from dreaming.cli import _run  # noqa: F401

    result = CliRunner().invoke(
        cli, ["--state-dir", str(state), "run", "--phase", "light", "--agent", "nobody"]
    )
    assert result.exit_code == 2
    assert "unknown agent" in result.output


def test_a_new_candidate_row_equals_one_built_from_the_model(
    backend: Backend, tmp_path: Path
) -> None:
    """fold inserts new candidates naming a few columns and leaves the rest to the table's DDL
    defaults: those must be the model's defaults, on both backends."""
    if backend.url is None:
        engine = open_engine(tmp_path / "a.sqlite")
    else:
        engine = open_shared_engine(backend.url)
    named = {
        "agent": "a",
        "text": "t",
        "tokens": "x y",
        "durable_cue": True,
        "updated_at": DAY,
        "stale": True,
        "speaker": "Caroline",
    }
    assert set(_NEW_COLUMNS) == set(named) | {"key"}
    model = CandidateRow(key="c:model", **named)
    from_model = {c.name: getattr(model, c.name) for c in CANDIDATES.columns if c.name != "id"}
    try:
        with engine.begin() as conn:
            conn.execute(_INSERT_NEW, [{**named, "key": "c:fold"}])
            conn.execute(insert(CANDIDATES), [from_model])
            rows = {
                r["key"]: {k: v for k, v in r.items() if k not in ("id", "key")}
                for r in conn.execute(select(CANDIDATES)).mappings()
            }
    finally:
        engine.dispose()
    assert rows["c:fold"] == rows["c:model"]


def test_normalize_collapses_every_unicode_space_and_drops_controls() -> None:
    import re

    from dreaming.ingest.corpus import normalize

    def plain(raw: str, max_chars: int) -> str:
        out = re.sub(r"\s+", " ", re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", "", raw)).strip()
        return out if len(out) <= max_chars else out[: max_chars - 1].rstrip() + "…"

    for raw in (
        "  a\tb\r\n c\x0b d\x0c e\x1c f\x85 g\xa0 h\u2028 i\u3000 j \x00k\x07l\x7f ",
        "\n\n",
        "one line",
        "x " * 50,
    ):
        for max_chars in (5, 80, 2000):
            assert normalize(raw, max_chars) == plain(raw, max_chars)
