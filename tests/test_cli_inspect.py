"""Inspecting memory from the CLI: `dreaming candidates` (what light collected and the gate
that holds each back), `entries show` with evidence text and key prefixes, and
`entries --evidence`. Assertions are about structure and invariants, not exact scores."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import text

from dreaming.cli import cli
from dreaming.memory.gates import Gate
from tests.deep_helpers import build_state, open_app
from tests.openclaw_builder import FakeOpenClaw

# Every test here runs on per-agent SQLite files and on a fleet's PostgreSQL database.
pytestmark = pytest.mark.usefixtures("backend")

GATES = {"passes", *(g.value for g in Gate)}
CANDIDATE_FIELDS = {
    "agent",
    "id",
    "key",
    "text",
    "score",
    "salience",
    "features",
    "gate",
    "status",
    "owner_lines",
    "agent_lines",
    "untrusted_lines",
    "system_lines",
    "sessions",
    "days",
    "first_seen",
    "last_seen",
    "durable_cue",
    "rem_boost",
    "evidence_count",
    "decided_evidence",
    "stale",
}
EVIDENCE_FIELDS = {"ref", "path", "session_id", "line", "role", "origin_class", "ts", "text"}
BLOCK_HEAD = re.compile(r"^\d+\.\d{3}  \S+ +features: ")
FOOTER = re.compile(r"^(\w+): ((?:[\w-]+ \d+(?:, )?)+)")
EVIDENCE_LINE = re.compile(r"^\s+\[(\w+)/sessions/\1/([^#\]]+)#L(\d+)\] (.*)$")


def invoke(root: Path, *args: str) -> Result:
    from dreaming.cli import _candidates, _entries, _forget, _run  # noqa: F401  (registers)

    base = ["--state-dir", str(root), "--config", str(root / "dreaming.toml")]
    return CliRunner().invoke(cli, [*base, *args])


def ok(root: Path, *args: str) -> str:
    result = invoke(root, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def as_json(root: Path, *args: str) -> Any:
    return json.loads(ok(root, *args, "--json"))  # one document, nothing else on stdout


def fails(root: Path, *args: str, code: int = 1) -> str:
    """The one-line error of a command that must fail (2: it named what does not exist)."""
    result = invoke(root, *args)
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dreaming: error: "), result.stderr
    return lines[0]


def sql(root: Path, statement: str, **params: Any) -> list[Any]:
    app = open_app(root)
    try:
        with app.engine("main").begin() as conn:
            result = conn.execute(text(statement), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        app.close()


@pytest.fixture
def night(tmp_path: Path) -> Path:
    """The demo's two agents after one night (light, REM, deep) with the deterministic
    consolidator and the default settings."""
    root = build_state(tmp_path / "s")
    ok(root, "run")
    return root


@pytest.fixture
def read_night(tmp_path: Path) -> Path:
    """The demo's agents after light alone: every candidate still pending."""
    root = build_state(tmp_path / "s")
    ok(root, "run", "--phase", "light")
    return root


def pending_in_db(root: Path) -> int:
    return int(
        sql(
            root,
            "SELECT count(*) FROM candidates WHERE agent = 'main' AND "
            "(status = 'pending' OR evidence_count > decided_evidence)",
        )[0][0]
    )


def live_keys(root: Path) -> list[str]:
    return [e["key"] for e in as_json(root, "entries")["entries"]]


def unique_prefix(key: str, others: list[str]) -> str:
    """The shortest prefix (at least 4 hex digits, without `m:`) no other key shares."""
    for n in range(4, len(key) - 1):
        prefix = key[2 : 2 + n]
        if not any(o != key and o[2:].startswith(prefix) for o in others):
            return prefix
    raise AssertionError(f"no unique prefix for {key}")


# --- dreaming candidates --------------------------------------------------------------------


