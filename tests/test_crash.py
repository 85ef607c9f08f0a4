"""Crash safety (DESIGN.md invariant 8): a run killed at any crash point, followed by normal
runs, ends in the same state as runs that were never interrupted, and MEMORY.md, the corpus
files and the database agree with each other after every recovery.

Every run is a separate process that `DREAMING_CRASH_AT` kills with `os._exit(137)`. Starting
an interpreter that imports `dreaming` costs well over a second, so most runs are forked from
a small server process that imported the CLI once: each child runs the console script's
`main()` with its own argv, environment and file descriptors, and dies the same way.
`test_console_script_agrees` runs the real entry point to show the two agree.

Three scenarios, each compared with uninterrupted runs over the same input:

- first:     the first night crashes; two clean nights follow.
- second:    a clean night, new messages, the second night crashes; two clean nights follow.
- new-input: the first night crashes, new messages arrive, then two clean nights; compared
             only for agents whose first night was wholly committed when the crash hit.

Known bugs are strict xfails whose failure must be a difference from the reference.
"""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreaming import demo, memory_file
from dreaming.memory_sync import content_hash
from tests.openclaw_builder import append

AGENTS = ("bob", "main")
WORKSPACES = {"main": "workspace", "bob": "workspace-bob"}
CRASH_RC = 137
# Deep in batches of two, so a crash can also fall between two batches of one agent.
EXTRA_CONFIG = "\n[deep]\nbatch_size = 2\n"

# How often a night reaches each point; bob comes before main at every point. First night:
# light reads 4 + 5 admitted sessions; deep decides 1 batch for bob and 2 for main, and each
# batch writes MEMORY.md once. Second night: one grown session per agent, one deep batch each.
HITS = {
    "light.before_commit": (9, 2),
    "light.after_commit": (9, 2),
    "deep.before_commit": (3, 2),
    "deep.after_commit": (3, 2),
    "memory.before_write": (3, 2),
    "memory.after_write": (3, 2),
}


def known_bug(mode: str, point: str, n: int) -> str | None:
    """The reason a scenario is expected not to converge, or None. Both bugs these tests
    found (scores left stale by a crash after light's last commit; recalls judged against
    a MEMORY.md lagging behind the database) are fixed; keep the hook for the next one."""
    del mode, point, n
    return None


def settled_agents(point: str, n: int) -> tuple[str, ...]:
    """Agents whose first night is wholly committed to the database when the crash hits
    (only MEMORY.md may lag behind). New input after the crash may only be compared for
    them: for any other agent the next night legitimately decides over more input at once
    than the uninterrupted first night did."""
    if point == "deep.before_commit":
        return ("bob",) if n >= 2 else ()
    if point in ("deep.after_commit", "memory.before_write", "memory.after_write"):
        return ("bob", "main") if n >= 3 else ("bob",)
    return ()


# -- running processes ------------------------------------------------------------------------

SERVER = textwrap.dedent(
    """
    import json, os, sys, traceback
    from dreaming import faults
    import importlib
    from dreaming.cli import main
    for name in ("_demo", "_entries", "_run", "_status", "_tags"):  # what main() imports
        try:
            importlib.import_module("dreaming.cli." + name)
        except ImportError:
            pass

    for raw in sys.stdin:
        req = json.loads(raw)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                os.environ.clear()
                os.environ.update(req["env"])
                faults._hits.clear()
                for fd, name in ((1, req["out"]), (2, req["err"])):
                    target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    os.dup2(target, fd)
                    os.close(target)
                sys.argv = ["dreaming", *req["args"]]
                try:
                    main()
                    code = 0
                except SystemExit as exc:
                    c = exc.code
                    code = c if isinstance(c, int) else (0 if c is None else 1)
            except BaseException:
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\\n")
        sys.stdout.flush()
    """
)


