"""Claude Code per project (issue #22 part 4): each project folder of a claude-code source is
its own agent, with its own state, written to that project's `memory/MEMORY.md`, and nothing
crosses projects."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dreaming.cli import cli
from dreaming.config import check_agent_id, file_stem, load_settings, parse_settings
from dreaming.errors import ConfigError
from dreaming.ingest import sources
from dreaming.paths import Paths, project_agent_id
from tests.transcript_builders import cc_assistant, cc_user, text, write_jsonl

ACME = "-home-ana-src-acme"
ZETA = "-home-ana-src-zeta"
LINT = "Always run make lint before committing in this repository."
PORTO = "My name is Ana and I live in Porto with my partner Rui since 2019."
PR = "Never push directly to the main branch, open a pull request instead."
CLAUDE_NOTES = (
    "# Project memory\n"
    "\n"
    "- Build with `pnpm build`; tests with `pnpm test`.\n"
    "- See [debugging.md](debugging.md) for the flaky test notes.\n"
)


def cmd(state: Path, *args: str, ok: bool = True) -> Any:
    from dreaming.cli import _forget, _run, _status, _verify  # noqa: F401

    result = CliRunner().invoke(
        cli,
        ["--state-dir", str(state), "--config", str(state / "dreaming.toml"), *args],
        catch_exceptions=False,
    )
    if ok:
        assert result.exit_code == 0, result.output
    return result


def as_json(state: Path, *args: str) -> Any:
    return json.loads(cmd(state, *args, "--json").stdout)


def configure(state: Path, projects: Path, extra: str = "") -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "dreaming.toml").write_text(
        "read_state_dir = false\n"
        f'[[sources]]\nkind = "claude-code"\npath = "{projects}"\nagent = "claude"\n{extra}'
    )


def two_projects(tmp_path: Path) -> tuple[Path, Path]:
    """A projects folder with acme (an instruction and a disclosure) and zeta (another
    instruction), and a state folder reading it."""
    projects = tmp_path / "projects"
    write_jsonl(
        projects / ACME / "a1.jsonl",
        [
            cc_user(LINT, uuid="u-1", ts="2026-02-01T10:00:00Z"),
            cc_assistant("m1", [text("Understood.")], ts="2026-02-01T10:00:05Z"),
            cc_user(PORTO, uuid="u-2", ts="2026-02-01T10:01:00Z"),
        ],
    )
    write_jsonl(projects / ZETA / "z1.jsonl", [cc_user(PR, uuid="u-1", ts="2026-02-02T09:00:00Z")])
    state = tmp_path / "state"
    configure(state, projects)
    return state, projects


def pooled_night(tmp_path: Path) -> tuple[Path, Path]:
    """`two_projects` read as one pooled agent (per_project = false), after a night."""
    state, projects = two_projects(tmp_path)
    configure(state, projects, "per_project = false\n")
    cmd(state, "run")
    return state, projects


def memory_of(projects: Path, project: str) -> str:
    path = projects / project / "memory" / "MEMORY.md"
    return path.read_text() if path.exists() else ""


def everything_under(folder: Path) -> str:
    return "\n".join(
        p.read_bytes().decode("utf-8", "replace") for p in sorted(folder.rglob("*")) if p.is_file()
    )


def database(state: Path, agent: str) -> Path:
    return state / "dreaming" / "agents" / f"{file_stem(agent)}.sqlite"


def db_text(state: Path, agent: str) -> str:
    with sqlite3.connect(database(state, agent)) as conn:
        return "\n".join(line for line in conn.iterdump())


# -- settings and ids ------------------------------------------------------------------------


def test_per_project_is_the_default_and_only_for_claude_code(tmp_path: Path) -> None:
    s = parse_settings({"sources": [{"kind": "claude-code", "path": "p", "agent": "c"}]}, "t")
    assert s.sources[0].per_project is None and s.sources[0].projects_apart
    off = {"kind": "claude-code", "path": "p", "agent": "c", "per_project": False}
    assert not parse_settings({"sources": [off]}, "t").sources[0].projects_apart
    (tmp_path / "dreaming.toml").write_text(
        '[[sources]]\nkind = "event-log"\npath = "l"\nagent = "ev"\nper_project = true\n'
    )
    with pytest.raises(ConfigError, match="per_project applies to claude-code sources"):
        load_settings(tmp_path / "dreaming.toml")


def test_a_project_agent_id_is_readable_and_an_odd_folder_name_still_makes_a_valid_one() -> None:
    assert project_agent_id("claude", ACME) == f"claude:{ACME}"
    odd = ["x" * 260, "tab\there", "back\\slash", "é" * 200]
    ids = [project_agent_id("claude", name) for name in odd]
    for agent in ids:
        assert check_agent_id(agent, "test") == agent and agent.startswith("claude:")
        assert len(agent) <= 255
    assert len(set(ids)) == len(ids)
    assert ids == [project_agent_id("claude", name) for name in odd]  # stable


def test_paths_find_the_project_folder_of_an_agent(tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    long_name = "-home-ana-" + "deep-" * 48  # 250 bytes: a file name may have 255
    for name in (ACME, long_name):
        write_jsonl(projects / name / "s.jsonl", [cc_user(LINT)])
    single = tmp_path / "one" / "-home-ana-solo"
    write_jsonl(single / "s.jsonl", [cc_user(LINT)])
    settings = parse_settings(
        {
            "read_state_dir": False,
            "sources": [
                {"kind": "claude-code", "path": str(projects), "agent": "claude"},
                {"kind": "claude-code", "path": str(single), "agent": "solo"},
                {
                    "kind": "claude-code",
                    "path": str(projects),
                    "agent": "pool",
                    "per_project": False,
                },
            ],
            "agents": {f"claude:{ZETA}": {"workspace": str(tmp_path / "moved")}},
        },
        "t",
    )
    paths = Paths(tmp_path / "state", settings)
    found = sources.discover(paths)
    hashed = project_agent_id("claude", long_name)
    assert "~" in hashed
    assert set(found) == {f"claude:{ACME}", hashed, "solo:-home-ana-solo", "pool"}
    assert paths.memory_file(f"claude:{ACME}") == projects / ACME / "memory" / "MEMORY.md"
    assert paths.memory_file(hashed) == projects / long_name / "memory" / "MEMORY.md"
    assert paths.memory_file("solo:-home-ana-solo") == single / "memory" / "MEMORY.md"
    dreams = projects / ACME / "memory" / ".dreams"
    assert paths.dreams_file(f"claude:{ACME}") == dreams / "DREAMS.md"
    assert paths.corpus_dir(f"claude:{ACME}") == dreams / "session-corpus"
    assert paths.memory_lines(f"claude:{ACME}") == 200
    # A project folder not made yet still has its place; dreaming.toml may move one.
    assert paths.memory_file(f"claude:{ZETA}") == tmp_path / "moved" / "MEMORY.md"
    assert paths.memory_file("claude:-gone") == projects / "-gone" / "memory" / "MEMORY.md"
    # The pooled agent and an unknown prefix keep OpenClaw's layout.
    assert paths.memory_file("pool") == tmp_path / "state" / "workspace-pool" / "MEMORY.md"
    assert paths.claude_project("other:x") is None and paths.memory_lines("pool") is None
    # One project's agent is asked for: only its files are listed.
    only = sources.discover(paths, [f"claude:{ACME}"])
    assert list(only) == [f"claude:{ACME}"]
    assert [f.session_id for f in only[f"claude:{ACME}"]] == ["s"]


def test_session_ids_of_a_project_do_not_depend_on_other_projects(tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    write_jsonl(projects / "-b" / "short.jsonl", [cc_user(LINT)])
    state = tmp_path / "state"
    configure(state, projects)
    from dreaming.app import App

    app = App.open(state, state / "dreaming.toml", env={})
    before = app.discover()
    write_jsonl(projects / "-a" / "short.jsonl", [cc_user(PR)])  # sorts first, same stem
    after = app.discover()
    assert [f.session_id for f in before["claude:-b"]] == ["short"]
    assert [f.session_id for f in after["claude:-b"]] == ["short"]
    assert [f.session_id for f in after["claude:-a"]] == ["short"]


# -- a night -----------------------------------------------------------------------------------


def test_each_project_gets_its_own_memory_and_nothing_crosses(tmp_path: Path) -> None:
    state, projects = two_projects(tmp_path)
    report = as_json(state, "run")
    assert set(report["agents"]) == {f"claude:{ACME}", f"claude:{ZETA}"}
    acme, zeta = memory_of(projects, ACME), memory_of(projects, ZETA)
    assert "make lint" in acme and "Porto" in acme
    assert "pull request" in zeta
    # Nothing said in one project reaches the other's memory, diary, corpus or state.
    for word in ("make lint", "Porto", "Rui"):
        assert word not in everything_under(projects / ZETA / "memory")
        assert word not in db_text(state, f"claude:{ZETA}")
    assert "pull request" not in everything_under(projects / ACME / "memory")
    assert "pull request" not in db_text(state, f"claude:{ACME}")
    # Where things land: MEMORY.md where Claude Code loads it, dreaming's own files hidden
    # in memory/.dreams/, nothing in a workspace no one reads.
    for project in (ACME, ZETA):
        memory = projects / project / "memory"
        assert sorted(p.name for p in memory.iterdir()) == [".dreams", "MEMORY.md"]
        assert (memory / ".dreams" / "DREAMS.md").is_file()
        assert list((memory / ".dreams" / "session-corpus").glob("*.txt"))
    assert not list(state.glob("workspace*"))
    # The same fact said in both projects is two entries with their own lineage: forgetting
    # it in one leaves the other.
    write_jsonl(projects / ZETA / "z2.jsonl", [cc_user(LINT, ts="2026-02-03T09:00:00Z")])
    cmd(state, "run")
    assert "make lint" in memory_of(projects, ZETA)
    cmd(state, "forget", "--agent", f"claude:{ACME}", "--session", "a1")
    assert "make lint" not in memory_of(projects, ACME)
    assert "make lint" in memory_of(projects, ZETA)
    assert as_json(state, "verify")["ok"]


def test_claudes_own_notes_are_kept_and_a_line_it_deletes_retires_the_entry(
    tmp_path: Path,
) -> None:
    state, projects = two_projects(tmp_path)
    memory = projects / ACME / "memory"
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_text(CLAUDE_NOTES)
    (memory / "debugging.md").write_text("# Flaky tests\n\nRetry the e2e suite once.\n")
    cmd(state, "run")
    content = (memory / "MEMORY.md").read_text()
    assert content.startswith(CLAUDE_NOTES) and "make lint" in content
    assert (memory / "debugging.md").read_text() == "# Flaky tests\n\nRetry the e2e suite once.\n"
    # Claude edits its memory: deletes our line about the linter, adds a note of its own.
    kept = [line for line in content.splitlines(keepends=True) if "make lint" not in line]
    edited = "".join(kept) + "- Use Node 22 (see .nvmrc).\n"
    (memory / "MEMORY.md").write_text(edited)
    report = as_json(state, "run", "--agent", f"claude:{ACME}")
    deep = report["agents"][f"claude:{ACME}"]["deep"]
    assert len(deep["memory"]["removed_by_person"]) == 1
    after = (memory / "MEMORY.md").read_text()
    assert "make lint" not in after
    assert after.startswith(CLAUDE_NOTES) and "- Use Node 22 (see .nvmrc).\n" in after
    cmd(state, "run")
    assert "make lint" not in (memory / "MEMORY.md").read_text()  # not promoted again


def test_status_report_forget_and_verify_name_the_project(tmp_path: Path) -> None:
    state, projects = two_projects(tmp_path)
    cmd(state, "run")
    status = as_json(state, "status")
    by_agent = {a["agent"]: a for a in status["agents"]}
    acme = by_agent[f"claude:{ACME}"]["memory"]
    assert acme["file"] == str(projects / ACME / "memory" / "MEMORY.md")
    assert acme["claude_code_project"] == str(projects / ACME)
    assert acme["max_lines"] == 200 and acme["bootstrap_max_chars"] is None
    out = cmd(state, "status").output
    assert f"agent claude:{ACME}  " in out and f"agent claude:{ZETA}  " in out
    lines = len(memory_of(projects, ACME).splitlines())
    assert acme["lines"] == lines
    assert f"MEMORY.md, {lines} lines (Claude Code loads its first 200 lines or 25 KB)" in out
    size = len(memory_of(projects, ACME).encode("utf-8"))
    assert f"  MEMORY.md {size:,} / 25,000 bytes, {lines} / 200 lines, 0 archived\n" in out
    assert f"agent claude:{ACME}: ok" in cmd(state, "verify").output
    dry = cmd(state, "forget", "--agent", f"claude:{ZETA}", "--session", "z1", "--dry-run")
    assert f"for agent claude:{ZETA}" in dry.output
    # (the page as `dreaming report` writes it; its command is not registered here, as
    # tests/test_cli_json.py counts the commands this module's imports register)
    from dreaming.app import App
    from dreaming.report import build_report, render

    app = App.open(state, state / "dreaming.toml", env={})
    try:
        page = render(build_report(app))
    finally:
        app.close()
    assert f"<h2>Agent claude:{ACME}</h2>" in page
    assert str(projects / ZETA / "memory" / "MEMORY.md") in page


def test_openclaws_bootstrap_budget_beside_the_state_does_not_bound_a_project(
    tmp_path: Path,
) -> None:
    """Claude Code never reads openclaw.json: a project's memory is held to what Claude
    Code loads (200 lines, 25 KB), not to the bootstrapMaxChars of OpenClaw's agents."""
    state, projects = two_projects(tmp_path)
    (state / "openclaw.json").write_text(
        json.dumps({"agents": {"defaults": {"bootstrapMaxChars": 100}}})
    )
    report = as_json(state, "run")
    memory = report["agents"][f"claude:{ACME}"]["deep"]["memory"]
    assert memory["max_chars"] == 25_000 and memory["unit"] == "bytes"
    assert memory["archived_now"] == []
    acme = memory_of(projects, ACME)
    assert "make lint" in acme and "Porto" in acme
    assert memory["chars"] == len(acme.encode("utf-8")) > 100
    assert "archive" not in " ".join(p.name for p in (projects / ACME / "memory").iterdir())