def test_candidates_json_lists_pending_ones_with_their_gate(night: Path) -> None:
    data = as_json(night, "candidates", "--limit", "0")
    listed = data["candidates"]
    assert listed, "a night over the demo leaves pending candidates"
    assert set(data["gates"]) == {"main", "bob"}
    for c in listed:
        assert set(c) == CANDIDATE_FIELDS
        assert c["gate"] in GATES
        assert c["status"] == "pending" or c["evidence_count"] > c["decided_evidence"]
        assert c["gate"] != Gate.DECIDED.value
        assert isinstance(c["score"], float)
        assert c["salience"] is None or 0.0 <= c["salience"] <= 1.0
        assert isinstance(c["features"], list) and all(isinstance(f, str) for f in c["features"])
        assert c["key"].startswith("c:") and c["text"]
        if c["owner_lines"] + c["agent_lines"] == 0:
            assert c["gate"] == Gate.NO_SPEAKER.value
        if c["gate"] == "passes":
            assert c["score"] > 0 and c["owner_lines"] + c["agent_lines"] > 0
    for agent, counts in data["gates"].items():
        mine = [c for c in listed if c["agent"] == agent]
        assert set(counts) == GATES
        assert counts == {g: Counter(c["gate"] for c in mine)[g] for g in GATES}
        order = [(-c["score"], c["id"]) for c in mine]
        assert order == sorted(order), "by score, highest first, then id"
    main = [c for c in listed if c["agent"] == "main"]
    assert len(main) == pending_in_db(night) == sum(data["gates"]["main"].values())


def test_candidates_text_has_a_block_each_and_a_footer_that_adds_up(night: Path) -> None:
    out = ok(night, "candidates", "--agent", "main", "--limit", "0").splitlines()
    assert out[0].startswith("agent main: ")
    blocks = [i for i, line in enumerate(out) if BLOCK_HEAD.match(line)]
    pending = pending_in_db(night)
    assert len(blocks) == pending
    for i in blocks:
        assert out[i + 1].startswith("    #") and "said by " in out[i + 1]
        assert out[i + 2].startswith("    ") and out[i + 2].strip()
    footer = FOOTER.match(out[-1])
    assert footer is not None and footer.group(1) == "main", out[-1]
    counts = {name: int(n) for name, n in (p.rsplit(" ", 1) for p in footer.group(2).split(", "))}
    assert set(counts) <= GATES
    assert sum(counts.values()) == pending


def test_limit_shows_the_first_n_but_counts_them_all(read_night: Path) -> None:
    night = read_night
    assert pending_in_db(night) > 1
    everything = as_json(night, "candidates", "--agent", "main", "--limit", "0")
    one = as_json(night, "candidates", "--agent", "main", "--limit", "1")
    assert len(one["candidates"]) == 1
    assert one["candidates"][0] == everything["candidates"][0]
    assert one["gates"] == everything["gates"]
    text_out = ok(night, "candidates", "--agent", "main", "--limit", "1").splitlines()
    assert sum(1 for line in text_out if BLOCK_HEAD.match(line)) == 1
    assert f"showing 1 of {pending_in_db(night)}" in text_out[-1]


def test_all_includes_decided_candidates(night: Path) -> None:
    pending = as_json(night, "candidates", "--agent", "main")["candidates"]
    everything = as_json(night, "candidates", "--agent", "main", "--all", "--limit", "0")
    promoted = [c for c in everything["candidates"] if c["status"] == "promoted"]
    assert promoted, "deep promoted something tonight"
    assert all(c["gate"] == Gate.DECIDED.value for c in promoted)
    assert not {c["id"] for c in promoted} & {c["id"] for c in pending}
    assert {c["id"] for c in pending} <= {c["id"] for c in everything["candidates"]}
    assert everything["gates"]["main"]["decided"] == len(
        [c for c in everything["candidates"] if c["gate"] == "decided"]
    )
    total = sql(night, "SELECT count(*) FROM candidates WHERE agent = 'main'")[0][0]
    assert len(everything["candidates"]) == total