def clean_env(root: Path | None = None, crash: str | None = None) -> dict[str, str]:
    """The caller's environment without any DREAMING_* or OPENAI_* variable, HOME beside the
    state folder, and the crash point if one is asked for."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DREAMING_", "OPENAI_"))}
    if root is not None:
        env["HOME"] = str(root.parent / "home")
    if crash is not None:
        env["DREAMING_CRASH_AT"] = crash
    return env


def night_args(root: Path) -> list[str]:
    """One night: light then deep over every agent, in one process."""
    return [
        "--state-dir",
        str(root),
        "--config",
        str(root / "dreaming.toml"),
        "run",
        "--phase",
        "light",
        "--phase",
        "deep",
        "--json",
    ]


class Runner:
    """Runs `dreaming` processes, each forked from a server that imported the CLI once."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.count = 0
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )

    def night(self, root: Path, crash: str | None = None) -> tuple[int, str]:
        """(exit code, stdout + stderr) of one process running one night over `root`."""
        self.count += 1
        out, err = self.logs / f"{self.count}.out", self.logs / f"{self.count}.err"
        env = clean_env(root, crash)
        req = {"args": night_args(root), "env": env, "out": str(out), "err": str(err)}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the fork server died"
        return int(json.loads(line)["rc"]), out.read_text() + err.read_text()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    r = Runner(tmp_path_factory.mktemp("crash-logs"))
    try:
        yield r
    finally:
        r.close()


def clean_night(runner: Runner, root: Path) -> None:
    rc, output = runner.night(root)
    assert rc == 0, f"a clean night failed ({rc}):\n{output[-3000:]}"


def crashed_night(runner: Runner, root: Path, crash: str) -> None:
    rc, output = runner.night(root, crash)
    assert rc == CRASH_RC, (
        f"DREAMING_CRASH_AT={crash} was never reached (exit code {rc}): the scenario does"
        f" not exercise that crash point\n{output[-3000:]}"
    )


# -- input ------------------------------------------------------------------------------------


def build(root: Path) -> Path:
    demo.build(root)
    with (root / "dreaming.toml").open("a") as fh:
        fh.write(EXTRA_CONFIG)
    return root


NEXT_DAY = demo.BASE + timedelta(days=14)

# Between the nights, one grown session per agent: a new fact with a durability cue, a repeat
# of a pending candidate, and repeats of every fact the first night promotes (recalls of our
# own entries, which must not be promoted again).
APPENDS: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "bob",
        "s-bob-04",
        [
            ("user", "Please remember that the production database is called redwood."),
            ("assistant", "Noted: production is redwood."),
            ("user", "The staging database bluebird runs Postgres 16."),
            ("user", "We deploy on Fridays only after the QA sign-off."),
            ("user", "Our deploys happen on Fridays only after the QA sign-off, never before."),
        ],
    ),
    (
        "main",
        "s-main-07",
        [
            ("user", "Please remember that my car is a blue Volvo."),
            ("assistant", "A blue Volvo, noted."),
            ("user", "My sister Anna lives in Lisbon and works as an architect."),
            ("user", "I'm allergic to peanuts, please remember that."),
            ("user", "I prefer meetings after 10am on weekdays."),
            ("user", "Please remember that my dentist appointment is every six months."),
        ],
    ),
]


def append_second_day(root: Path) -> None:
    for agent, sid, turns in APPENDS:
        path = root / "agents" / agent / "sessions" / f"{sid}.jsonl"
        for i, (role, text) in enumerate(turns):
            append(path, role, text, NEXT_DAY + timedelta(minutes=i), f"{sid}-n2-{i:03d}")


# -- what is compared -------------------------------------------------------------------------

State = dict[str, dict[str, Any]]


