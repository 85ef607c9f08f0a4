"""Storage faults (#23 item 6): a read-only state folder, a full disk, flipped bytes and a
truncated database each end in one line per failure that names the file and what to do,
exit 1, and nothing written; never a traceback.

Each fault is real, on a copy of a demo state folder after one night. `dreaming` runs as a
subprocess where the fault is the process's (tests/cli_process.py runs the rest in this
process): a read-only folder is one this process may not write (chmod, and as root the
capabilities that bypass permissions dropped with `setpriv`), a full disk is a file-size
limit (RLIMIT_FSIZE: writes past it fail with EFBIG, as on a full disk), flipped bytes and
truncation are written into the copy's files."""

from __future__ import annotations

import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dreaming import demo
from tests.cli_process import in_process
from tests.openclaw_builder import FakeOpenClaw

# Run as root, a process writes whatever the permissions say; without these capabilities
# (and with an empty bounding set, so no exec regains them) it is held to them.
AS_UNPRIVILEGED = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]
ERROR = "dreaming: error: "


def dreaming(
    root: Path, *args: str, prefix: list[str] | None = None, limit: int | None = None
) -> subprocess.CompletedProcess[str]:
    if prefix is None and limit is None:  # nothing only a process can be held to
        return in_process(["--state-dir", str(root), *args], left_out=("DREAMING_", "OPENAI_"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DREAMING_", "OPENAI_"))}

    def file_size_limit() -> None:  # in the child only: writes past it fail with EFBIG
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "dreaming", "--state-dir", str(root), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
        preexec_fn=file_size_limit,
    )


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo state folder after one night (main and bob), never changed: tests copy it."""
    root = demo.build(tmp_path_factory.mktemp("night") / "s")
    done = dreaming(root, "run")
    assert done.returncode == 0, done.stderr
    return root


def copy(night: Path, to: Path) -> Path:
    shutil.copytree(night, to, symlinks=True)
    return to


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes (what "nothing written" is checked against)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in done.stderr, done.stderr
    return [line for line in done.stderr.splitlines() if line.startswith(ERROR)]


def database(root: Path, agent: str = "main") -> Path:
    return root / "dreaming" / "agents" / f"{agent}.sqlite"


# -- a read-only state folder ---------------------------------------------------------------


def _writes_refused(folder: Path, prefix: list[str]) -> bool:
    """Whether a process started with `prefix` is refused a write into the read-only
    `folder` (root without setpriv is not: then the test cannot be made real here)."""
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", f"open({str(folder / 'probe')!r}, 'w')"],
        capture_output=True,
        check=False,
    )
    return probe.returncode != 0


@pytest.fixture
def read_only(night: Path, tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A copy of the night with every file and folder read-only, and the command prefix
    that runs dreaming as a process the permissions hold."""
    root = copy(night, tmp_path / "ro")
    modes = {p: p.stat().st_mode for p in [root, *root.rglob("*")] if not p.is_symlink()}
    for p in sorted(modes, key=lambda p: len(p.parts), reverse=True):
        p.chmod(stat.S_IMODE(modes[p]) & ~0o222)
    prefix = AS_UNPRIVILEGED if os.geteuid() == 0 and shutil.which("setpriv") else []
    try:
        if not _writes_refused(root, prefix):
            pytest.skip("this process writes read-only files (root without setpriv)")
        yield root, prefix
    finally:
        for p, mode in modes.items():
            p.chmod(stat.S_IMODE(mode))


READ_ONLY_COMMANDS = [
    ["verify"],
    ["status"],
    ["entries"],
    ["report", "--out", "-"],
    ["review", "list"],
    ["forget", "--agent", "main", "--session", "s-main-01"],
    ["forget", "--agent", "main", "--session", "s-main-01", "--dry-run"],
]


@pytest.mark.parametrize("args", READ_ONLY_COMMANDS, ids=" ".join)
def test_a_read_only_state_folder_is_one_line_naming_the_file(
    read_only: tuple[Path, list[str]], args: list[str]
) -> None:
    root, prefix = read_only
    before = snapshot(root)
    done = dreaming(root, *args, prefix=prefix)
    assert done.returncode == 1, done.stderr
    (line,) = error_lines(done)
    assert done.stderr.strip() == line  # nothing else on stderr
    assert str(root / "dreaming") in line and "cannot be written" in line
    assert "writable" in line  # what to do
    assert snapshot(root) == before


def test_a_run_on_a_read_only_folder_fails_each_agent_in_one_line(
    read_only: tuple[Path, list[str]],
) -> None:
    root, prefix = read_only
    before = snapshot(root)
    done = dreaming(root, "run", prefix=prefix)
    assert done.returncode == 1
    lines = error_lines(done)
    assert len(lines) == 2 and done.stderr.strip().splitlines() == lines
    for agent, line in zip(("bob", "main"), lines, strict=True):
        assert line.startswith(f"{ERROR}{database(root, agent)}: cannot be written")
    # Not "no transcripts yet": the agents are there and each failed.
    assert done.stdout.splitlines() == [
        "agent bob: failed (the error is on stderr)",
        "agent main: failed (the error is on stderr)",
    ]
    json_done = dreaming(root, "run", "--json", prefix=prefix)
    assert json_done.returncode == 1
    assert '"outcome": "failed"' in json_done.stdout
    assert snapshot(root) == before


# -- a full disk ------------------------------------------------------------------------------


def test_a_full_disk_fails_the_agent_in_one_line_and_keeps_the_files(
    night: Path, tmp_path: Path
) -> None:
    """Writes past the limit fail as on a full disk ("disk I/O error" from SQLite). The
    night that meets it fails in one line naming the database; MEMORY.md and the corpus
    files are as they were and `verify` passes; with room again, the next run reads on."""
    root = copy(night, tmp_path / "full")
    FakeOpenClaw(root).session(
        "main",
        "s-main-big",
        [("user", f"My colleague number {i} is Person{i} in Building {i}.") for i in range(400)],
    )
    files = {p: p.read_bytes() for p in (root / "workspace").rglob("*") if p.is_file()}
    largest = max(p.stat().st_size for p in root.rglob("*") if p.is_file())
    done = dreaming(root, "run", limit=largest + 64 * 1024)
    assert done.returncode == 1, done.stderr
    (line,) = error_lines(done)
    assert line.startswith(f"{ERROR}{database(root)}: could not be written (disk I/O error")
    assert "free some space" in line and "ulimit -f" in line
    assert {p: p.read_bytes() for p in files} == files
    assert dreaming(root, "verify").returncode == 0
    again = dreaming(root, "run", "--agent", "main")
    assert again.returncode == 0, again.stderr
    assert dreaming(root, "verify").returncode == 0


@pytest.mark.parametrize("args", [["status"], ["verify"], ["entries"]], ids=" ".join)
def test_a_full_disk_stops_a_reading_command_in_one_line(
    night: Path, tmp_path: Path, args: list[str]
) -> None:
    """Even reading needs the write-ahead log's index file (32 KiB): on a full disk the
    database cannot be opened, and the command says so. What SQLite may leave is its own
    empty log and a zeroed index, which the next open sets up again."""
    root = copy(night, tmp_path / "full")
    before = snapshot(root)
    done = dreaming(root, *args, limit=16 * 1024)
    assert done.returncode == 1
    (line,) = error_lines(done)
    assert line.startswith(f"{ERROR}{database(root, 'bob')}: could not be written"), line
    after = snapshot(root)
    left = {k: v for k, v in after.items() if k not in before}
    assert all(k.endswith(("-wal", "-shm")) and not v.strip(b"\0") for k, v in left.items())
    assert {k: v for k, v in after.items() if k in before} == before
    assert dreaming(root, *args).returncode == 0


def test_a_full_disk_on_a_new_state_folder_leaves_nothing_a_run_would_trust(
    night: Path, tmp_path: Path
) -> None:
    root = copy(night, tmp_path / "fresh")
    shutil.rmtree(root / "dreaming")
    for ws in ("workspace", "workspace-bob"):
        shutil.rmtree(root / ws)
    done = dreaming(root, "run", limit=40_000)  # the write-ahead log's index alone is 32 KiB
    assert done.returncode == 1
    lines = error_lines(done)
    assert lines and all("could not be written" in line for line in lines), done.stderr
    assert not (root / "workspace" / "MEMORY.md").exists()
    assert dreaming(root, "run").returncode == 0
    assert dreaming(root, "verify").returncode == 0


# -- damaged bytes ----------------------------------------------------------------------------


def _flip(path: Path, needle: bytes) -> None:
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at >= 0, (path, needle)
    data[at : at + 3] = b"\xff\xfe\xc3"
    path.write_bytes(bytes(data))


Damage = Callable[[Path], Path]


def _truncated(root: Path) -> Path:
    db = database(root)
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    return db


def _not_a_database(root: Path) -> Path:
    db = database(root)
    data = bytearray(db.read_bytes())
    data[:16] = b"x" * 16
    db.write_bytes(bytes(data))
    return db


def _flipped_text(root: Path) -> Path:
    _flip(database(root), b"sister Anna")
    return database(root)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (_truncated, "the database is damaged (database disk image is malformed)"),
        (_not_a_database, "the database is damaged (file is not a database)"),
        (_flipped_text, "the database is damaged (a stored text is not valid UTF-8)"),
    ],
    ids=["truncated", "header", "flipped-text"],
)
def test_a_damaged_database_is_one_line_naming_it_and_is_left_as_it_is(
    night: Path, tmp_path: Path, damage: Damage, problem: str
) -> None:
    root = copy(night, tmp_path / "damaged")
    db = damage(root)
    before = snapshot(root)
    commands = [["verify"], ["entries", "--agent", "main", "--evidence"]]
    if damage is not _flipped_text:  # a night need not read that row; verify and entries do
        commands.append(["run", "--agent", "main"])
    for args in commands:
        done = dreaming(root, *args)
        assert done.returncode == 1, (args, done.stderr)
        (line,) = error_lines(done)
        assert line.startswith(f"{ERROR}{db}: {problem}"), line
        assert "restore it from a backup, or move it aside" in line
        assert {k: v for k, v in snapshot(root).items() if not k.startswith("dreaming/locks")} == {
            k: v for k, v in before.items() if not k.startswith("dreaming/locks")
        }