def test_unscored_columns_read_as_dashes_and_features_as_a_list(night: Path) -> None:
    """salience and features are NULL until scoring fills them; once set they show."""
    first = as_json(night, "candidates", "--agent", "main", "--limit", "1")["candidates"][0]
    sql(
        night, "UPDATE candidates SET salience = NULL, features = NULL WHERE id = :i", i=first["id"]
    )
    listed = as_json(night, "candidates", "--agent", "main", "--limit", "1")["candidates"][0]
    assert (listed["salience"], listed["features"]) == (None, [])
    block = ok(night, "candidates", "--agent", "main", "--limit", "1").splitlines()[1:3]
    assert block[0].endswith("features: -") and "salience - " in block[1]
    sql(
        night,
        "UPDATE candidates SET salience = 0.5, features = 'first-person durable' WHERE id = :i",
        i=first["id"],
    )
    listed = as_json(night, "candidates", "--agent", "main", "--limit", "1")["candidates"][0]
    assert (listed["salience"], listed["features"]) == (0.5, ["first-person", "durable"])
    block = ok(night, "candidates", "--agent", "main", "--limit", "1").splitlines()[1:3]
    assert block[0].endswith("features: first-person durable") and "salience 0.50" in block[1]


def test_candidates_of_an_agent_without_state_is_an_error(night: Path) -> None:
    FakeOpenClaw(night).session(
        "carol", "c-1", [("user", "I live in Oslo.")], start=datetime(2026, 3, 9, tzinfo=UTC)
    )
    assert "dreaming run --agent carol" in fails(night, "candidates", "--agent", "carol")
    assert "unknown agent" in fails(night, "candidates", "--agent", "nobody", code=2)


# --- dreaming entries show / entries --evidence ---------------------------------------------


def check_evidence(entry: dict[str, Any]) -> None:
    assert entry["evidence"], entry["key"]
    origins = {o["session_id"] for o in entry["origins"]}
    for ev in entry["evidence"]:
        assert set(ev) == EVIDENCE_FIELDS
        agent = entry["agent"]
        assert ev["ref"] == f"{agent}/sessions/{agent}/{ev['session_id']}#L{ev['line']}"
        assert Path(ev["path"]).name == f"{ev['session_id']}.jsonl"
        assert ev["session_id"] in origins
        assert isinstance(ev["text"], str) and ev["text"]
        assert ev["role"] and ev["origin_class"] and ev["ts"]


def test_entries_show_takes_a_unique_prefix_and_prints_evidence_text(night: Path) -> None:
    keys = live_keys(night)
    key = as_json(night, "entries", "--agent", "main")["entries"][0]["key"]
    prefix = unique_prefix(key, keys)
    whole = as_json(night, "entries", "show", key)
    check_evidence(whole)
    for given in (prefix, "m:" + prefix, key, key.upper()):
        assert as_json(night, "entries", "show", given) == whole, given
    out = ok(night, "entries", "show", prefix)
    assert out.startswith(f"{key} (agent main)")
    shown = [m for line in out.splitlines() if (m := EVIDENCE_LINE.match(line))]
    assert len(shown) == len(whole["evidence"])
    for m, ev in zip(shown, whole["evidence"], strict=True):
        assert (m.group(2), int(m.group(3))) == (ev["session_id"], ev["line"])
        date, rest = m.group(4).split(" ", 1)
        assert date == ev["ts"][:10]
        role, said = rest.split(": ", 1)
        assert role == ev["role"]
        assert said == ev["text"] or (said.endswith("…") and ev["text"].startswith(said[:-1]))
        assert len(said) <= 200


def test_ambiguous_or_unknown_prefix_is_a_one_line_error(night: Path) -> None:
    keys = live_keys(night)
    assert len(keys) >= 2
    message = fails(night, "entries", "show", "m:", code=2)
    assert f"matches {len(keys)} entries" in message
    assert all(k in message for k in keys[:10])
    assert "no live entry" in fails(night, "entries", "show", "m:zzzz", code=2)
    assert "no live entry" in fails(night, "entries", "show", "m:0000000000000000", code=2)
    assert "no live entry" in fails(night, "entries", "show", "%", code=2)


def test_entries_evidence_exports_every_entry_with_its_lines(night: Path) -> None:
    plain = as_json(night, "entries")["entries"]
    assert plain and all("evidence" not in e for e in plain)
    full = as_json(night, "entries", "--evidence")["entries"]
    assert [e["key"] for e in full] == [e["key"] for e in plain]
    assert {e["agent"] for e in full} == {"main", "bob"}
    for e in full:
        check_evidence(e)
        assert e["evidence"] == as_json(night, "entries", "show", e["key"])["evidence"]
        assert {k: v for k, v in e.items() if k != "evidence"} == next(
            p for p in plain if (p["agent"], p["key"]) == (e["agent"], e["key"])
        )
    out = ok(night, "entries", "--evidence").splitlines()
    assert sum(1 for line in out if EVIDENCE_LINE.match(line)) == sum(
        len(e["evidence"]) for e in full
    )
    assert (
        ok(night, "entries")
        == "\n".join(line for line in out if not EVIDENCE_LINE.match(line)) + "\n"
    )