def agent_state(root: Path, agent: str) -> dict[str, Any]:
    """What matters about one agent: no row ids, no write times, no run records."""
    db = root / "dreaming" / "agents" / f"{agent}.sqlite"
    assert db.exists(), f"no database for {agent}"
    memory = root / WORKSPACES[agent] / "MEMORY.md"
    corpus_dir = root / WORKSPACES[agent] / "memory" / ".dreams" / "session-corpus"
    conn = sqlite3.connect(db)

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in conn.execute(sql).fetchall())

    try:
        return {
            "memory": memory.read_text() if memory.exists() else None,
            "corpus_files": {p.name: p.read_text() for p in sorted(corpus_dir.glob("*"))},
            "corpus_lines": rows(
                "SELECT session_id, line, ts, day, role, origin_class, text, text_hash"
                " FROM corpus_lines"
            ),
            "candidates": rows(
                "SELECT key, text, tokens, status, sessions, days, owner_lines, agent_lines,"
                " untrusted_lines, system_lines, evidence_count, decided_evidence, durable_cue,"
                " first_seen, last_seen, round(score, 9), rem_boost FROM candidates"
            ),
            "candidate_evidence": rows(
                "SELECT c.key, l.session_id, l.line, e.day, e.origin_class"
                " FROM candidate_evidence e JOIN candidates c ON c.id = e.candidate_id"
                " JOIN corpus_lines l ON l.id = e.corpus_line_id"
            ),
            "entries": rows("SELECT key, text, status FROM entries"),
            "origins": rows(
                "SELECT entry_key, session_id, session_key, origin_class, observed_at FROM origins"
            ),
            "entry_evidence": rows("SELECT entry_key, session_id, line FROM entry_evidence"),
            "recalls": rows(
                "SELECT r.entry_key, l.session_id, l.line, r.observed_at"
                " FROM recalls r JOIN corpus_lines l ON l.id = r.corpus_line_id"
            ),
            "supersessions": rows("SELECT new_key, old_key FROM supersessions"),
            "search_index": rows("SELECT key, text FROM entries_fts"),
            "sessions": rows(
                "SELECT session_id, format, session_key, kind, status, reason FROM sessions"
            ),
            "cursors": rows('SELECT session_id, "offset", line, head, size FROM file_cursors'),
            "agent_state": rows("SELECT key, value FROM agent_state"),
            "dirty_days": rows("SELECT day FROM corpus_dirty_days"),
            "dangling_evidence": rows(
                "SELECT e.candidate_id, e.corpus_line_id FROM candidate_evidence e"
                " LEFT JOIN candidates c ON c.id = e.candidate_id"
                " LEFT JOIN corpus_lines l ON l.id = e.corpus_line_id"
                " WHERE c.id IS NULL OR l.id IS NULL"
            ),
        }
    finally:
        conn.close()


def snapshot(root: Path) -> State:
    return {agent: agent_state(root, agent) for agent in AGENTS}


CORPUS_LINE = re.compile(
    r"^\[(?P<agent>[^/]+)/sessions/[^/]+/(?P<sid>[^#]+)#L(?P<n>\d+)\] (?P<t>.*)$"
)