def test_a_pooled_claude_code_agent_is_held_and_shown_as_claude_code_loads(
    tmp_path: Path,
) -> None:
    state, _ = pooled_night(tmp_path)
    (memory,) = [a["memory"] for a in as_json(state, "status")["agents"]]
    assert memory["max_lines"] == 200 and memory["bootstrap_max_chars"] is None
    assert memory["fill"]["unit"] == "bytes" and memory["fill"]["max_chars"] == 25_000
    out = cmd(state, "status").output
    assert "(Claude Code loads its first 200 lines or 25 KB)" in out
    assert "bootstrapMaxChars" not in out and " / 25,000 bytes, " in out


# -- an older state with the pooled agent -------------------------------------------------------


def test_a_pooled_agent_of_an_older_state_is_kept_and_forgetting_reaches_it(
    tmp_path: Path,
) -> None:
    state, projects = pooled_night(tmp_path)
    pooled = state / "workspace-claude" / "MEMORY.md"
    assert "make lint" in pooled.read_text() and "pull request" in pooled.read_text()
    # Forgotten under the pooled agent: it stays forgotten for the project's agent.
    cmd(state, "forget", "--agent", "claude", "--session", "z1")
    pooled_db = database(state, "claude").read_bytes()
    configure(state, projects)  # upgrade: per_project is the default
    report = as_json(state, "run")
    assert set(report["agents"]) == {f"claude:{ACME}", f"claude:{ZETA}"}  # pooled not run
    assert database(state, "claude").read_bytes() == pooled_db
    zeta = report["agents"][f"claude:{ZETA}"]["light"]["sessions"]
    assert zeta["not_admitted"] == {"forgotten": 1}
    assert "pull request" not in everything_under(projects / ZETA / "memory")
    assert "pull request" not in db_text(state, f"claude:{ZETA}")
    # status shows the pooled agent and says what became of it.
    status = as_json(state, "status")
    by_agent = {a["agent"]: a for a in status["agents"]}
    assert set(by_agent) == {"claude", f"claude:{ACME}", f"claude:{ZETA}"}
    assert "one agent per project now" in by_agent["claude"]["memory"]["no_longer_read"]
    assert by_agent[f"claude:{ACME}"]["memory"]["no_longer_read"] is None
    assert "no transcript feeds this agent any more" in cmd(state, "status").output
    # Forgetting a session under its project's agent reaches the pooled agent's copy too.
    out = as_json(state, "forget", "--agent", f"claude:{ACME}", "--session", "a1")
    assert [r["agent"] for r in out["other_agents"]] == ["claude"]
    assert "Porto" not in pooled.read_text() and "Porto" not in memory_of(projects, ACME)
    assert "Porto" not in db_text(state, "claude")
    assert as_json(state, "verify")["ok"]


