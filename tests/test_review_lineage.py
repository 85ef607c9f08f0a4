"""Review mode keeps lineage (#23 item 2): a merge accepted before the add of its target
waits for it, one whose target was rejected is refused as stale, and verify catches an entry
whose text came from a session missing from its origins."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result
from sqlalchemy import text

from dreaming import demo
from dreaming.app import App
from dreaming.cli import _forget, _review, _runs, _verify, cli  # noqa: F401  (register)


def dreaming(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--state-dir", str(root), *args])


def staged(tmp_path: Path) -> Path:
    """The demo's night taken back and proposed again for review: #1 adds the peanut
    allergy as said in s-main-01, #2 merges a later restatement into that entry."""
    root = demo.build(tmp_path / "demo")
    assert dreaming(root, "run").exit_code == 0
    assert dreaming(root, "runs", "undo", "1", "--agent", "main").exit_code == 0
    assert dreaming(root, "promote", "--agent", "main", "--review").exit_code == 0
    listed = dreaming(root, "review", "list", "--agent", "main").output
    assert "#1 [pending] add" in listed and "#2 [pending] merge" in listed
    return root


def memory(root: Path) -> str:
    return (root / "workspace" / "MEMORY.md").read_text()


def test_a_merge_waits_for_the_add_of_its_target(tmp_path: Path) -> None:
    root = staged(tmp_path)
    early = dreaming(root, "review", "accept", "2", "--agent", "main")
    assert early.exit_code == 0, early.output
    assert "#2 not accepted" in early.output and "accept #1 first" in early.output
    assert "please remember" not in memory(root)
    # Accepted together, in order: the entry carries both candidates' sessions.
    both = dreaming(root, "review", "accept", "1", "2", "--agent", "main")
    assert both.exit_code == 0, both.output
    assert "please remember" in memory(root)
    gone = dreaming(root, "forget", "--agent", "main", "--session", "s-main-01")
    assert gone.exit_code == 0, gone.output
    assert "please remember" not in memory(root)
    assert dreaming(root, "verify").exit_code == 0


def test_a_merge_into_a_rejected_add_is_refused_as_stale(tmp_path: Path) -> None:
    root = staged(tmp_path)
    assert dreaming(root, "review", "reject", "1", "--agent", "main").exit_code == 0
    late = dreaming(root, "review", "accept", "2", "--agent", "main")
    assert "#2 refused as stale" in late.output and "#1 was rejected" in late.output
    assert "please remember" not in memory(root)


def test_verify_catches_text_from_a_session_missing_from_the_origins(tmp_path: Path) -> None:
    root = demo.build(tmp_path / "demo")
    assert dreaming(root, "run").exit_code == 0
    assert dreaming(root, "verify").exit_code == 0
    app = App.open(root, None, env={})
    try:
        with app.engine("main").begin() as conn:
            (key,) = conn.execute(
                text("SELECT key FROM entries WHERE text LIKE '%peanuts, please remember%'")
            ).one()
            # What a merge applied without its target's lineage left: none of the sessions
            # the text was said in (s-main-01, s-main-03) is among the origins.
            for table in ("origins", "entry_evidence"):
                conn.execute(
                    text(
                        f"DELETE FROM {table} WHERE entry_key = :k"
                        " AND session_id IN ('s-main-01', 's-main-03')"
                    ),
                    {"k": key},
                )
    finally:
        app.close()
    found = dreaming(root, "verify")
    assert found.exit_code != 0
    assert "text_from_unlisted_sessions" in found.output and "s-main-01" in found.output


def test_a_merge_into_an_entry_a_person_edited_is_refused_as_stale(tmp_path: Path) -> None:
    root = staged(tmp_path)
    assert dreaming(root, "review", "accept", "1", "--agent", "main").exit_code == 0
    path = root / "workspace" / "MEMORY.md"
    path.write_text(path.read_text().replace("please remember that", "remember it, always"))
    result = dreaming(root, "review", "accept", "2", "--agent", "main")
    assert "#2 refused as stale" in result.output and "a person edited" in result.output
    text = memory(root)
    assert text.count("allergic to peanuts") == 1, text  # the person's line alone
