"""A lost database (issue #23 item 1): deleted, or rolled back by a killed run whose write-ahead
log was deleted. The next night adopts the managed MEMORY.md lines it has no record of (as
`dreaming repair` does) instead of rebuilding the file from the empty database; `verify`
fails while such lines stand; lines of entries the database retired never come back.

Every run is `dreaming` over the demo state folder and real SQLite files: a killed run is a
real process (its crash point kills it), the others run in this process (tests/cli_process.py).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from datetime import timedelta
from pathlib import Path

from dreaming import demo
from dreaming.memory import memory_file
from tests.cli_process import in_process, process
from tests.openclaw_builder import append

CRASH_RC = 137
NEW_FACTS = (
    "Please remember that my car is a blue Volvo.",
    "My brother Tomas lives in Porto and teaches chemistry.",
    "Please remember that my gym membership renews every March.",
)
TONIGHT = "Please remember that my daughter Ines starts school in Coimbra in September."


def dreaming(root: Path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = ["--state-dir", str(root), *args]
    if crash is None:
        return in_process(argv)
    return process(argv, {"DREAMING_CRASH_AT": crash})


def ok(root: Path, *args: str) -> str:
    done = dreaming(root, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def memory_md(root: Path) -> Path:
    return root / "workspace" / "MEMORY.md"


def managed(root: Path) -> set[str]:
    return {b.key for b in memory_file.read(memory_md(root)).blocks}


def database(root: Path) -> Path:
    return root / "dreaming" / "agents" / "main.sqlite"


def entries_in_db(root: Path) -> set[str]:
    with sqlite3.connect(database(root)) as conn:
        return {k for (k,) in conn.execute("SELECT key FROM entries WHERE agent = 'main'")}


def first_night(tmp_path: Path) -> Path:
    root = demo.build(tmp_path / "state")
    ok(root, "run")
    assert managed(root), "the demo night wrote no managed entries"
    return root


def test_a_night_after_the_database_was_deleted_keeps_every_managed_line(
    tmp_path: Path,
) -> None:
    root = first_night(tmp_path)
    before = managed(root)
    for p in database(root).parent.glob("main.sqlite*"):
        p.unlink()

    # verify names the file, the count and the command, though main has no database now.
    done = dreaming(root, "verify")
    assert done.returncode == 1, done.stdout
    assert str(memory_md(root)) in done.stdout
    assert f"has {len(before)} managed line(s) the database has no record of" in done.stdout
    assert "dreaming repair --agent main" in done.stdout

    done = dreaming(root, "run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert before <= managed(root), "the night dropped managed lines it had no record of"
    assert f"agent main: adopted {len(before)} managed MEMORY.md entries" in done.stdout
    assert before <= entries_in_db(root)
    done = dreaming(root, "verify")
    assert done.returncode == 0, done.stdout
    assert "adopted from MEMORY.md" in done.stdout

    # The next night has nothing left to adopt and changes nothing.
    after = managed(root)
    again = dreaming(root, "run", "--json")
    assert again.returncode == 0, again.stderr
    runs = {r["agent"]: r for r in json.loads(again.stdout)["runs"]}
    assert "adopted" not in runs["main"]
    assert managed(root) == after


def test_a_night_after_a_killed_run_lost_its_write_ahead_log_keeps_every_managed_line(
    tmp_path: Path,
) -> None:
    root = first_night(tmp_path)
    session = root / "agents" / "main" / "sessions" / "s-main-07.jsonl"
    at = demo.BASE + timedelta(days=14)
    for i, text in enumerate(NEW_FACTS):
        append(session, "user", text, at + timedelta(minutes=i), f"lost-{i}")
    # The second night is killed right after it wrote MEMORY.md; its write-ahead log, with
    # every transaction of the night, is deleted: the database is the first night's again.
    done = dreaming(root, "run", "--agent", "main", crash="memory.after_write:1")
    assert done.returncode == CRASH_RC, done.stdout + done.stderr
    assert database(root).with_name("main.sqlite-wal").exists()
    for suffix in ("-wal", "-shm"):
        database(root).with_name("main.sqlite" + suffix).unlink(missing_ok=True)
    shown = managed(root)
    unknown = shown - entries_in_db(root)
    assert unknown, "the killed night wrote no entry the rolled-back database lacks"

    done = dreaming(root, "verify", "--agent", "main")
    assert done.returncode == 1, done.stdout
    assert f"has {len(unknown)} managed line(s) the database has no record of" in done.stdout

    # Tonight brings something new, so the night writes MEMORY.md.
    append(session, "user", TONIGHT, at + timedelta(days=1), "tonight")
    done = dreaming(root, "run")
    assert done.returncode == 0, done.stdout + done.stderr
    text = memory_md(root).read_text()
    assert TONIGHT.rstrip(".") in text, "the night wrote no MEMORY.md: nothing to test"
    assert shown <= managed(root), "the night dropped managed lines it had no record of"
    assert f"agent main: adopted {len(unknown)} managed MEMORY.md entries" in done.stdout
    assert all(fact.rstrip(".") in text for fact in NEW_FACTS[:2])
    assert dreaming(root, "verify").returncode == 0


def test_a_person_deleting_a_managed_line_still_retires_its_entry(tmp_path: Path) -> None:
    root = first_night(tmp_path)
    path = memory_md(root)
    content = path.read_text()
    gone = memory_file.read(path).blocks[0]
    path.write_text(content.replace(gone.raw, ""))
    report = json.loads(ok(root, "run", "--json"))
    deep = report["agents"]["main"]["deep"]
    assert deep["memory"]["removed_by_person"] == [gone.key]
    assert gone.key not in managed(root) and gone.key not in entries_in_db(root)
    assert all("adopted" not in r for r in report["runs"])


def test_a_memory_md_lagging_a_purge_is_not_adopted_back(tmp_path: Path) -> None:
    """Forget killed after its database part committed: MEMORY.md still shows the purged
    entries. Neither `repair` nor the next night brings them back."""
    root = first_night(tmp_path)
    purged_session = "s-main-01"
    preview = json.loads(
        ok(root, "forget", "--agent", "main", "--session", purged_session, "--dry-run", "--json")
    )
    removed = set(preview["entries_removed"])
    assert removed and removed <= managed(root)
    done = dreaming(
        root, "forget", "--agent", "main", "--session", purged_session, crash="forget.after_commit"
    )
    assert done.returncode == CRASH_RC, done.stdout + done.stderr
    assert removed <= managed(root), "the file no longer lags: nothing to test"

    done = dreaming(root, "verify", "--agent", "main")
    assert done.returncode == 1
    assert "managed line(s) the database has no record of" not in done.stdout

    out = json.loads(ok(root, "repair", "--agent", "main", "--json"))
    assert out["adopted"] == []
    assert not removed & managed(root) and not removed & entries_in_db(root)
    report = json.loads(ok(root, "run", "--json"))
    assert all("adopted" not in r for r in report["runs"])
    assert not removed & managed(root) and not removed & entries_in_db(root)
    assert dreaming(root, "verify").returncode == 0


def test_repair_adopts_what_a_lagging_file_shows_only_when_the_database_never_knew_it(
    tmp_path: Path,
) -> None:
    """A stale MEMORY.md (the file dreaming last wrote, an entry retired since) is not a lost
    database: `strays` sorts its line as retired; the same line with no record is adopted."""
    from sqlalchemy import create_engine

    from dreaming.repair import strays

    root = first_night(tmp_path)
    content = memory_md(root).read_text()
    key = memory_file.read(memory_md(root)).blocks[0].key
    engine = create_engine(f"sqlite:///{database(root)}")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM entries WHERE key = ?", (key,))
            # The file is exactly what dreaming last wrote: the entry was retired since.
            found = strays(conn, "main", content)
            assert [b.key for b in found.unrecorded] == [] and found.retired == [key]
            # The file is not ours (a person touched its operator text): the decision that
            # wrote the entry is a record of it.
            edited = content + "\nA note of the operator's.\n"
            found = strays(conn, "main", edited)
            assert [b.key for b in found.unrecorded] == [] and found.retired == [key]
            for table in ("decisions", "memory_backups", "entry_journal", "supersessions"):
                conn.exec_driver_sql(f"DELETE FROM {table}")
            found = strays(conn, "main", edited)
            assert [b.key for b in found.unrecorded] == [key]  # no record of it is left
            conn.exec_driver_sql(
                "INSERT INTO memory_backups (agent, run_id, content, created_at)"
                " VALUES ('main', NULL, ?, '2026-03-02 00:00:00')",
                (content,),
            )
            found = strays(conn, "main", edited)
            assert [b.key for b in found.unrecorded] == [] and found.retired == [key]
    finally:
        engine.dispose()