# -- the real Claude Code transcripts ----------------------------------------------------------


def test_real_claude_code_projects_get_one_memory_each(tmp_path: Path, shared_data: Path) -> None:
    real = shared_data / "transcripts" / "claude-code"
    projects = tmp_path / "projects"
    for folder in sorted(p for p in real.iterdir() if p.is_dir()):
        # A copy: a night writes each project's memory/ beside its transcripts.
        shutil.copytree(folder, projects / folder.name)
    said = {
        "spotter": "Always run mix format before committing the spotter code.",
        "claude-code-log": "Never regenerate the HTML fixtures without asking Daniel first.",
    }
    for name, instruction in said.items():
        # One session of the owner's own beside the real ones (whose coding talk holds no
        # lasting fact), so each project has something to remember.
        own = [cc_user(instruction, uuid="u-own", ts="2026-03-01T09:00:00Z")]
        write_jsonl(projects / name / "owner-session.jsonl", own)
    state = tmp_path / "state"
    configure(state, projects)
    report = as_json(state, "run")
    assert set(report["agents"]) == {f"claude:{name}" for name in said}
    for name, instruction in said.items():
        memory = projects / name / "memory" / "MEMORY.md"
        assert instruction in memory.read_text()
        for other, theirs in said.items():
            if other != name:
                assert theirs not in everything_under(projects / name / "memory")
        assert sorted(p.name for p in memory.parent.iterdir()) == [".dreams", "MEMORY.md"]
        light = report["agents"][f"claude:{name}"]["light"]
        assert light["corpus_lines"] > 0
    assert not list(state.glob("workspace*"))
    assert as_json(state, "verify")["ok"]
    # The real subagent and compaction files stay with their own project.
    spotter = report["agents"]["claude:spotter"]["light"]["sessions"]["not_admitted"]
    assert spotter == {"internal:compaction": 1}