def check_consistent(root: Path, state: State) -> None:
    """What holds after any history: MEMORY.md, corpus files and database agree."""
    for agent, s in state.items():
        at = f"agent {agent}"
        live = {k: t for k, t, status in s["entries"] if status == "live"}
        assert s["memory"] is not None and s["memory"].startswith(demo.OPERATOR_MEMORY), at
        doc = memory_file.parse(s["memory"])
        assert not doc.edited_blocks(), f"{at}: a managed block does not match its key"
        blocks = [(b.key, b.text) for b in doc.blocks]
        assert len(blocks) == len(dict(blocks)), f"{at}: a block appears twice"
        assert dict(blocks) == live, f"{at}: MEMORY.md blocks != live entries"
        assert dict(s["search_index"]) == live, f"{at}: search index != live entries"
        origin_keys = {r[0] for r in s["origins"]}
        assert origin_keys <= set(live), f"{at}: origin rows of entries that are not live"
        assert set(live) <= origin_keys, f"{at}: a live entry without origins"
        assert {r[0] for r in s["entry_evidence"]} <= set(live), f"{at}: dead entry evidence"
        assert {r[0] for r in s["recalls"]} <= set(live) | {k for k, _, st in s["entries"]}, (
            f"{at}: recall of an unknown entry"
        )
        assert s["dangling_evidence"] == [], f"{at}: candidate evidence without line/candidate"
        kv = dict(s["agent_state"])
        assert "memory_dirty" not in kv, f"{at}: MEMORY.md left marked dirty"
        # No hash before the first write; after it, the hash of what is on disk.
        assert kv.get("memory_hash") in (None, content_hash(s["memory"])), at
        assert s["dirty_days"] == [], f"{at}: corpus days left marked dirty"
        per_day: dict[str, list[tuple[str, int, str]]] = {}
        for sid, n, _ts, day, _role, _cls, text, _hash in s["corpus_lines"]:
            per_day.setdefault(day, []).append((sid, n, text))
        in_files: dict[str, list[tuple[str, int, str]]] = {}
        for name, content in s["corpus_files"].items():
            assert name.endswith(".txt"), f"{at}: stray file {name} in the corpus folder"
            for raw in content.splitlines():
                m = CORPUS_LINE.match(raw)
                assert m is not None and m["agent"] == agent, f"{at}: bad corpus line {raw!r}"
                in_files.setdefault(name[:-4], []).append((m["sid"], int(m["n"]), m["t"]))
        assert {d: sorted(v) for d, v in in_files.items()} == {
            d: sorted(v) for d, v in per_day.items()
        }, f"{at}: corpus files != corpus_lines rows per day"
    leftovers = [str(p.relative_to(root)) for p in root.rglob("*.tmp")]
    assert not leftovers, f"temporary files left behind: {leftovers}"


DIVERGED = "differs from the reference"


def assert_same(got: State, want: State, agents: tuple[str, ...] = AGENTS) -> None:
    for agent in agents:
        for part, value in want[agent].items():
            assert got[agent][part] == value, f"{agent}: {part} {DIVERGED}"


# -- references -------------------------------------------------------------------------------


@dataclass
class References:
    one_night: State
    two_nights: State


@pytest.fixture(scope="module")
def refs(runner: Runner, tmp_path_factory: pytest.TempPathFactory) -> References:
    root = build(tmp_path_factory.mktemp("reference") / "state")
    clean_night(runner, root)
    one = snapshot(root)
    check_consistent(root, one)
    clean_night(runner, root)
    assert snapshot(root) == one, "a quiet second night changed something"
    append_second_day(root)
    clean_night(runner, root)
    two = snapshot(root)
    check_consistent(root, two)
    # The scenarios are worth crashing in: each night adds entries, the second also recalls.
    for agent in AGENTS:
        live_one = [e for e in one[agent]["entries"] if e[2] == "live"]
        live_two = [e for e in two[agent]["entries"] if e[2] == "live"]
        assert live_one and len(live_two) > len(live_one), agent
        assert two[agent]["recalls"], agent
    return References(one, two)


def run_scenario(runner: Runner, root: Path, mode: str, crash: str, refs: References) -> None:
    point, _, n = crash.partition(":")
    compared = settled_agents(point, int(n)) if mode == "new-input" else AGENTS
    assert compared, f"{crash} leaves no agent settled: nothing to compare with new input"
    build(root)
    if mode == "second":
        clean_night(runner, root)
        append_second_day(root)
    crashed_night(runner, root, crash)
    if mode == "new-input":
        append_second_day(root)
    want = refs.one_night if mode == "first" else refs.two_nights
    # Two clean nights: the first converges, the second changes nothing.
    clean_night(runner, root)
    got = snapshot(root)
    check_consistent(root, got)
    assert_same(got, want, compared)
    clean_night(runner, root)
    assert snapshot(root) == got, "the state kept changing after recovery"