def test_a_purged_line_shows_as_gone(night: Path) -> None:
    entry = as_json(night, "entries", "--agent", "main", "--evidence")["entries"][0]
    gone = entry["evidence"][0]
    sql(
        night,
        "DELETE FROM corpus_lines WHERE agent = 'main' AND session_id = :s AND line = :n",
        s=gone["session_id"],
        n=gone["line"],
    )
    shown = as_json(night, "entries", "show", entry["key"])
    after = shown["evidence"][0]
    assert (after["ref"], after["text"], after["role"], after["ts"]) == (
        gone["ref"],
        None,
        None,
        None,
    )
    assert shown["evidence"][1:] == entry["evidence"][1:]
    out = ok(night, "entries", "show", entry["key"])
    assert f"[{gone['ref']}] (text no longer in the corpus)" in out


def test_after_forget_the_evidence_is_gone_or_the_entry_is(night: Path) -> None:
    before = as_json(night, "entries", "--agent", "main", "--evidence")["entries"]
    entry = max(before, key=lambda e: len({ev["session_id"] for ev in e["evidence"]}))
    session = entry["evidence"][0]["session_id"]
    as_json(night, "forget", "--agent", "main", "--session", session)
    after = as_json(night, "entries", "--agent", "main", "--evidence")["entries"]
    for e in after:
        for ev in e["evidence"]:
            assert ev["session_id"] != session or ev["text"] is None
    if any(e["key"] == entry["key"] for e in after):
        out = ok(night, "entries", "show", entry["key"])
        assert "(text no longer in the corpus)" in out
    else:
        assert "no live entry" in fails(night, "entries", "show", entry["key"], code=2)


def test_claude_code_evidence_names_the_transcript_file_on_disk(tmp_path: Path) -> None:
    from tests import backends
    from tests.transcript_builders import cc_assistant, cc_user, text, write_jsonl

    root = tmp_path / "state"
    root.mkdir()
    transcript = write_jsonl(
        tmp_path / "projects" / "-home-ada-shop" / "9f1c2d.jsonl",
        [
            cc_user("Hi there.", uuid="u-1", ts="2026-02-01T10:00:00Z"),
            cc_user(
                "Always run the linter before committing.", uuid="u-2", ts="2026-02-01T10:01:00Z"
            ),
            cc_assistant(
                "m1",
                [text("Understood, I will always run the linter before committing.")],
                ts="2026-02-01T10:01:05Z",
            ),
            cc_user(
                "My name is Ada and I live in Lisbon with my husband Jorge since 2019.",
                uuid="u-3",
                ts="2026-02-01T10:02:00Z",
            ),
        ],
    )
    (root / "dreaming.toml").write_text(
        "read_state_dir = false\n"
        f'[[sources]]\nkind = "claude-code"\npath = "{tmp_path / "projects"}"\nagent = "coder"\n'
    )
    backends.CURRENT.configure(root)
    ok(root, "run")
    keys = live_keys(root)
    assert len(keys) == 2
    lines = transcript.read_text().splitlines()
    for key in keys:
        prefix = unique_prefix(key, keys)
        shown = as_json(root, "entries", "show", prefix)
        assert shown["key"] == key and shown["evidence"]
        out = ok(root, "entries", "show", prefix)
        assert "coder/sessions/coder" not in out
        for ev in shown["evidence"]:
            assert ev["path"] == str(transcript)
            assert ev["ref"] == f"{transcript}#L{ev['line']}"
            # The reference leads to the line that said it.
            assert ev["text"] in lines[ev["line"] - 1]
            assert f"[{transcript}#L{ev['line']}] 2026-02-01 {ev['role']}: {ev['text']}" in out