def test_an_openclaw_agent_sharing_the_sources_name_is_not_taken_for_a_pooled_one(
    tmp_path: Path,
) -> None:
    projects = tmp_path / "projects"
    write_jsonl(projects / ACME / "s.jsonl", [cc_user(LINT)])
    state = tmp_path / "state"
    (state / "agents" / "main" / "sessions").mkdir(parents=True)
    settings = parse_settings(
        {"sources": [{"kind": "claude-code", "path": str(projects), "agent": "main"}]}, "t"
    )
    paths = Paths(state, settings)
    assert paths.pooled_projects("main") == []
    bare = Paths(state, settings.model_copy(update={"read_state_dir": False}))
    assert [s.path for s in bare.pooled_projects("main")] == [projects]
    assert paths.kin(f"main:{ACME}") == ["main"] and paths.kin("main") == [f"main:{ACME}"]


def test_a_source_whose_agent_name_extends_another_finds_its_own_folders(tmp_path: Path) -> None:
    home, work = tmp_path / "home-projects", tmp_path / "work-projects"
    write_jsonl(work / ACME / "s.jsonl", [cc_user(LINT)])
    settings = parse_settings(
        {
            "read_state_dir": False,
            "sources": [
                {"kind": "claude-code", "path": str(home), "agent": "claude"},
                {"kind": "claude-code", "path": str(work), "agent": "claude:work"},
            ],
        },
        "t",
    )
    paths = Paths(tmp_path / "state", settings)
    assert set(sources.discover(paths)) == {f"claude:work:{ACME}"}
    assert paths.memory_file(f"claude:work:{ACME}") == work / ACME / "memory" / "MEMORY.md"