# -- tests ------------------------------------------------------------------------------------


def test_console_script_agrees(tmp_path: Path, refs: References) -> None:
    """The real `dreaming` entry point, killed and then re-run, lands where forked runs do."""
    exe = Path(sys.executable).parent / "dreaming"
    cmd = (
        [str(exe)]
        if exe.exists()
        else [sys.executable, "-c", "from dreaming.cli import main;main()"]
    )

    def run(root: Path, crash: str | None = None) -> int:
        done = subprocess.run(
            [*cmd, *night_args(root)], env=clean_env(root, crash), capture_output=True, timeout=60
        )
        return done.returncode

    root = build(tmp_path / "state")
    assert run(root, "deep.after_commit:2") == CRASH_RC
    assert run(root) == 0
    got = snapshot(root)
    check_consistent(root, got)
    assert_same(got, refs.one_night)


def _cases() -> list[Any]:
    cases = [
        ("first", "light.before_commit:6"),
        ("first", "light.after_commit:3"),
        ("first", "light.after_commit:4"),  # bob's last session
        ("first", "light.after_commit:9"),  # main's last session
        ("first", "deep.before_commit:3"),
        ("first", "deep.after_commit:1"),
        ("first", "deep.after_commit:2"),  # between main's two batches
        ("first", "memory.before_write:3"),
        ("first", "memory.after_write:2"),
        ("second", "light.after_commit:2"),  # main's only grown session
        ("second", "deep.after_commit:1"),
        ("second", "memory.before_write:2"),
        ("new-input", "deep.after_commit:1"),
        ("new-input", "deep.after_commit:3"),
        ("new-input", "memory.after_write:3"),
    ]
    out = []
    for mode, crash in cases:
        point, _, n = crash.partition(":")
        bug = known_bug(mode, point, int(n))
        marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=bug)] if bug else []
        out.append(pytest.param(mode, crash, marks=marks, id=f"{mode}-{crash}"))
    return out


@pytest.mark.parametrize(("mode", "crash"), _cases())
def test_crash_converges(
    mode: str, crash: str, tmp_path: Path, runner: Runner, refs: References
) -> None:
    point, _, n = crash.partition(":")
    try:
        run_scenario(runner, tmp_path / "state", mode, crash, refs)
    except AssertionError as err:
        if known_bug(mode, point, int(n)) and DIVERGED not in str(err):
            # Not the known bug's symptom: fail instead of counting as the expected xfail.
            raise RuntimeError(f"failed for another reason than the known bug: {err}") from err
        raise


def test_an_unreached_crash_point_fails_loudly(tmp_path: Path, runner: Runner) -> None:
    root = build(tmp_path / "state")
    with pytest.raises(AssertionError, match="never reached"):
        crashed_night(runner, root, "deep.after_commit:99")


@pytest.mark.slow
def test_random_crashes_converge(tmp_path: Path, runner: Runner, refs: References) -> None:
    """20 seeded picks of (scenario, point, n). Picks that hit a known bug must still fail
    (as a strict xfail would); every other pick must converge."""
    pool = [
        (mode, point, n)
        for mode in ("first", "second", "new-input")
        for point in sorted(HITS)
        for n in range(1, HITS[point][1 if mode == "second" else 0] + 1)
        if mode != "new-input" or settled_agents(point, n)
    ]
    picks = random.Random(20260302).sample(pool, 20)
    problems = []
    for i, (mode, point, n) in enumerate(picks):
        crash = f"{point}:{n}"
        bug = known_bug(mode, point, n)
        try:
            run_scenario(runner, tmp_path / f"s{i}", mode, crash, refs)
        except AssertionError as err:
            if bug is None or DIVERGED not in str(err):
                problems.append(f"{mode} {crash}: {str(err)[:2000]}")
        else:
            if bug is not None:
                problems.append(f"{mode} {crash}: converged, but a known bug was expected")
    assert not problems, "\n\n".join(problems)
