"""MEMORY.md's capacity budget (issue #22 part 5): the whole file, operator text included, stays
within `[memory] max_chars` / `max_lines`; what does not fit is archived (least valuable
first; standing instructions and constraints last) in `memory/dreaming-archive.md`, with its
lineage, and comes back when said again or when room frees up. Forget, undo, verify,
`entries --archived` and `status` reach the archive; operator text alone over the budget is
reported, never cut."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import bindparam, func, select, text

from dreaming import faults
from dreaming.app import App
from dreaming.cli import cli
from dreaming.config import Capacity, Settings, Source, SourceKind
from dreaming.ingest import salience
from dreaming.memory import archive, capacity, memory_file, memory_sync
from dreaming.memory.capacity import Worth
from dreaming.openclaw_config import load_openclaw
from dreaming.paths import Paths
from dreaming.store.tables import CANDIDATES
from tests import backends
from tests.openclaw_builder import FakeOpenClaw, append

OPERATOR = "# MEMORY.md\n\nOperator notes stay exactly as they are.\n"
TOMAS = "My brother Tomas lives in Porto and teaches chemistry."
LINTER = "Always run the linter before committing code."
ANNA = "My sister Anna lives in Lisbon and works as an architect."
ALLERGY = "I'm allergic to peanuts, please remember that."
BLUEBIRD = "The staging database is called bluebird."
# What the owner said and when: Tomas and the linter rule a year before the rest (the agent's
# clock is the newest message, 2026-03-01).
SAID = [
    ("s-tomas", datetime(2025, 3, 1, 9, tzinfo=UTC), TOMAS),
    ("s-linter", datetime(2025, 3, 8, 9, tzinfo=UTC), LINTER),
    ("s-anna", datetime(2026, 2, 20, 9, tzinfo=UTC), ANNA),
    ("s-allergy", datetime(2026, 2, 27, 9, tzinfo=UTC), ALLERGY),
    ("s-bluebird", datetime(2026, 3, 1, 9, tzinfo=UTC), BLUEBIRD),
]
ROOMY = "[memory]\nmax_chars = 100000\n"


def build(root: Path, config: str = ROOMY, operator: str = OPERATOR) -> FakeOpenClaw:
    oc = FakeOpenClaw(root)
    for sid, when, said in SAID:
        turns = [("user", said), ("assistant", "Noted, thanks.")]
        oc.session("main", sid, turns, key=f"agent:main:{sid}", start=when, chatType="direct")
    (root / "workspace").mkdir(parents=True)
    (root / "workspace" / "MEMORY.md").write_text(operator)
    configure(root, config)
    return oc


def configure(root: Path, config: str) -> None:
    (root / "dreaming.toml").write_text(config)
    backends.CURRENT.configure(root)


def invoke(root: Path, *args: str) -> tuple[int, str]:
    from dreaming.cli import (  # noqa: F401
        _entries,
        _forget,
        _repair,
        _review,
        _run,
        _runs,
        _status,
        _verify,
    )

    base = ["--state-dir", str(root), "--config", str(root / "dreaming.toml")]
    result = CliRunner(env={"OPENAI_API_KEY": ""}).invoke(cli, [*base, *args])
    return result.exit_code, result.output


def cli_json(root: Path, *args: str) -> Any:
    code, out = invoke(root, *args, "--json")
    assert code == 0, out
    return json.loads(out)


def night(root: Path) -> dict[str, Any]:
    """A night; main's deep summary."""
    result = cli_json(root, "run", "--agent", "main")
    deep: dict[str, Any] = result["agents"]["main"]["deep"]
    return deep


def memory(root: Path) -> str:
    return (root / "workspace" / "MEMORY.md").read_text()


def archive_path(root: Path) -> Path:
    return root / "workspace" / "memory" / "dreaming-archive.md"


def entries(root: Path) -> dict[str, tuple[str, str]]:
    """key -> (text, status) of main's entries."""
    app = App.open(root, root / "dreaming.toml", env={})
    try:
        with app.engine("main").connect() as conn:
            rows = conn.execute(
                text("SELECT key, text, status FROM entries WHERE agent = 'main'")
            ).all()
    finally:
        app.close()
    return {k: (t, s) for k, t, s in rows}