def test_a_truncated_database_fails_its_agent_only(night: Path, tmp_path: Path) -> None:
    root = copy(night, tmp_path / "one")
    _truncated(root)
    done = dreaming(root, "run")
    assert done.returncode == 1
    (line,) = error_lines(done)
    assert str(database(root)) in line
    assert "agent bob: deep phase" in done.stdout  # bob still had his night
    assert "agent main: failed (the error is on stderr)" in done.stdout


def test_the_way_out_of_a_damaged_database_is_the_one_the_error_names(
    night: Path, tmp_path: Path
) -> None:
    """ "move it aside and run again": a new database from the transcripts, forgotten
    sessions still forgotten, MEMORY.md's entries adopted; verify passes."""
    root = copy(night, tmp_path / "aside")
    assert dreaming(root, "forget", "--agent", "main", "--session", "s-main-01").returncode == 0
    _truncated(root)
    database(root).rename(tmp_path / "main.sqlite.damaged")
    done = dreaming(root, "run", "--json")
    assert done.returncode == 0, done.stderr
    assert '"adopted"' in done.stdout
    assert '"forgotten": 1' in done.stdout  # s-main-01 is kept out: not admitted, forgotten
    assert dreaming(root, "verify").returncode == 0


def test_flipped_bytes_in_the_tombstone_file_fail_closed_naming_file_and_line(
    night: Path, tmp_path: Path
) -> None:
    """Which session a damaged tombstone line names cannot be known, and a forgotten session
    must never come back: the night stops, naming the file and the line."""
    root = copy(night, tmp_path / "tomb")
    assert dreaming(root, "forget", "--agent", "main", "--session", "s-main-01").returncode == 0
    tombstones = root / "dreaming" / "tombstones" / "main.jsonl"
    _flip(tombstones, b"s-main-01")
    for args in (["run", "--agent", "main"], ["verify", "--agent", "main"]):
        done = dreaming(root, *args)
        assert done.returncode == 1, done.stderr
        (line,) = error_lines(done)
        assert line.startswith(f"{ERROR}{tombstones}: line 1 is not valid UTF-8"), line
        assert "restore it from a backup" in line


def test_flipped_bytes_in_a_corpus_file_are_a_violation_verify_names(
    night: Path, tmp_path: Path
) -> None:
    root = copy(night, tmp_path / "corpus")
    day = next((root / "workspace" / "memory" / ".dreams" / "session-corpus").glob("*.txt"))
    _flip(day, b"[main/")
    done = dreaming(root, "verify", "--agent", "main")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"corpus file {day.name} differs from the corpus table" in done.stdout
