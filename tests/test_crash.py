"""Crash safety (DESIGN.md invariant 8): a run killed at any crash point, followed by normal
runs, ends in the same state as runs that were never interrupted, and MEMORY.md, the corpus
files and the database agree with each other (and `dreaming verify` passes) after every
recovery.

Every run is a separate process that `DREAMING_CRASH_AT` kills with `os._exit(137)`. Starting
an interpreter that imports `dreaming` costs well over a second, so most runs are forked from
a small server process that imported the CLI once: each child runs the console script's
`main()` with its own argv, environment and file descriptors, and dies the same way.
`test_console_script_agrees` runs the real entry point to show the two agree.

Three night scenarios, each compared with uninterrupted runs over the same input:

- first:     the first night crashes; two clean nights follow.
- second:    a clean night, new messages, the second night crashes; two clean nights follow.
- new-input: the first night crashes, new messages arrive, then two clean nights; compared
             only for agents whose first night was wholly committed when the crash hit.

And one forget scenario: a clean night, then `forget --agent main --session s-main-01`
killed at a point of the purge (optionally the recovery is killed too), then a recovery by
the same `forget` or by the next `run`; compared with an uninterrupted purge (followed by a
night for the `run` recovery), and the purged session's text must be nowhere: not in any
file, not in a dump of the database, not in the database's raw bytes.

Beside the library's crash points, the tests kill a child right after a chosen library
function returns (`WRAPPED`): points the library does not mark, such as the tombstone file
written before the purge's transaction commits.

Which crash points a night passes, how often and for which agent, is recorded from the
uninterrupted reference nights (`Trace`), not written into the tests: a case names its crash
point by what it is (`At`: main's first deep batch) and the trace turns that into the
`<point>:<n>` of `DREAMING_CRASH_AT`.

Trials: every parametrized case and the console-script test is one trial; the random test
adds `DREAMING_CRASH_TRIALS=N` seeded picks (default `RANDOM_TRIALS`, so that the default run
has at least 50 trials expected to converge) of a scenario and its crash points, night and
forget alike; `DREAMING_CRASH_SEED` changes the seed. The pool holds every hit of a library
crash point in the reference nights, per scenario, and every forget crash (142 with today's
demo; the random test prints the size, `-s` shows it): N at least that runs every one of
them (beyond the pool, picks repeat). The random test's timeout grows with N.

    DREAMING_CRASH_TRIALS=142 pytest tests/test_crash.py -k random -s

Known bugs are strict xfails whose failure must show the bug's symptom.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreaming import demo
from dreaming.config import Settings
from dreaming.forget import needles_of, snippets_of
from dreaming.memory import capacity, memory_file
from dreaming.memory.memory_sync import content_hash
from tests.openclaw_builder import append

AGENTS = ("bob", "main")
WORKSPACES = {"main": "workspace", "bob": "workspace-bob"}
CRASH_RC = 137
# Deep in batches of two, so a crash can also fall between two batches of one agent; and a
# MEMORY.md budget that holds only some of each agent's entries, so every write also writes
# the archive (`memory/dreaming-archive.md`) and entries move between the two.
MAX_CHARS = 260
EXTRA_CONFIG = f"\n[deep]\nbatch_size = 2\n[memory]\nmax_chars = {MAX_CHARS}\n"
ARCHIVE = "dreaming-archive.md"

# How often a night reaches each crash point, and for which agent, is not written down here:
# it is what the reference nights pass (`Trace`, recorded by the `refs` fixture), so that a
# change in what the demo's input promotes moves the crash points with it. A night runs bob
# whole (light: one commit per admitted session; deep: one commit per batch, each followed
# by a MEMORY.md write), then main. Cases name a crash point by what it is (`At`: main's
# first deep batch, bob's last session) and are resolved against the trace to `<point>:<n>`.

# Points a purge of one session passes once each, in this order: the database part commits,
# the memory files are scrubbed, the archive and MEMORY.md are rendered (archive.*, memory.*),
# the completion commits.
FORGET_POINTS = (
    "forget.after_commit",
    "forget.after_files",
    "memory.before_write",
    "archive.after_write",
    "memory.after_write",
    "forget.before_complete",
)
# What a recovery passes while it completes the pending purge (a recovering `forget` also
# commits a purge of its own afterwards: nothing is left to remove, but it is a purge).
RECOVERY_POINTS = {
    "forget": (*FORGET_POINTS[1:], "forget.after_commit"),
    "run": FORGET_POINTS[1:],
}

# Crash points of the tests' own: the child dies right after the n-th call of this function
# returns.
WRAPPED = {
    # The tombstone file is appended (and fsynced) once the purge's transaction committed.
    "forget.after_tombstone_file": ("dreaming.ingest.tombstones", "record_tombstones"),
    # Every file dreaming writes goes through a temp file, fsync and rename: after the n-th
    # fsync of a night its temp file is complete but not renamed. Light writes an agent's
    # corpus files to temp files and fsyncs them all before it renames any
    # (corpus.write_days): after main's first fsync, none of main's corpus files is renamed
    # and the temp file of 2026-03-02, all of it from s-main-01, is complete.
    "os.fsync": ("os", "fsync"),
}

RANDOM_TRIALS = 24  # the default number of random picks (DREAMING_CRASH_TRIALS overrides)
SEED = 20260302


@dataclass(frozen=True)
class Bug:
    reason: str
    symptom: str  # what the failure says: any other failure is not this bug


DIVERGED = "differs from the reference"


def known_bug(mode: str, at: At) -> Bug | None:
    """The bug a night scenario crashed at `at` is expected to hit instead of converging, or
    None. Every bug these scenarios found is fixed: scores left stale by a crash after
    light's last commit; recalls judged against a MEMORY.md lagging behind the database; temp
    files of a killed atomic write left for good (and so out of a later purge's reach); a
    repeat of a line MEMORY.md still showed of an entry merged away before the crash recorded
    a recall of no entry (that one needs input of its own, and has its own test)."""
    del mode, at
    return None


def known_forget_bug(point: str, recovery: str, second: str | None) -> Bug | None:
    """The bug a forget scenario is expected to hit instead of converging, or None. (Fixed:
    a tombstone file written before the purge committed hid a session nothing purged.)"""
    del point, recovery, second
    return None


def expect_bug(bug: Bug | None, check: Callable[[], None]) -> None:
    """Run `check`; with a known bug it must fail with that bug's symptom (a strict xfail
    then counts it), any other failure is an error."""
    try:
        check()
    except AssertionError as err:
        if bug is not None and bug.symptom not in str(err):
            raise RuntimeError(f"failed for another reason than the known bug: {err}") from err
        raise


# The crash points of a night whose commit is done once they are reached.
COMMITTED = ("light.after_commit", "deep.after_commit")


@dataclass(frozen=True)
class Hit:
    agent: str  # whose run passed it
    point: str  # a library crash point, or "os.fsync"
    path: str = ""  # os.fsync: the file synced (its temp file's name, relative to the root)


@dataclass(frozen=True)
class At:
    """A crash point named by what it is rather than by a count: the `k`-th time (1-based;
    -1 is the last) that `agent`'s run passes `point`, among the hits whose path contains
    `path`. `Trace.crash` turns it into the `<point>:<n>` of `DREAMING_CRASH_AT`."""

    point: str
    agent: str
    k: int
    path: str = ""

    def __str__(self) -> str:
        which = "last" if self.k == -1 else f"#{self.k}"
        return f"{self.point}-{self.agent}{'-' + self.path if self.path else ''}-{which}"


@dataclass(frozen=True)
class Trace:
    """The crash points one uninterrupted night passes, in order, each with its agent."""

    hits: tuple[Hit, ...]

    def points(self) -> list[str]:
        """The library's crash points the night passes (the tests' own `WRAPPED` aside)."""
        return sorted({h.point for h in self.hits if h.point not in WRAPPED})

    def count(self, point: str, agent: str | None = None) -> int:
        return sum(h.point == point and agent in (None, h.agent) for h in self.hits)

    def crash(self, at: At) -> str:
        """`<point>:<n>`: the n-th hit of the point in the night is the one `at` names."""
        mine = [
            i
            for i, h in enumerate(self.hits)
            if h.point == at.point and h.agent == at.agent and at.path in h.path
        ]
        assert mine and -len(mine) <= at.k <= len(mine) and at.k != 0, (
            f"the reference night passes {at.point} {len(mine)} times for {at.agent}"
            f"{' writing ' + at.path if at.path else ''}: no crash point {at}"
        )
        index = mine[at.k - 1 if at.k > 0 else at.k]
        return f"{at.point}:{sum(h.point == at.point for h in self.hits[: index + 1])}"

    def settled_agents(self, point: str, n: int) -> tuple[str, ...]:
        """Agents whose night is wholly committed to the database when the crash at the n-th
        hit of `point` hits (only MEMORY.md may lag behind): every commit of theirs was done
        before it (a `*.after_commit` point is reached once its commit is done). New input
        after the crash may only be compared for them: for any other agent the next night
        legitimately decides over more input at once than the uninterrupted first night did
        (salience weighs a claim by its rarity in the agent's corpus, say)."""
        at = [i for i, h in enumerate(self.hits) if h.point == point][n - 1]
        done = at + 1 if point in COMMITTED else at
        return tuple(
            a
            for a in AGENTS
            if self.count("deep.after_commit", a)  # no deep commit: its end is unmarked
            and all(h.agent != a or h.point not in COMMITTED for h in self.hits[done:])
        )


# -- running processes ------------------------------------------------------------------------

SERVER = textwrap.dedent(
    """
    import json, os, sys, traceback
    from dreaming import faults
    import importlib
    from dreaming.cli import main
    for name in (  # what main() imports
        "_demo", "_entries", "_forget", "_jobs", "_run", "_runs", "_scheduler", "_status",
        "_tags", "_verify",
    ):
        try:
            importlib.import_module("dreaming.cli." + name)
        except ImportError:
            pass
    # What a command imports or builds on first use, once here rather than in every child:
    # the runner (the CLI loads it lazily) and the default salience lexicon (cached).
    from dreaming import runner as _runner
    from dreaming.ingest import salience as _salience
    _salience.default_lexicon()

    def die_after(module, attr, nth):
        mod = importlib.import_module(module)
        original = getattr(mod, attr)
        calls = [0]

        def wrapper(*args, **kwargs):
            result = original(*args, **kwargs)
            calls[0] += 1
            if calls[0] >= nth:
                os._exit(137)
            return result

        setattr(mod, attr, wrapper)

    def trace_to(path):
        # One JSON line [agent, point, path] per crash point passed, in order: the library's
        # checkpoints, and every os.fsync once it returned (as die_after counts them).
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        agent = [""]

        def note(point, synced=""):
            os.write(out, (json.dumps([agent[0], point, synced]) + "\\n").encode())

        checkpoint = faults.checkpoint

        def traced_checkpoint(name):
            note(name)
            checkpoint(name)

        faults.checkpoint = traced_checkpoint
        fsync = os.fsync

        def traced_fsync(fd):
            fsync(fd)
            try:
                synced = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                synced = "?"
            note("os.fsync", synced)

        os.fsync = traced_fsync
        from dreaming import runner

        run_agent = runner.run_agent

        def traced_run_agent(app, name, *args, **kwargs):
            agent[0] = name
            return run_agent(app, name, *args, **kwargs)

        runner.run_agent = traced_run_agent

    for raw in sys.stdin:
        req = json.loads(raw)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                os.environ.clear()
                os.environ.update(req["env"])
                faults._hits.clear()
                if req.get("wrap"):
                    die_after(*req["wrap"])
                if req.get("trace"):
                    trace_to(req["trace"])
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


def base_args(root: Path) -> list[str]:
    return ["--state-dir", str(root), "--config", str(root / "dreaming.toml")]


def night_args(root: Path) -> list[str]:
    """One night: light then deep over every agent, in one process."""
    return [*base_args(root), "run", "--phase", "light", "--phase", "deep", "--json"]


FORGOTTEN = ("main", "s-main-01")  # the forget scenario's agent and session


def forget_args(root: Path) -> list[str]:
    agent, session = FORGOTTEN
    return [*base_args(root), "forget", "--agent", agent, "--session", session, "--json"]


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

    def run(
        self, root: Path, args: list[str], crash: str | None = None, trace: Path | None = None
    ) -> tuple[int, str]:
        """(exit code, stdout + stderr) of one process running `dreaming <args>` over `root`,
        killed at `crash` (`<point>:<n>`, a library point or one of `WRAPPED`) if given,
        writing the crash points it passes to `trace` if given (see `read_trace`)."""
        self.count += 1
        out, err = self.logs / f"{self.count}.out", self.logs / f"{self.count}.err"
        wrap = None
        if crash is not None and crash.partition(":")[0] in WRAPPED:
            point, _, n = crash.partition(":")
            wrap, crash = [*WRAPPED[point], int(n or 1)], None
        env = clean_env(root, crash)
        req = {
            "args": args,
            "env": env,
            "out": str(out),
            "err": str(err),
            "wrap": wrap,
            "trace": str(trace) if trace is not None else None,
        }
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the fork server died"
        return int(json.loads(line)["rc"]), out.read_text() + err.read_text()

    def night(self, root: Path, crash: str | None = None) -> tuple[int, str]:
        """(exit code, stdout + stderr) of one process running one night over `root`."""
        return self.run(root, night_args(root), crash)

    def traced_night(self, root: Path) -> Trace:
        """One clean night over `root`, and the crash points it passed."""
        trace = self.logs / f"{self.count + 1}.trace"
        rc, output = self.run(root, night_args(root), trace=trace)
        assert rc == 0, f"a clean night failed ({rc}):\n{output[-3000:]}"
        return read_trace(trace, root)

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


def read_trace(path: Path, root: Path) -> Trace:
    hits = []
    for line in path.read_text().splitlines() if path.exists() else []:
        agent, point, synced = json.loads(line)
        hits.append(Hit(agent, point, synced.removeprefix(f"{root.resolve()}/")))
    return Trace(tuple(hits))


def clean_run(runner: Runner, root: Path, args: list[str], what: str) -> None:
    rc, output = runner.run(root, args)
    assert rc == 0, f"{what} failed ({rc}):\n{output[-3000:]}"


def clean_night(runner: Runner, root: Path) -> None:
    clean_run(runner, root, night_args(root), "a clean night")


def crashed_run(runner: Runner, root: Path, args: list[str], crash: str) -> None:
    rc, output = runner.run(root, args, crash)
    assert rc == CRASH_RC, (
        f"DREAMING_CRASH_AT={crash} was never reached (exit code {rc}): the scenario does"
        f" not exercise that crash point\n{output[-3000:]}"
    )


def crashed_night(runner: Runner, root: Path, crash: str) -> None:
    crashed_run(runner, root, night_args(root), crash)


def verify_ok(runner: Runner, root: Path) -> None:
    """`dreaming verify --agent <a>` for every agent exits 0."""
    agents = [arg for a in AGENTS for arg in ("--agent", a)]
    rc, output = runner.run(root, [*base_args(root), "verify", *agents])
    assert rc == 0, f"dreaming verify failed ({rc}):\n{output[-3000:]}"


# -- input ------------------------------------------------------------------------------------


def build(root: Path) -> Path:
    demo.build(root)
    with (root / "dreaming.toml").open("a") as fh:
        fh.write(EXTRA_CONFIG)
    return root


NEXT_DAY = demo.BASE + timedelta(days=14)

# Between the nights, one grown session per agent: new facts unlike any the first night kept
# (new names and places, one with a durability cue: the second night's new entries), and
# repeats of what the first night kept: recalls of our own entries, or more evidence for a
# candidate it merged into one, decided again; neither may become an entry of its own.
APPENDS: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "bob",
        "s-bob-04",
        [
            ("user", "Please remember that the production database is called redwood."),
            ("assistant", "Noted: production is redwood."),
            ("user", "The analytics warehouse is called kestrel and runs in Frankfurt."),
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
            ("user", "My brother Tomas lives in Porto and teaches chemistry."),
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


# Memory files beside MEMORY.md that quote the session to forget (s-main-01 says "My sister
# Anna lives in Lisbon." and "Lisbon is lovely in spring."), written after the night so that
# the purge has lines to scrub from them; the other lines must stay.
SEEDED = {
    "DREAMS.md": (
        "# Dreams\n\nOperator note: the diary below is written by dreaming.\n"
        "<!-- dreaming:diary 2026-03-02 -->\n## 2026-03-02\n"
        '- A theme of family: "My sister Anna lives in Lisbon."\n'
        "- A theme of food: peanuts keep coming up.\n"
        "<!-- /dreaming:diary -->\n"
    ),
    "memory/2026-03-02.md": (
        "# 2026-03-02\n\n- Lisbon is lovely in spring.\n- Booked the dentist for September.\n"
    ),
}


def seed_memory_files(root: Path) -> None:
    for name, content in SEEDED.items():
        path = root / WORKSPACES[FORGOTTEN[0]] / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


# -- what is compared -------------------------------------------------------------------------

State = dict[str, dict[str, Any]]


def agent_state(root: Path, agent: str) -> dict[str, Any]:
    """What matters about one agent: no row ids, no write times, no run records."""
    db = root / "dreaming" / "agents" / f"{agent}.sqlite"
    assert db.exists(), f"no database for {agent}"
    ws = root / WORKSPACES[agent]
    memory = ws / "MEMORY.md"
    dreams = ws / "DREAMS.md"
    corpus_dir = ws / "memory" / ".dreams" / "session-corpus"
    tombstone_file = root / "dreaming" / "tombstones" / f"{agent}.jsonl"
    conn = sqlite3.connect(db)

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in conn.execute(sql).fetchall())

    try:
        return {
            "memory": memory.read_text() if memory.exists() else None,
            "dreams": dreams.read_text() if dreams.exists() else None,
            "notes": {p.name: p.read_text() for p in sorted((ws / "memory").glob("*.md"))},
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
            "tombstones": rows("SELECT session_id, session_key, reason FROM tombstones"),
            "tombstone_file": sorted(
                {
                    (row["session_id"], row["session_key"])
                    for row in map(json.loads, tombstone_file.read_text().splitlines())
                }
                if tombstone_file.exists()
                else set()
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
        shelved = {k: t for k, t, status in s["entries"] if status == "archived"}
        held = live | shelved
        assert {status for _k, _t, status in s["entries"]} <= {"live", "archived"}, at
        assert s["memory"] is not None and s["memory"].startswith(demo.OPERATOR_MEMORY), at
        assert capacity.measure(s["memory"])[0] <= MAX_CHARS, f"{at}: MEMORY.md over budget"
        doc = memory_file.parse(s["memory"])
        assert not doc.edited_blocks(), f"{at}: a managed block does not match its key"
        blocks = [(b.key, b.text) for b in doc.blocks]
        assert len(blocks) == len(dict(blocks)), f"{at}: a block appears twice"
        assert dict(blocks) == live, f"{at}: MEMORY.md blocks != live entries"
        shelf = s["notes"].get(ARCHIVE)
        assert (shelf is not None) == bool(shelved), f"{at}: an archive iff entries archived"
        if shelf is not None:
            doc = memory_file.parse(shelf)
            assert not doc.edited_blocks(), f"{at}: an archive line does not match its key"
            lines = [(b.key, b.text) for b in doc.blocks]
            assert len(lines) == len(dict(lines)), f"{at}: an archive line appears twice"
            assert dict(lines) == shelved, f"{at}: archive lines != archived entries"
        assert dict(s["search_index"]) == held, f"{at}: search index != entries held"
        origin_keys = {r[0] for r in s["origins"]}
        assert origin_keys <= set(held), f"{at}: origin rows of entries not held"
        assert set(held) <= origin_keys, f"{at}: an entry without origins"
        assert {r[0] for r in s["entry_evidence"]} <= set(held), f"{at}: dead entry evidence"
        assert {r[0] for r in s["recalls"]} <= set(live) | {k for k, _, st in s["entries"]}, (
            f"{at}: recall of an unknown entry"
        )
        assert s["dangling_evidence"] == [], f"{at}: candidate evidence without line/candidate"
        kv = dict(s["agent_state"])
        assert "memory_dirty" not in kv, f"{at}: MEMORY.md left marked dirty"
        # No hash before the first write; after it, the hash of what is on disk.
        assert kv.get("memory_hash") in (None, content_hash(s["memory"])), at
        assert kv.get("archive_hash") == (content_hash(shelf) if shelf else None), at
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
        # Tombstones: the file and the table name the same sessions, and nothing of them
        # is left in the corpus or in any entry's lineage.
        gone = {sid for sid, _key, _reason in s["tombstones"]}
        assert gone == {sid for sid, _key in s["tombstone_file"]}, (
            f"{at}: tombstone file != tombstone rows"
        )
        assert not gone & {r[0] for r in s["corpus_lines"]}, f"{at}: corpus of a tombstone"
        assert not gone & {r[1] for r in s["origins"]}, f"{at}: origin in a tombstone"
        assert not gone & {r[1] for r in s["candidate_evidence"]}, f"{at}: candidate evidence"
        assert {sid: st for sid, _f, _k, _kind, st, _r in s["sessions"] if sid in gone} == {
            sid: "forgotten" for sid in gone
        }, f"{at}: a tombstoned session not marked forgotten"
    leftovers = [str(p.relative_to(root)) for p in root.rglob("*.tmp")]
    assert not leftovers, f"temporary files left behind: {leftovers}"


def assert_same(got: State, want: State, agents: tuple[str, ...] = AGENTS) -> None:
    for agent in agents:
        for part, value in want[agent].items():
            assert got[agent][part] == value, f"{agent}: {part} {DIVERGED}"


# -- references -------------------------------------------------------------------------------


@dataclass
class References:
    one_night: State
    two_nights: State
    first: Trace  # the crash points the first night passes
    second: Trace  # ... and the second, after the second day's input

    def trace(self, mode: str) -> Trace:
        """The night a scenario crashes: the second in `second`, else the first."""
        return self.second if mode == "second" else self.first


@pytest.fixture(scope="module")
def refs(runner: Runner, tmp_path_factory: pytest.TempPathFactory) -> References:
    root = build(tmp_path_factory.mktemp("reference") / "state")
    first = runner.traced_night(root)
    one = snapshot(root)
    check_consistent(root, one)
    clean_night(runner, root)
    assert snapshot(root) == one, "a quiet second night changed something"
    append_second_day(root)
    second = runner.traced_night(root)
    two = snapshot(root)
    check_consistent(root, two)
    # The scenarios are worth crashing in: each night adds entries, the second also recalls
    # (and what the second day repeats of the first does not become an entry again); each
    # night passes every crash point for each agent, and in the first a crash can fall
    # between two deep batches of one agent.
    for agent, _sid, turns in APPENDS:
        live_one = {t for _k, t, _status in one[agent]["entries"]}
        live_two = {t for _k, t, _status in two[agent]["entries"]}
        assert live_one and live_two - live_one, f"{agent}: the second night added no entry"
        # Both nights fill MEMORY.md past its budget: some entries are archived.
        for state in (one, two):
            assert {st for _k, _t, st in state[agent]["entries"]} == {"live", "archived"}, agent
        assert two[agent]["recalls"], agent
        said = {line[6] for line in one[agent]["corpus_lines"]}
        repeats = [t for role, t in turns if role == "user" and t in said]
        assert repeats, agent
        again = [(r, e) for r in repeats for e in live_two - live_one if r in e]
        assert not again, f"{agent}: repeated, promoted again: {again}"
    for trace in (first, second):
        assert set(trace.points()) >= {*COMMITTED, "archive.after_write", "memory.after_write"}
        assert any(ARCHIVE in h.path for h in trace.hits if h.agent == "main"), "no archive"
        for point in trace.points():
            assert all(trace.count(point, agent) for agent in AGENTS), (point, trace)
    assert max(first.count("deep.after_commit", agent) for agent in AGENTS) >= 2
    return References(one, two, first, second)


def run_scenario(runner: Runner, root: Path, mode: str, crash: str, refs: References) -> None:
    point, _, n = crash.partition(":")
    compared = refs.first.settled_agents(point, int(n)) if mode == "new-input" else AGENTS
    assert compared, f"{crash} leaves no agent settled: nothing to compare with new input"
    build(root)
    if mode == "second":
        clean_night(runner, root)
        append_second_day(root)
    crashed_night(runner, root, crash)
    if mode == "new-input":
        append_second_day(root)
    want = refs.one_night if mode == "first" else refs.two_nights
    recover_by_nights(runner, root, lambda got: assert_same(got, want, compared))


def recover_by_nights(
    runner: Runner, root: Path, check: Callable[[State], None] = lambda _: None
) -> None:
    """Two clean nights: the first converges (consistent, verified, and as `check` wants),
    the second changes nothing."""
    clean_night(runner, root)
    got = snapshot(root)
    check_consistent(root, got)
    verify_ok(runner, root)
    check(got)
    clean_night(runner, root)
    assert snapshot(root) == got, "the state kept changing after recovery"


# -- forget -----------------------------------------------------------------------------------


@dataclass
class ForgetReferences:
    purged: State  # a clean night, then an uninterrupted forget
    next_night: State  # ... and one more clean night
    needles: list[str]  # the purged session's text, as it may be copied anywhere


def prepare_forget(runner: Runner, root: Path) -> None:
    build(root)
    clean_night(runner, root)
    seed_memory_files(root)


def purged_needles(root: Path) -> list[str]:
    """The forgotten session's corpus lines and the claims they make (what a purge hunts
    for), minus any text that a kept line also says: that one may stay."""
    agent, session = FORGOTTEN
    conn = sqlite3.connect(root / "dreaming" / "agents" / f"{agent}.sqlite")
    try:
        lines = conn.execute("SELECT session_id, text FROM corpus_lines").fetchall()
    finally:
        conn.close()
    purged = [t for sid, t in lines if sid == session]
    kept = [t for sid, t in lines if sid != session]
    snippets = {s for s in snippets_of(purged, Settings()) if not any(s in k for k in kept)}
    assert set(purged) <= snippets, "a purged line is also said by a kept one"
    return needles_of(snippets)


def assert_forgotten(root: Path, needles: list[str]) -> None:
    """Nothing the purged session said is left in any file under the state folder (its
    transcripts aside: a purge never edits them), database files and their logs included as
    raw bytes, nor in a dump of the agent's database; its tombstone is there."""
    agent, session = FORGOTTEN
    found = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or rel.parts[0] == "agents":
            continue
        data = path.read_bytes()
        found += [f"{rel}: {n!r}" for n in needles if n.encode() in data]
    db = root / "dreaming" / "agents" / f"{agent}.sqlite"
    conn = sqlite3.connect(db)
    try:
        dump = "\n".join(conn.iterdump())
        tombstone = conn.execute(
            "SELECT reason FROM tombstones WHERE session_id = ?", (session,)
        ).fetchall()
    finally:
        conn.close()
    # iterdump writes a quote inside an SQL literal twice.
    found += [f"dump: {n!r}" for n in needles if n in dump or n.replace("'", "''") in dump]
    assert not found, "purged text survives:\n" + "\n".join(found)
    assert tombstone == [("forgotten",)], f"no tombstone row for {session}"
    lines = (root / "dreaming" / "tombstones" / f"{agent}.jsonl").read_text().splitlines()
    assert session in {json.loads(line)["session_id"] for line in lines}, "no tombstone line"


@pytest.fixture(scope="module")
def forget_refs(runner: Runner, tmp_path_factory: pytest.TempPathFactory) -> ForgetReferences:
    root = tmp_path_factory.mktemp("forget-reference") / "state"
    prepare_forget(runner, root)
    before = snapshot(root)
    needles = purged_needles(root)
    clean_run(runner, root, forget_args(root), "a clean forget")
    assert_forgotten(root, needles)
    purged = snapshot(root)
    check_consistent(root, purged)
    verify_ok(runner, root)
    # The purge is worth crashing in: it removes an entry, corpus lines, lines of MEMORY.md,
    # DREAMS.md and a daily note; bob is untouched.
    main, was = purged["main"], before["main"]
    assert len(main["entries"]) < len(was["entries"]), "the purge removed no entry"
    assert main["corpus_files"] != was["corpus_files"], "the purge changed no corpus file"
    assert main["dreams"] != was["dreams"] and main["notes"] != was["notes"]
    assert purged["bob"] == before["bob"], "forgetting main's session changed bob"
    # The same forget again finds nothing more to do.
    clean_run(runner, root, forget_args(root), "a repeated forget")
    assert snapshot(root) == purged, "a repeated forget changed something"
    clean_night(runner, root)
    next_night = snapshot(root)
    check_consistent(root, next_night)
    assert_forgotten(root, needles)
    clean_night(runner, root)
    assert snapshot(root) == next_night, "a quiet night after the purge changed something"
    return ForgetReferences(purged, next_night, needles)


def recover(runner: Runner, root: Path, recovery: str, crash: str | None = None) -> None:
    args = forget_args(root) if recovery == "forget" else night_args(root)
    if crash is None:
        clean_run(runner, root, args, f"the recovering {recovery}")
    else:
        crashed_run(runner, root, args, crash)


def run_forget_scenario(
    runner: Runner,
    root: Path,
    crash: str,
    recovery: str,
    refs: ForgetReferences,
    second: str | None = None,
) -> None:
    """A clean night; the forget killed at `crash`; the recovery (`forget` again or the next
    `run`), itself killed at `second` first if given; then one more night."""
    prepare_forget(runner, root)
    crashed_run(runner, root, forget_args(root), crash)
    if second is not None:
        recover(runner, root, recovery, second)
    recover(runner, root, recovery)
    assert_forgotten(root, refs.needles)  # first: the files as the recovery left them
    got = snapshot(root)
    check_consistent(root, got)
    verify_ok(runner, root)
    assert_same(got, refs.purged if recovery == "forget" else refs.next_night)
    clean_night(runner, root)
    assert_same(snapshot(root), refs.next_night)
    assert_forgotten(root, refs.needles)


# -- tests ------------------------------------------------------------------------------------


def test_console_script_agrees(tmp_path: Path, runner: Runner, refs: References) -> None:
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
    assert run(root, refs.first.crash(At("deep.after_commit", "main", 1))) == CRASH_RC
    assert run(root) == 0
    got = snapshot(root)
    check_consistent(root, got)
    verify_ok(runner, root)
    assert_same(got, refs.one_night)


NIGHT_CASES = [
    ("first", At("light.read", "main", 2)),  # main's second file read, its batch not committed
    ("first", At("light.read", "bob", 3)),
    ("first", At("light.before_commit", "main", 1)),
    ("first", At("light.after_commit", "bob", -1)),  # bob's last session
    ("first", At("light.after_commit", "main", -1)),  # main's last session
    ("first", At("deep.before_commit", "main", -1)),
    ("first", At("deep.after_commit", "bob", 1)),  # between bob's first two batches
    ("first", At("deep.after_commit", "main", 1)),  # ... and main's
    ("first", At("memory.before_write", "main", -1)),
    ("first", At("memory.after_write", "main", 1)),
    # main's MEMORY.md written to its temp file, not renamed
    ("first", At("os.fsync", "main", 1, "MEMORY.md")),
    # The archive written (entries leaving MEMORY.md are in it), MEMORY.md not yet; and the
    # archive's temp file complete, not renamed.
    ("first", At("archive.after_write", "main", 1)),
    ("first", At("archive.after_write", "bob", -1)),
    ("first", At("os.fsync", "main", 1, ARCHIVE)),
    ("second", At("archive.after_write", "main", -1)),
    ("second", At("light.after_commit", "main", -1)),  # main's only grown session
    ("second", At("deep.after_commit", "bob", 1)),
    ("second", At("memory.before_write", "main", 1)),
    ("new-input", At("light.before_commit", "main", 1)),  # bob's night done, main's not begun
    ("new-input", At("deep.after_commit", "bob", -1)),
    ("new-input", At("deep.after_commit", "main", -1)),
    ("new-input", At("memory.after_write", "main", -1)),
]

# (crash point of the forget, recovery, crash point of the recovery or None)
FORGET_CASES: list[tuple[str, str, str | None]] = [
    ("forget.after_commit", "forget", None),
    ("forget.after_commit", "run", None),
    ("forget.after_files", "forget", None),
    ("forget.after_files", "run", None),
    ("forget.before_complete", "forget", None),
    ("forget.before_complete", "run", None),
    ("memory.before_write", "forget", None),
    ("archive.after_write", "forget", None),
    ("archive.after_write", "run", None),
    ("memory.after_write", "run", None),
    ("forget.after_commit", "run", "forget.after_files:1"),  # the recovery crashes too
    ("forget.after_files", "forget", "forget.after_commit:1"),  # ... after completing it
    ("forget.after_tombstone_file", "forget", None),
    ("forget.after_tombstone_file", "run", None),
]


def xfail_if(bug: Bug | None) -> list[Any]:
    if bug is None:
        return []
    return [pytest.mark.xfail(strict=True, raises=AssertionError, reason=bug.reason)]


def _night_cases() -> list[Any]:
    out = []
    for mode, at in NIGHT_CASES:
        marks = xfail_if(known_bug(mode, at))
        out.append(pytest.param(mode, at, marks=marks, id=f"{mode}-{at}"))
    return out


def _forget_cases() -> list[Any]:
    out = []
    for point, recovery, second in FORGET_CASES:
        marks = xfail_if(known_forget_bug(point, recovery, second))
        tail = f"-then-{second}" if second else ""
        out.append(
            pytest.param(point, recovery, second, marks=marks, id=f"{point}-{recovery}{tail}")
        )
    return out


@pytest.mark.parametrize(("mode", "at"), _night_cases())
def test_crash_converges(
    mode: str, at: At, tmp_path: Path, runner: Runner, refs: References
) -> None:
    crash = refs.trace(mode).crash(at)
    expect_bug(
        known_bug(mode, at),
        lambda: run_scenario(runner, tmp_path / "state", mode, crash, refs),
    )


@pytest.mark.parametrize(("point", "recovery", "second"), _forget_cases())
def test_forget_crash_converges(
    point: str,
    recovery: str,
    second: str | None,
    tmp_path: Path,
    runner: Runner,
    forget_refs: ForgetReferences,
) -> None:
    expect_bug(
        known_forget_bug(point, recovery, second),
        lambda: run_forget_scenario(
            runner, tmp_path / "state", f"{point}:1", recovery, forget_refs, second
        ),
    )


def test_forget_reaches_the_temp_file_of_a_crashed_night(
    tmp_path: Path, runner: Runner, refs: References, forget_refs: ForgetReferences
) -> None:
    """A night killed after writing main's first corpus file (every line from s-main-01) to
    its temp file: the next night removes the temp file, and a forget of s-main-01 then
    leaves its text nowhere."""
    root = build(tmp_path / "state")
    crash = refs.first.crash(At("os.fsync", "main", 1, "session-corpus"))
    crashed_night(runner, root, crash)
    pattern = ".2026-03-02.txt.*.tmp"
    temp = list((root / WORKSPACES["main"] / "memory").rglob(pattern))
    assert len(temp) == 1 and "Lisbon is lovely in spring." in temp[0].read_text(), (
        f"{crash} no longer leaves main's first corpus file half written"
    )
    clean_night(runner, root)  # the next run, under the agent's lock, removes it
    assert list((root / WORKSPACES["main"] / "memory").rglob(pattern)) == []
    seed_memory_files(root)
    clean_run(runner, root, forget_args(root), "a clean forget")
    assert_forgotten(root, forget_refs.needles)


# A night killed after a deep batch that merged an entry MEMORY.md shows into a new one (the
# old entry's row is deleted) and before deep wrote MEMORY.md (once, after its last batch).
# The old line is still in the file when new input repeats it; the next light counts the
# file's lines as our entries (MEMORY.md may lag behind the database) and once recorded a
# recall of a key that no entry has. It now recalls the entry the old one went into
# (lineage.successors).
LAGGING_AGENT, LAGGING_SESSION = "main", "s-main-07"
# An owner's statement, dated or not (the owner is implicit).
ENTRY_TEXT = re.compile(r"^(?:\d{4}-\d{2}-\d{2} )?(?P<said>(?!The agent: ).+)$")
GROWN = ("I'm allergic to peanuts, please remember that.", "peanuts", "peanuts and cashews")


def lagging_merge(runner: Runner, root: Path) -> tuple[str, str, str]:
    """(crash point, agent, what the user said) for a second night whose deep batch merges a
    first-night entry into one that says a detail more ("... peanuts and cashews ...") and
    is killed after that batch's commit; `root` is left as that crash left it."""
    old, word, grown = GROWN
    for k in (1, 2, 3):
        build(root)
        clean_night(runner, root)
        path = root / "agents" / LAGGING_AGENT / "sessions" / f"{LAGGING_SESSION}.jsonl"
        append(path, "user", old.replace(word, grown), NEXT_DAY, "grown-1")
        crash = f"deep.after_commit:{k}"
        crashed_night(runner, root, crash)
        state = agent_state(root, LAGGING_AGENT)
        keys = {key for key, _text, _status in state["entries"]}
        for block in memory_file.parse(state["memory"]).blocks:
            said = ENTRY_TEXT.match(block.text)
            if block.key not in keys and said and said["said"] == old:
                return crash, LAGGING_AGENT, old
    pytest.fail(f"no deep batch merged {old!r} into a new entry before MEMORY.md was written")


def test_a_repeat_of_an_entry_merged_away_while_memory_md_lagged(
    tmp_path: Path, runner: Runner
) -> None:
    """The crashed night's MEMORY.md still shows an entry that its last committed batch
    merged into another; the user repeats that line; two nights later everything agrees."""
    root = tmp_path / "state"
    _crash, agent, said = lagging_merge(runner, root)
    path = root / "agents" / agent / "sessions" / f"{LAGGING_SESSION}.jsonl"
    append(path, "user", said, NEXT_DAY + timedelta(hours=1), f"{LAGGING_SESSION}-repeat")

    def the_repeat_recalls_the_entry_it_went_into(s: State) -> None:
        mine = s[agent]
        held = {k for k, _text, _status in mine["entries"]}  # live or archived
        assert {r[0] for r in mine["recalls"]} <= held, "a recall of an entry not in memory"
        last_line = max(line for sid_, line, *_ in mine["corpus_lines"] if sid_ == LAGGING_SESSION)
        repeat = [r for r in mine["recalls"] if r[1] == LAGGING_SESSION and r[2] == last_line]
        assert repeat, f"the repeat of {said!r} recalled nothing"

    recover_by_nights(runner, root, the_repeat_recalls_the_entry_it_went_into)


def test_an_unreached_crash_point_fails_loudly(
    tmp_path: Path, runner: Runner, refs: References
) -> None:
    root = build(tmp_path / "state")
    one_past = refs.first.count("deep.after_commit") + 1  # the night's last batch, and one
    with pytest.raises(AssertionError, match="never reached"):
        crashed_night(runner, root, f"deep.after_commit:{one_past}")


# -- random picks -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Trial:
    kind: str  # "night" or "forget"
    mode: str  # night: first, second or new-input; forget: the recovery, forget or run
    crash: str  # <point>:<n>
    second: str | None = None  # forget: where the recovery crashes first, if it does
    named: str = ""  # night: the crash point by what it is (`At`)

    def __str__(self) -> str:
        named = f"({self.named})" if self.named else None
        return " ".join(x for x in (self.kind, self.mode, self.crash, named, self.second) if x)


def trial_pool(refs: References) -> list[Trial]:
    """Every crash the random test may pick, known bugs left out (their cases fail): each
    time a reference night passes a library crash point, and every forget crash."""
    nights = []
    for mode in ("first", "second", "new-input"):
        trace = refs.trace(mode)
        for point in trace.points():
            for agent in AGENTS:
                for k in range(1, trace.count(point, agent) + 1):
                    at = At(point, agent, k)
                    crash = trace.crash(at)
                    _, _, n = crash.partition(":")
                    if mode == "new-input" and not trace.settled_agents(point, int(n)):
                        continue
                    if known_bug(mode, at) is None:
                        nights.append(Trial("night", mode, crash, named=str(at)))
    forgets = [
        Trial("forget", recovery, f"{point}:1", second)
        for point in FORGET_POINTS
        for recovery in ("forget", "run")
        for second in (None, *(f"{p}:1" for p in RECOVERY_POINTS[recovery]))
        if not known_forget_bug(point, recovery, second)
    ]
    return nights + forgets


def pick_trials(pool: list[Trial], count: int, seed: int) -> list[Trial]:
    """`count` seeded picks: no repeats while the pool lasts, then round after round."""
    rng = random.Random(seed)
    picks: list[Trial] = []
    while len(picks) < count:
        picks += rng.sample(pool, min(count - len(picks), len(pool)))
    return picks


def run_trial(
    runner: Runner, root: Path, trial: Trial, refs: References, frefs: ForgetReferences
) -> None:
    if trial.kind == "night":
        run_scenario(runner, root, trial.mode, trial.crash, refs)
    else:
        run_forget_scenario(runner, root, trial.crash, trial.mode, frefs, trial.second)


def test_default_run_has_enough_trials(refs: References) -> None:
    """The issue asks for at least 50 crash trials in the default run: count only those
    expected to converge (the console script's run is one)."""
    fixed = [known_bug(mode, at) for mode, at in NIGHT_CASES]
    fixed += [known_forget_bug(*case) for case in FORGET_CASES]
    assert 1 + fixed.count(None) + RANDOM_TRIALS >= 50
    pool = trial_pool(refs)
    assert len(set(pool)) == len(pool) >= RANDOM_TRIALS
    assert {t.mode for t in pool if t.kind == "night"} == {"first", "second", "new-input"}
    assert {t.kind for t in pick_trials(pool, RANDOM_TRIALS, SEED)} == {"night", "forget"}


def random_trials() -> int:
    return int(os.environ.get("DREAMING_CRASH_TRIALS", RANDOM_TRIALS))


# The picks are dealt into this many tests, so a parallel run (pytest -n) shares them out
# instead of waiting on one long test.
RANDOM_SHARES = 6


# A pick runs three to five processes, about 4 s on an idle 2-core machine: the suite's
# per-test timeout (a guard against a hung run) grows with the number of picks.
@pytest.mark.slow
@pytest.mark.timeout(60 + 20 * -(-random_trials() // RANDOM_SHARES))
@pytest.mark.parametrize("share", range(RANDOM_SHARES))
def test_random_crashes_converge(
    tmp_path: Path, runner: Runner, refs: References, forget_refs: ForgetReferences, share: int
) -> None:
    """`DREAMING_CRASH_TRIALS` seeded picks of a scenario (night or forget) and its crash
    points (`DREAMING_CRASH_SEED` changes the seed), every `RANDOM_SHARES`-th from `share`;
    every pick must converge."""
    count = random_trials()
    seed = int(os.environ.get("DREAMING_CRASH_SEED", SEED))
    pool = trial_pool(refs)
    print(f"{count} picks from a pool of {len(pool)} crashes, seed {seed}, share {share}")
    problems = []
    picks = list(enumerate(pick_trials(pool, count, seed)))[share::RANDOM_SHARES]
    for i, trial in picks:
        try:
            run_trial(runner, tmp_path / f"s{i}", trial, refs, forget_refs)
        except AssertionError as err:
            problems.append(f"{trial}: {str(err)[:2000]}")
    assert not problems, f"seed {seed}, {len(problems)} of {len(picks)} picks:\n" + "\n\n".join(
        problems
    )