def key_of(root: Path, fragment: str) -> str:
    found = [k for k, (t, _) in entries(root).items() if fragment in t]
    assert len(found) == 1, (fragment, entries(root))
    return found[0]


def status_of(root: Path, fragment: str) -> str:
    return entries(root)[key_of(root, fragment)][1]


def cap_fitting(root: Path, *fragments: str) -> int:
    """The characters of MEMORY.md holding the operator's text and exactly the entries
    whose text has one of `fragments`."""
    chosen = [(k, t) for k, (t, _) in entries(root).items() if any(f in t for f in fragments)]
    assert len(chosen) == len(fragments)
    doc = memory_file.apply_entries(memory_file.parse(OPERATOR), chosen, salience.group_of)
    return capacity.measure(doc.render())[0]


def blocks(content: str) -> set[str]:
    return {b.key for b in memory_file.parse(content).blocks}


def assert_agree(root: Path) -> None:
    """MEMORY.md holds the live entries, the archive the archived ones, and verify passes."""
    held = entries(root)
    live = {k for k, (_, s) in held.items() if s == "live"}
    shelved = {k for k, (_, s) in held.items() if s == "archived"}
    assert blocks(memory(root)) == live
    shelf = archive_path(root)
    assert (blocks(shelf.read_text()) if shelf.exists() else set()) == shelved
    if shelved:
        assert shelf.read_text().startswith(archive.HEADER)
    code, out = invoke(root, "verify", "--agent", "main")
    assert code == 0, out


@pytest.fixture
def roomy(tmp_path: Path) -> Path:
    """A night with room for everything: five live entries, no archive."""
    root = tmp_path / "state"
    build(root)
    night(root)
    assert {s for _, s in entries(root).values()} == {"live"} and len(entries(root)) == 5
    assert not archive_path(root).exists()
    return root


def squeeze(root: Path, *fragments: str) -> dict[str, Any]:
    """Shrink the budget to what holds exactly `fragments`, and run a (quiet) night."""
    configure(root, f"[memory]\nmax_chars = {cap_fitting(root, *fragments)}\n")
    return night(root)


# -- placement, as a function ---------------------------------------------------------------


def test_least_valuable_go_first_and_standing_entries_last() -> None:
    doc = memory_file.parse(OPERATOR)

    def w(name: str, value: float, standing: bool = False) -> Worth:
        body = f"The {name} fact is worth keeping here."
        return Worth(memory_file.entry_key(body), body, value, standing)

    worths = [w("rule", 0.2, True), w("high", 3.0), w("mid", 2.0), w("low", 1.0)]
    line = len(memory_file.render_line(memory_file.shortest(worths[1].key), worths[1].text))
    # Room for the operator's text, two groups' headings and two lines.
    room = capacity.measure(
        memory_file.apply_entries(
            doc, [(x.key, x.text) for x in worths[:2]], salience.group_of
        ).render()
    )[0]
    placed, rendered = capacity.place(doc, worths, Capacity(room, None))
    by_name = {x.text.split()[1]: x.key for x in worths}
    # The rule stays whatever its value; of the rest, the most valuable.
    assert set(placed.kept) == {by_name["rule"], by_name["high"]}
    assert placed.archived == (by_name["mid"], by_name["low"])
    assert rendered.startswith(OPERATOR) and capacity.measure(rendered)[0] <= room
    assert placed.over is None and line > 0
    # Less room: the rule is the last to go.
    placed, _ = capacity.place(doc, worths, Capacity(room - line, None))
    assert placed.kept == (by_name["rule"],)
    # Lines bound it too: the operator's 3, a heading's 2, one line.
    placed, rendered = capacity.place(doc, worths, Capacity(None, 6))
    assert placed.kept == (by_name["rule"],) and capacity.measure(rendered)[1] == 6


def _a_file_and_its_entries(n: int) -> tuple[memory_file.Document, list[Worth]]:
    """MEMORY.md as files come: operator text, a legacy block, a line whose text differs
    from the database's in case (the same key), a person's edit standing for an entry, and
    an entry with no text; then `n` entries the file does not hold yet."""

    def w(body: str, value: float = 1.0) -> Worth:
        return Worth(memory_file.entry_key(body), body, value, False)

    held = [w("Straße is where the office is."), w("The legacy fact stays."), w("The edited one.")]
    text = (
        OPERATOR
        + memory_file.render_line(held[0].key, "STRASSE is where the office is.")
        + memory_file.render_block(held[1].key, held[1].text)
        + memory_file.render_line(held[2].key[:8], "The edited one, changed by hand.")
    )
    fresh = [w(f"Fact number {i} about the 😀 project.", i / 7) for i in range(n)]
    return memory_file.parse(text), [*held, w("   "), *fresh]


@pytest.mark.parametrize("n", [0, 3, 40])
def test_the_floor_under_the_layout_never_decides_otherwise(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc, worths = _a_file_and_its_entries(n)
    edited = {b.key for b in doc.edited_blocks()}
    movable = [x for x in worths if x.key not in edited]
    fixed = capacity.measure(memory_file.apply_entries(doc, []).render())
    whole = capacity.measure(
        memory_file.apply_entries(doc, [(x.key, x.text) for x in worths]).render()
    )
    floor = capacity._at_least(*fixed, doc, movable)
    assert floor[0] <= whole[0] and floor[1] <= whole[1]
    for crlf in (False, True):
        budgets = [Capacity(c, None) for c in range(0, whole[0] + 40, 7)]
        budgets += [Capacity(None, k) for k in range(0, whole[1] + 3)]
        # Claude Code's bytes: the floor (counted in characters) is under them too.
        budgets += [Capacity(c, None, unit="bytes") for c in range(0, whole[0] + 120, 11)]
        with_floor = [capacity.place(doc, worths, b, crlf=crlf) for b in budgets]
        monkeypatch.setattr(capacity, "_at_least", lambda *a: (0, 0))
        assert [capacity.place(doc, worths, b, crlf=crlf) for b in budgets] == with_floor
        monkeypatch.undo()


def _one_char_entry_on_a_last_line_without_its_break() -> tuple[str, list[Worth]]:
    key = memory_file.entry_key("x")
    line = memory_file.render_line(key[:8], "x").rstrip("\n")
    return "Operator note.\n" + line, [Worth(key, "x", 1.0, False)]


def _a_legacy_block_after_a_line_that_then_reads_as_an_edit() -> tuple[str, list[Worth]]:
    # Removing the block that begins mid-line leaves the line before it standing alone: read
    # again, it is a person's edit of the entry, which then gets no line of its own.
    body = "The user lives in Tokyo."
    key = memory_file.entry_key(body)
    old = memory_file.render_block(memory_file.entry_key("old fact"), "old fact")
    return f"- The user lives in Kyoto now <!--{key[:8]}-->" + old, [Worth(key, body, 1.0, False)]


@pytest.mark.parametrize(
    "case",
    [
        _one_char_entry_on_a_last_line_without_its_break,
        _a_legacy_block_after_a_line_that_then_reads_as_an_edit,
    ],
)
def test_the_floor_holds_at_the_edges(case: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    text, worths = case()
    doc = memory_file.parse(text)
    whole = capacity.measure(
        memory_file.apply_entries(doc, [(w.key, w.text) for w in worths]).render()
    )
    fixed = capacity.measure(memory_file.apply_entries(doc, []).render())
    floor = capacity._at_least(*fixed, doc, worths)
    assert floor[0] <= whole[0] and floor[1] <= whole[1]
    budgets = [Capacity(whole[0], None), Capacity(None, whole[1])]
    with_floor = [capacity.place(doc, worths, b) for b in budgets]
    assert all(p.kept for p, _ in with_floor)  # it fits exactly
    monkeypatch.setattr(capacity, "_at_least", lambda *a: (0, 0))
    assert [capacity.place(doc, worths, b) for b in budgets] == with_floor


def test_far_over_the_budget_every_entry_is_not_laid_out(monkeypatch: pytest.MonkeyPatch) -> None:
    _, worths = _a_file_and_its_entries(2000)
    doc = memory_file.parse(OPERATOR)  # a file of lines (one with a legacy block is laid out)
    laid: list[int] = []
    apply = memory_file.apply_entries
    monkeypatch.setattr(
        capacity.memory_file,
        "apply_entries",
        lambda d, e, *a: laid.append(len(e)) or apply(d, e, *a),
    )
    placed, _ = capacity.place(doc, worths, Capacity(2000, None))
    assert 0 < len(placed.kept) < 100 and max(laid) < 100


def test_operator_text_alone_over_the_budget_is_reported_not_cut() -> None:
    long_text = OPERATOR + "A long operator note. " * 40 + "\n"
    doc = memory_file.parse(long_text)
    worth = Worth(memory_file.entry_key("The sky is blue."), "The sky is blue.", 1.0, True)
    placed, rendered = capacity.place(doc, [worth], Capacity(300, None))
    assert rendered == long_text and placed.archived == (worth.key,)
    assert placed.over is not None and "[memory] max_chars" in placed.over  # what to change
    assert f"{capacity.measure(long_text)[0]:,} characters" in placed.over


def test_characters_are_counted_as_the_agent_counts_them() -> None:
    # OpenClaw is JavaScript: a string's length is in UTF-16 code units; CRLF adds one each.
    assert capacity.measure("a😀\n") == (4, 1)
    assert capacity.measure("a\nb\n", crlf=True) == (6, 2)
    assert capacity.measure("a\nb") == (3, 2)


def test_budget_settings_per_agent_and_claude_codes_200_lines(tmp_path: Path) -> None:
    settings = Settings.model_validate(
        {
            "memory": {"max_chars": 9000, "max_lines": 80},
            "agents": {"bob": {"max_chars": 4000, "max_lines": 40}},
            "sources": [{"kind": "claude-code", "path": str(tmp_path), "agent": "proj"}],
        }
    )
    paths = Paths(tmp_path, settings)
    assert (paths.capacity("main").max_chars, paths.capacity("main").max_lines) == (9000, 80)
    assert (paths.capacity("bob").max_chars, paths.capacity("bob").max_lines) == (4000, 40)
    plain = Paths(tmp_path, Settings())
    assert plain.capacity("main") == Capacity(12_000, None, 180.0, "bootstrapMaxChars", "")
    claude = Paths(
        tmp_path,
        Settings(sources=(Source(kind=SourceKind.CLAUDE_CODE, path=tmp_path, agent="proj"),)),
    )
    assert claude.capacity("proj").max_lines == 200
    assert plain.archive_file("main") == tmp_path / "workspace" / "memory" / "dreaming-archive.md"


def test_claude_code_is_held_to_its_25_kb_in_bytes_not_to_openclaws_bootstrap(
    tmp_path: Path,
) -> None:
    """Claude Code loads 200 lines or 25 KB of a project's MEMORY.md and never reads
    openclaw.json: a bootstrapMaxChars there bounds OpenClaw's agents only."""
    (tmp_path / "openclaw.json").write_text(
        json.dumps({"agents": {"defaults": {"bootstrapMaxChars": 100}}})
    )
    projects = tmp_path / "projects"
    (projects / "-home-ana-src-acme").mkdir(parents=True)
    source = Source(kind=SourceKind.CLAUDE_CODE, path=projects, agent="claude")
    openclaw = load_openclaw(tmp_path, None, {})
    paths = Paths(tmp_path, Settings(sources=(source,)), openclaw)
    acme = "claude:-home-ana-src-acme"
    assert paths.claude_project(acme) is not None
    assert paths.capacity(acme) == Capacity(
        25_000, 200, 180.0, "Claude Code loads 25 KB", "Claude Code loads 200 lines", "bytes"
    )
    assert paths.capacity("main") == Capacity(100, None, 180.0, "bootstrapMaxChars", "")
    # A setting says characters, whoever loads the file.
    own = Settings.model_validate(
        {
            "sources": [{"kind": "claude-code", "path": str(projects), "agent": "claude"}],
            "agents": {acme: {"max_chars": 4000}},
        }
    )
    assert Paths(tmp_path, own, openclaw).capacity(acme) == Capacity(
        4000, 200, 180.0, f"[agents.{acme}] max_chars", "Claude Code loads 200 lines"
    )


def test_a_byte_budget_holds_what_claude_code_loads_of_text_in_any_script() -> None:
    doc = memory_file.parse(OPERATOR)
    said = [f"Die Straße Nummer {i} führt zum Büro in 東京都渋谷区 und weiter." for i in range(30)]
    worths = [Worth(memory_file.entry_key(b), b, 1.0 + i / 100, False) for i, b in enumerate(said)]
    budget = 1500
    by_chars, in_chars = capacity.place(doc, worths, Capacity(budget, None))
    by_bytes, in_bytes = capacity.place(doc, worths, Capacity(budget, None, unit="bytes"))
    assert capacity.measure(in_chars)[0] <= budget < len(in_chars.encode("utf-8"))
    assert len(in_bytes.encode("utf-8")) <= budget == by_bytes.max_chars
    assert by_bytes.chars == len(in_bytes.encode("utf-8")) and by_bytes.unit == "bytes"
    assert 0 < len(by_bytes.kept) < len(by_chars.kept)
    # As full as it gets: the next entry of worth would not fit beside them.
    ranked = sorted((w for w in worths if w.key in by_bytes.archived), key=Worth.rank)
    more = [(w.key, w.text) for w in worths if w.key in by_bytes.kept or w.key == ranked[0].key]
    bigger = memory_file.apply_entries(doc, more).render()
    assert len(bigger.encode("utf-8")) > budget
    assert capacity.measure("ü\n", crlf=True, unit="bytes") == (4, 1)
    over = capacity.place(memory_file.parse("ü" * 40), [], Capacity(50, None, unit="bytes"))[0]
    assert over.over is not None and "80 bytes, over MEMORY.md's budget of 50" in over.over


# -- a night under the budget ----------------------------------------------------------------


@pytest.mark.usefixtures("backend")
def test_the_budget_holds_with_operator_text_and_the_rest_is_archived(roomy: Path) -> None:
    cap = cap_fitting(roomy, LINTER, ALLERGY, ANNA, BLUEBIRD)
    configure(roomy, f"[memory]\nmax_chars = {cap}\n")
    deep = night(roomy)
    content = memory(roomy)
    assert content.startswith(OPERATOR)  # the operator's text, byte for byte
    assert capacity.measure(content)[0] <= cap
    # Tomas, said a year ago and no rule, is worth least: the one archived.
    assert status_of(roomy, "Tomas") == "archived" and "Tomas" not in content
    shelf = archive_path(roomy).read_text()
    assert "Tomas" in shelf and "Anna" not in shelf
    assert deep["memory"]["archived_now"] == [key_of(roomy, "Tomas")]
    assert deep["memory"]["chars"] <= cap == deep["memory"]["max_chars"]
    # Its lineage stays: the origin of the session it came from.
    assert {o["session_id"] for o in entry_json(roomy, "Tomas")["origins"]} == {"s-tomas"}
    assert_agree(roomy)


def entry_json(root: Path, fragment: str) -> dict[str, Any]:
    data: dict[str, Any] = cli_json(root, "entries", "show", key_of(root, fragment))
    return data


def test_instructions_and_constraints_are_archived_last(roomy: Path) -> None:
    # Room for two entries: the rule and the allergy, though the facts score higher.
    squeeze(roomy, LINTER, ALLERGY)
    assert status_of(roomy, "linter") == status_of(roomy, "allergic") == "live"
    for fact in ("Tomas", "Anna", "bluebird"):
        assert status_of(roomy, fact) == "archived"
    # Room for one: the older rule goes before the recent constraint? Both are standing;
    # the one worth less (said a year ago) goes.
    squeeze(roomy, ALLERGY)
    assert status_of(roomy, "allergic") == "live" and status_of(roomy, "linter") == "archived"
    assert_agree(roomy)


def test_an_archived_entry_comes_back_when_said_again(roomy: Path) -> None:
    squeeze(roomy, LINTER, ALLERGY, ANNA, BLUEBIRD)
    tomas = key_of(roomy, "Tomas")
    assert entries(roomy)[tomas][1] == "archived"
    path = roomy / "agents" / "main" / "sessions" / "s-bluebird.jsonl"
    append(path, "user", TOMAS, datetime(2026, 3, 5, 9, tzinfo=UTC), "again-1")
    deep = night(roomy)
    # Said again: worth more than the oldest of the rest now; back, under its own key.
    assert entries(roomy)[tomas][1] == "live" and "Tomas" in memory(roomy)
    assert "Tomas" not in archive_path(roomy).read_text()
    assert tomas in deep["memory"]["restored"] and len(deep["memory"]["archived_now"]) == 1
    assert_agree(roomy)


def test_an_archived_entry_comes_back_when_room_frees_up(roomy: Path) -> None:
    squeeze(roomy, LINTER, ALLERGY)
    assert archive_path(roomy).exists()
    configure(roomy, ROOMY)
    deep = night(roomy)
    assert {s for _, s in entries(roomy).values()} == {"live"}
    assert not archive_path(roomy).exists() and len(deep["memory"]["restored"]) == 3
    assert_agree(roomy)


def test_forget_purges_an_archived_entry_and_its_archive_line(roomy: Path) -> None:
    squeeze(roomy, LINTER, ALLERGY, ANNA, BLUEBIRD)
    tomas = key_of(roomy, "Tomas")
    report = cli_json(roomy, "forget", "--agent", "main", "--session", "s-tomas")
    assert tomas in report["entries_removed"]
    assert tomas not in entries(roomy)
    # Nowhere: not in the archive (gone with its last entry), MEMORY.md, nor a backup.
    assert not archive_path(roomy).exists()
    for path in (roomy / "workspace").rglob("*"):
        if path.is_file():
            assert "Tomas" not in path.read_text(errors="replace"), path
    app = App.open(roomy, roomy / "dreaming.toml", env={})
    try:
        with app.engine("main").connect() as conn:
            assert not any("Tomas" in c for _, c in memory_sync.backups(conn, "main"))
    finally:
        app.close()
    assert_agree(roomy)


def test_forgetting_a_loaded_entry_frees_room_for_an_archived_one(roomy: Path) -> None:
    squeeze(roomy, LINTER, ALLERGY, ANNA, BLUEBIRD)
    cli_json(roomy, "forget", "--agent", "main", "--session", "s-anna")
    assert status_of(roomy, "Tomas") == "live"  # the purge's write placed it again
    assert_agree(roomy)


def test_undo_reaches_archived_entries(tmp_path: Path) -> None:
    root = tmp_path / "state"
    build(root, config="[memory]\nmax_chars = 200\n")
    deep = night(root)
    assert deep["memory"]["archived_now"]
    run_id = deep["run_id"]
    cli_json(root, "runs", "undo", str(run_id), "--agent", "main")
    assert entries(root) == {} and not archive_path(root).exists()
    assert memory(root) == OPERATOR
    assert_agree(root)


def test_a_correction_supersedes_an_archived_entry_through_review(roomy: Path) -> None:
    # Tomas is archived; the owner says he moved: the archived fact is superseded (never
    # left standing beside its correction), staged for review like any decision.
    squeeze(roomy, LINTER, ALLERGY, ANNA, BLUEBIRD)
    tomas = key_of(roomy, "Tomas")
    cap = cap_fitting(roomy, LINTER, ALLERGY, ANNA, BLUEBIRD)
    configure(roomy, f'[memory]\nmax_chars = {cap}\n[deep]\napply = "review"\n')
    path = roomy / "agents" / "main" / "sessions" / "s-bluebird.jsonl"
    moved = "My brother Tomas moved to Braga last month."
    append(path, "user", moved, datetime(2026, 3, 5, 9, tzinfo=UTC), "moved-1")
    deep = night(roomy)
    staged = [d for d in deep["decisions"] if d.get("proposal")]
    assert [(d["action"], d["targets"]) for d in staged] == [("supersede", [tomas])]
    assert entries(roomy)[tomas][1] == "archived"  # nothing changes before a person decides
    cli_json(roomy, "review", "accept", "--all", "--agent", "main")
    assert tomas not in entries(roomy) and "Porto" not in archive_path(roomy).read_text()
    assert status_of(roomy, "Braga") == "live"
    assert {o["session_id"] for o in entry_json(roomy, "Braga")["origins"]} == {
        "s-tomas",
        "s-bluebird",
    }
    assert_agree(roomy)


def test_the_report_shows_archived_entries(roomy: Path) -> None:
    from dreaming.cli import _report  # noqa: F401

    squeeze(roomy, LINTER, ALLERGY, ANNA, BLUEBIRD)
    out = roomy / "report.html"
    code, said = invoke(roomy, "report", "--agent", "main", "--out", str(out))
    assert code == 0, said
    page = out.read_text()
    assert '<span class="badge archived">archived</span>' in page and "Tomas" in page
    assert "Moved to the archive" in page and key_of(roomy, "Tomas") in page


def test_verify_catches_a_tampered_archive(roomy: Path) -> None:
    squeeze(roomy, LINTER, ALLERGY, ANNA)
    shelf = archive_path(roomy)
    good = shelf.read_text()
    shelf.write_text(good.replace("Porto", "Paris"))
    code, out = invoke(roomy, "verify", "--agent", "main")
    assert code != 0 and "archive_file" in out and key_of(roomy, "Tomas") in out
    # The bluebird line without its key comment: no longer an entry line of ours.
    shelf.write_text(re.sub(r"(bluebird[^\n]*?) <!--m:[0-9a-f]+-->", r"\1", good))
    code, out = invoke(roomy, "verify", "--agent", "main")
    assert code != 0 and "archive_file" in out
    shelf.unlink()
    code, out = invoke(roomy, "verify", "--agent", "main")
    assert code != 0 and "has no line in" in out
    deep = night(roomy)  # the next run rewrites it from the database
    assert deep["memory"]["archive_repaired"] and shelf.read_text() == good
    assert_agree(roomy)


def test_a_lost_database_adopts_the_archive_as_it_adopts_memory_md(roomy: Path) -> None:
    squeeze(roomy, LINTER, ALLERGY, ANNA)
    shown = blocks(memory(roomy)) | blocks(archive_path(roomy).read_text())
    for db in (roomy / "dreaming" / "agents").glob("main.sqlite*"):
        db.unlink()
    report = cli_json(roomy, "repair", "--agent", "main")
    assert {a["key"] for a in report["adopted"]} == shown  # the archive's lines too
    assert set(entries(roomy)) == shown
    assert {k for k, (_, st) in entries(roomy).items() if st == "archived"}
    night(roomy)  # the corpus is read again
    assert set(entries(roomy)) == shown
    assert_agree(roomy)


def test_entries_archived_lists_them(roomy: Path) -> None:
    squeeze(roomy, LINTER, ALLERGY, ANNA, BLUEBIRD)
    tomas = key_of(roomy, "Tomas")
    listed = cli_json(roomy, "entries", "--archived")["entries"]
    assert [(e["key"], e["status"]) for e in listed] == [(tomas, "archived")]
    assert tomas not in {e["key"] for e in cli_json(roomy, "entries")["entries"]}
    shown = entry_json(roomy, "Tomas")
    assert shown["status"] == "archived" and shown["archive"] == str(archive_path(roomy))
    code, out = invoke(roomy, "entries", "--archived")
    assert code == 0 and tomas in out and "Tomas" in out


def test_status_shows_the_fill(roomy: Path) -> None:
    squeeze(roomy, LINTER, ALLERGY, ANNA, BLUEBIRD)
    cap = cap_fitting(roomy, LINTER, ALLERGY, ANNA, BLUEBIRD)
    chars = capacity.measure(memory(roomy))[0]
    code, out = invoke(roomy, "status", "--agent", "main")
    assert code == 0, out
    assert f"MEMORY.md {chars:,} / {cap:,} chars, 1 archived" in out
    fill = cli_json(roomy, "status", "--agent", "main")["agents"][0]["memory"]["fill"]
    assert (fill["chars"], fill["max_chars"], fill["over"]) == (chars, cap, None)


def test_operator_text_over_the_budget_is_reported_in_the_run_and_status(
    tmp_path: Path,
) -> None:
    root = tmp_path / "state"
    long_text = OPERATOR + "\n".join(f"- operator note {i}: keep this." for i in range(20)) + "\n"
    build(root, config="[memory]\nmax_chars = 300\n", operator=long_text)
    deep = night(root)
    assert memory(root) == long_text  # never cut
    assert {s for _, s in entries(root).values()} == {"archived"}
    assert "operator text alone" in deep["memory"]["over_budget"]
    code, out = invoke(root, "run", "--agent", "main")
    assert code == 0 and "over budget: operator text alone is" in out
    code, out = invoke(root, "status", "--agent", "main")
    assert "operator text alone is" in out and "5 archived" in out
    code, out = invoke(root, "verify", "--agent", "main")
    assert code == 0, out  # a note, not a violation


def test_max_lines_per_agent(tmp_path: Path) -> None:
    root = tmp_path / "state"
    build(root, config="[agents.main]\nmax_lines = 7\n")
    night(root)
    assert capacity.measure(memory(root))[1] <= 7
    assert {s for _, s in entries(root).values()} == {"live", "archived"}
    assert_agree(root)


# -- crash safety ------------------------------------------------------------------------------


class Killed(BaseException):
    pass


def test_a_kill_between_the_archive_and_memory_md_loses_no_entry(
    roomy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    squeeze(roomy, LINTER, ALLERGY)  # three facts archived
    configure(roomy, f"[memory]\nmax_chars = {cap_fitting(roomy, LINTER, ALLERGY, ANNA)}\n")
    before_memory, before_archive = memory(roomy), archive_path(roomy).read_text()
    app = App.open(roomy, roomy / "dreaming.toml", env={})
    files = memory_sync.Files.of(app.paths, "main")
    engine = app.engine("main")

    def kill(name: str) -> None:
        if name == "archive.after_write":
            raise Killed

    monkeypatch.setattr(faults, "checkpoint", kill)
    try:
        with pytest.raises(Killed):
            memory_sync.reconcile(engine, "main", files)  # Anna comes back: a write
    finally:
        monkeypatch.undo()
    # The archive still holds Anna (MEMORY.md does not yet): every entry is in a file.
    assert memory(roomy) == before_memory and "Anna" in archive_path(roomy).read_text()
    held = set(entries(roomy))
    assert held <= blocks(memory(roomy)) | blocks(archive_path(roomy).read_text())
    code, out = invoke(roomy, "verify", "--agent", "main")
    assert code != 0 and "run again" in out
    # The next write converges: as if it had never been cut short.
    memory_sync.write(engine, "main", files, run_id=None)
    app.close()
    assert "Anna" in memory(roomy) and "Anna" not in archive_path(roomy).read_text()
    assert archive_path(roomy).read_text() != before_archive
    assert_agree(roomy)


def test_a_quiet_night_under_the_budget_changes_nothing(roomy: Path) -> None:
    squeeze(roomy, LINTER, ALLERGY, ANNA)
    files = {p: p.read_bytes() for p in (roomy / "workspace").rglob("*.md")}
    deep = night(roomy)
    assert deep["memory"]["archived_now"] == [] and deep["memory"]["restored"] == []
    assert {p: p.read_bytes() for p in (roomy / "workspace").rglob("*.md")} == files


def test_every_entrys_worth_is_the_same_read_in_chunks_or_in_one_pass(
    roomy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent whose entries name most of its candidates has them read in one pass over
    all its candidates, not a query per chunk of keys: the same worth either way."""
    app = App.open(roomy, roomy / "dreaming.toml", env={})
    try:
        with app.engine("main").connect() as conn:
            usual = capacity.worth(conn, "main", 30.0)  # five entries: one chunk
            passes: list[str] = []
            real = conn.execute

            def counted(statement: Any, *args: Any) -> Any:
                passes.append(str(statement))
                return real(statement, *args)

            monkeypatch.setattr(conn, "execute", counted)
            monkeypatch.setattr(capacity, "_CHUNK", 1)
            one_pass = capacity.worth(conn, "main", 30.0)
            many = select(func.count() + 10**9).where(CANDIDATES.c.agent == bindparam("agent"))
            monkeypatch.setattr(capacity, "_CANDIDATE_COUNT", many)  # the keys are few of them
            chunked = capacity.worth(conn, "main", 30.0)
    finally:
        app.close()
    assert usual and usual == one_pass == chunked
    assert any("count" in s.lower() for s in passes)
    reads = [s for s in passes if "candidates.score" in s]
    assert len(reads) == 1 + len(usual)  # one pass, then a chunk of one key per candidate
