"""Session discovery: OpenClaw state folders, Claude Code projects, event logs; session keys."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dreaming.ingest.transcripts import (
    discover_claude_code,
    discover_event_log,
    discover_openclaw,
    session_kind_from_key,
    with_start,
)
from dreaming.messages import Format, SessionKind

from .transcript_builders import cc_user, ev, oc_header, oc_message, openclaw_root, write_jsonl

HELLO = [oc_header(ts="2026-03-01T10:00:00Z"), oc_message("user", "hello")]


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("agent:main:main", SessionKind.INTERACTIVE),
        ("agent:main:telegram:default:dm:user123", SessionKind.INTERACTIVE),
        ("agent:main:discord:group:42:thread:7", SessionKind.INTERACTIVE),
        ("agent:main:cron:nightly", SessionKind.CRON),
        ("agent:main:cron:nightly:run:abc", SessionKind.CRON),
        ("AGENT:Main:CRON:job", SessionKind.CRON),
        ("agent:main:subagent:0f7c2c7e-5b7e", SessionKind.SUBAGENT),
        ("agent:main:heartbeat", SessionKind.HEARTBEAT),
        ("agent:main:main:heartbeat", SessionKind.HEARTBEAT),
        ("agent:main:heartbeat:run-1", SessionKind.HEARTBEAT),
        ("agent:main:dreaming", SessionKind.DREAMING),
        ("agent:main:dreaming-light", SessionKind.DREAMING),
        ("agent:main:hook:gmail:msg-1", SessionKind.INTERACTIVE),
        # A peer or job *named* like a lane is an id, not a lane.
        ("agent:main:telegram:dm:cron", SessionKind.INTERACTIVE),
        ("agent:main:telegram:dm:heartbeat", SessionKind.INTERACTIVE),
        # Internal lanes win over subagent: a cron run's subagent is still machinery.
        ("agent:main:cron:job:subagent:x", SessionKind.CRON),
        ("", SessionKind.INTERACTIVE),
        ("not-a-key", SessionKind.INTERACTIVE),
    ],
)
def test_session_kind_from_key(key: str, kind: SessionKind) -> None:
    assert session_kind_from_key(key) is kind


def test_openclaw_discovery_with_a_full_index(tmp_path: Path) -> None:
    index = {
        "agent:main:telegram:default:dm:user123": {
            "sessionId": "s-dm",
            "updatedAt": 1772975007032,
            "chatType": "direct",
            "displayName": "Alice",
            "sessionStartedAt": 1772970000000,
            "origin": {
                "provider": "telegram",
                "surface": "telegram",
                "chatType": "direct",
                "from": "telegram:user123",
                "to": "telegram:bot",
                "accountId": "default",
            },
            "lastChannel": "telegram",
            "lastTo": "user123",
            "inputTokens": 10,
        },
        "agent:main:hook:gmail:msg-1": {
            "sessionId": "s-gmail",
            "updatedAt": 1,
            "hookExternalContentSource": "gmail",
        },
        "agent:main:hook:webhook:42": {"sessionId": "s-hook", "updatedAt": 1},
        "agent:main:cron:nightly": {"sessionId": "s-cron", "updatedAt": 1},
        "agent:main:subagent:abc": {"sessionId": "s-sub", "updatedAt": 1},
        "agent:main:main:heartbeat": {"sessionId": "s-hb", "updatedAt": 1},
        "agent:main:dreaming-deep": {"sessionId": "s-dream", "updatedAt": 1},
        "agent:main:whatsapp:group:120363@g.us": {
            "sessionId": "s-group",
            "updatedAt": 1,
            "channel": "whatsapp",
        },
        "agent:main:missing-file": {"sessionId": "s-nowhere"},
    }
    ids = ["s-dm", "s-gmail", "s-hook", "s-cron", "s-sub", "s-hb", "s-dream", "s-group", "orphan"]
    sessions_dir = openclaw_root(tmp_path, index=index, files={f"{i}.jsonl": HELLO for i in ids})
    found = {s.session_id: s for s in discover_openclaw(tmp_path)}
    assert sorted(found) == sorted(ids)
    dm = found["s-dm"]
    assert dm.agent == "main"
    assert dm.path == sessions_dir / "s-dm.jsonl"
    assert dm.format is Format.OPENCLAW
    assert dm.session_key == "agent:main:telegram:default:dm:user123"
    assert (dm.channel, dm.chat_type, dm.kind) == ("telegram", "direct", SessionKind.INTERACTIVE)
    assert dm.participants == ("telegram:user123", "telegram:bot", "Alice")
    assert dm.created_at == datetime(2026, 3, 8, 11, 40, tzinfo=UTC)
    assert not dm.start_unread  # sessionStartedAt says it: the header is never needed
    assert dm.extra["updated_at"].startswith("2026-03-08T13:03:27")
    assert found["s-gmail"].external_source == "gmail"
    assert found["s-hook"].external_source == "webhook"
    assert found["s-dm"].external_source is None
    assert found["s-cron"].kind is SessionKind.CRON
    assert found["s-sub"].kind is SessionKind.SUBAGENT
    assert found["s-hb"].kind is SessionKind.HEARTBEAT
    assert found["s-dream"].kind is SessionKind.DREAMING
    group = found["s-group"]
    assert (group.channel, group.chat_type, group.participants) == ("whatsapp", "group", ())
    orphan = found["orphan"]
    assert (orphan.session_key, orphan.kind) == (None, SessionKind.INTERACTIVE)
    # No sessionStartedAt: the header's timestamp, which discovery does not open the file
    # for (the read that opens it anyway takes it); `with_start` reads it for whoever asks.
    assert (orphan.created_at, orphan.start_unread) == (None, True)
    assert with_start(orphan).created_at == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert with_start(found["s-cron"]).created_at == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert with_start(dm) is dm


def test_openclaw_facts_derived_from_the_key_alone(tmp_path: Path) -> None:
    index = {"agent:main:signal:work:dm:+15550001": {"sessionId": "s1", "updatedAt": 5}}
    openclaw_root(tmp_path, index=index, files={"s1.jsonl": [oc_message("user", "x")]})
    (found,) = discover_openclaw(tmp_path)
    assert (found.channel, found.chat_type) == ("signal", "direct")
    assert found.participants == ("signal:+15550001",)
    assert with_start(found).created_at is None  # no sessionStartedAt, no header


def test_openclaw_lasto_is_prefixed_with_the_channel(tmp_path: Path) -> None:
    index = {"agent:main:main": {"sessionId": "s1", "lastChannel": "webchat", "lastTo": "u@x.org"}}
    openclaw_root(tmp_path, index=index, files={"s1.jsonl": HELLO})
    (found,) = discover_openclaw(tmp_path)
    assert (found.channel, found.chat_type, found.participants) == (
        "webchat",
        None,
        ("webchat:u@x.org",),
    )


def test_openclaw_skips_archives_checkpoints_sidecars_and_non_jsonl(tmp_path: Path) -> None:
    names = [
        "live.jsonl",
        "live.checkpoint.3.jsonl",
        "live.trajectory.jsonl",
        "old.jsonl.reset.2026-01-01",
        "gone.jsonl.deleted.2026-01-01",
        "gone.deleted.2026.jsonl",
        "live.jsonl.lock",
        "notes.txt",
    ]
    openclaw_root(tmp_path, files={n: HELLO for n in names})
    assert [s.path.name for s in discover_openclaw(tmp_path)] == ["live.jsonl"]


@pytest.mark.parametrize(
    "raw_index", ["{not json", "[1, 2, 3]", '"a string"', '{"agent:main:main": 7}']
)
def test_openclaw_broken_index_is_a_warning_not_an_error(
    tmp_path: Path, raw_index: str, caplog: pytest.LogCaptureFixture
) -> None:
    openclaw_root(tmp_path, raw_index=raw_index, files={"s1.jsonl": HELLO})
    with caplog.at_level(logging.WARNING, logger="dreaming.ingest.transcripts"):
        (found,) = discover_openclaw(tmp_path)
    assert (found.session_id, found.session_key) == ("s1", None)
    assert any("sessions.json" in r.getMessage() for r in caplog.records)


def test_openclaw_tolerates_odd_field_types(tmp_path: Path) -> None:
    index = {
        "agent:main:main": {
            "sessionId": "s1",
            "updatedAt": "yesterday",
            "channel": 5,
            "origin": "nope",
            "displayName": ["x"],
            "sessionStartedAt": {"x": 1},
        },
        "agent:main:other": {"sessionId": None},
    }
    openclaw_root(tmp_path, index=index, files={"s1.jsonl": HELLO})
    (found,) = discover_openclaw(tmp_path)
    assert found.session_key == "agent:main:main"
    assert (found.channel, found.participants) == (None, ())
    assert with_start(found).created_at == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def test_openclaw_session_file_field_and_topic_files_are_matched(tmp_path: Path) -> None:
    index = {
        "agent:main:telegram:group:-100:topic:7": {
            "sessionId": "s1",
            "sessionFile": "C:\\state\\agents\\main\\sessions\\s1-topic-7.jsonl",
            "updatedAt": 2,
        },
        "agent:main:telegram:group:-200:topic:9": {"sessionId": "s2", "updatedAt": 2},
    }
    openclaw_root(
        tmp_path, index=index, files={"s1-topic-7.jsonl": HELLO, "s2-topic-9.jsonl": HELLO}
    )
    found = {s.session_id: s for s in discover_openclaw(tmp_path)}
    assert found["s1-topic-7"].session_key == "agent:main:telegram:group:-100:topic:7"
    assert found["s2-topic-9"].session_key == "agent:main:telegram:group:-200:topic:9"


def test_openclaw_latest_key_wins_for_a_shared_session_id(tmp_path: Path) -> None:
    index = {
        "agent:main:old": {"sessionId": "s1", "updatedAt": 1},
        "agent:main:new": {"sessionId": "s1", "updatedAt": 9},
    }
    openclaw_root(tmp_path, index=index, files={"s1.jsonl": HELLO})
    assert discover_openclaw(tmp_path)[0].session_key == "agent:main:new"


def test_openclaw_several_agents_sorted_by_path(tmp_path: Path) -> None:
    openclaw_root(tmp_path, "bob", files={"b2.jsonl": HELLO, "b1.jsonl": HELLO})
    openclaw_root(tmp_path, "alice", files={"a1.jsonl": HELLO})
    (tmp_path / "agents" / "no-sessions").mkdir()
    found = discover_openclaw(tmp_path)
    assert [(s.agent, s.session_id) for s in found] == [
        ("alice", "a1"),
        ("bob", "b1"),
        ("bob", "b2"),
    ]
    assert discover_openclaw(tmp_path / "nowhere") == []


def test_claude_code_discovery(tmp_path: Path) -> None:
    project = tmp_path / "-home-me-proj"
    write_jsonl(project / "sess-1.jsonl", [cc_user("hi")])
    write_jsonl(project / "agent-old.jsonl", [cc_user("sidechain")])
    write_jsonl(project / "sess-1" / "subagents" / "agent-a289.jsonl", [cc_user("task")])
    write_jsonl(project / "sess-1" / "subagents" / "agent-acompact-e1f.jsonl", [cc_user("sum")])
    (project / "sess-1" / "tool-results").mkdir()
    write_jsonl(tmp_path / "-other" / "sess-2.jsonl", [cc_user("hi")])
    (tmp_path / "-other" / "notes.txt").write_text("x")
    found = discover_claude_code(tmp_path, "claude")
    assert [s.path for s in found] == sorted(s.path for s in found)
    by_id = {s.session_id: s for s in found}
    assert by_id["agent-a289"].extra["parent_session"] == "sess-1"
    assert all(s.agent == "claude" and s.format is Format.CLAUDE_CODE for s in found)
    assert {(s.session_id, s.kind, s.extra["project"]) for s in found} == {
        ("sess-1", SessionKind.INTERACTIVE, "-home-me-proj"),
        ("agent-old", SessionKind.SUBAGENT, "-home-me-proj"),
        ("agent-a289", SessionKind.SUBAGENT, "-home-me-proj"),
        ("agent-acompact-e1f", SessionKind.COMPACTION, "-home-me-proj"),
        ("sess-2", SessionKind.INTERACTIVE, "-other"),
    }


def test_claude_code_discovery_of_one_project_folder(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "proj" / "s.jsonl", [cc_user("hi")])
    (found,) = discover_claude_code(tmp_path / "proj", "claude")
    assert (found.session_id, found.extra["project"]) == ("s", "proj")


def test_event_log_discovery(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "logs" / "a.jsonl", [ev("user/message", "hi")])
    write_jsonl(tmp_path / "logs" / "run-7" / "session.jsonl", [ev("user/message", "hi")])
    (tmp_path / "logs" / "b.txt").write_text("x")
    found = discover_event_log(tmp_path / "logs", "bot")
    assert [(s.session_id, s.agent, s.format) for s in found] == [
        ("a", "bot", Format.EVENT_LOG),
        ("run-7-session", "bot", Format.EVENT_LOG),
    ]
    (single,) = discover_event_log(tmp_path / "logs" / "a.jsonl", "bot")
    assert (single.session_id, single.path) == ("a", tmp_path / "logs" / "a.jsonl")
    assert discover_event_log(tmp_path / "nothing", "bot") == []


def test_the_agents_named_without_opening_a_file_are_those_discovery_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet's parent names its agents by `agents_with_transcripts`: the same agents as a
    full discovery, looked at by file names alone (no transcript or index is opened)."""
    from dreaming.config import Settings, Source
    from dreaming.ingest import sources
    from dreaming.paths import Paths

    state = tmp_path / "state"
    openclaw_root(state, "alice", files={"a1.jsonl": HELLO})
    openclaw_root(state, "bob", files={"b.checkpoint.1.jsonl": HELLO, "notes.txt": HELLO})
    openclaw_root(state, "carol", files={"c1.jsonl": HELLO})
    (state / "agents" / "carol" / "sessions" / "odd.jsonl").mkdir()  # skipped, still hers
    (state / "agents" / "dave").mkdir()  # no sessions folder
    openclaw_root(state, "erin", raw_index="{broken", files={"e.jsonl": HELLO})
    write_jsonl(tmp_path / "claude" / "-home-me-proj" / "s.jsonl", [cc_user("hi")])
    write_jsonl(tmp_path / "logs" / "a.jsonl", [ev("user/message", "hi")])
    settings = Settings(
        sources=[
            Source(kind="claude-code", path=tmp_path / "claude", agent="cc"),
            Source(kind="event-log", path=tmp_path / "logs", agent="bot"),
        ]
    )
    paths = Paths(state, settings)
    expected = set(sources.discover(paths))
    assert expected == {"alice", "carol", "erin", "cc:-home-me-proj", "bot"}
    opened: list[str] = []
    real_open = Path.open
    monkeypatch.setattr(
        Path, "open", lambda self, *a, **k: opened.append(str(self)) or real_open(self, *a, **k)
    )
    assert sources.agents_with_transcripts(paths) == expected
    assert sources.agents_with_transcripts(paths, ["carol", "dave", "nobody"]) == {"carol"}
    assert opened == []
    # Named agents are looked up, never walked to outside the agents folder.
    openclaw_root(tmp_path, "outside", files={"x.jsonl": HELLO})
    assert sources.agents_with_transcripts(paths, ["../agents/outside", "..", ""]) == set()
    assert discover_openclaw(state, ["../../agents/outside", "alice"])[0].agent == "alice"


def test_one_agent_is_found_without_listing_the_fleet_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet worker asks for one agent's transcripts per run: the agents folder is listed
    again only when it changed, and an agent added, removed or renamed meanwhile is seen."""
    agents = tmp_path / "agents"
    for name in ("alice", "bob", "carol"):
        openclaw_root(tmp_path, name, files={f"{name[0]}1.jsonl": HELLO})
    listed: list[Path] = []
    real_iterdir = Path.iterdir

    def iterdir(self: Path):  # type: ignore[no-untyped-def]
        if self == agents:
            listed.append(self)
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    assert [s.agent for s in discover_openclaw(tmp_path, ["alice"])] == ["alice"]
    assert [s.agent for s in discover_openclaw(tmp_path, ["bob"])] == ["bob"]
    assert [s.agent for s in discover_openclaw(tmp_path, ["carol", "bob"])] == ["bob", "carol"]
    assert len(listed) == 1  # listed for alice, then confirmed by its unchanged mtime

    openclaw_root(tmp_path, "dave", files={"d1.jsonl": HELLO})  # added since
    assert [s.agent for s in discover_openclaw(tmp_path, ["dave"])] == ["dave"]
    import shutil

    shutil.rmtree(agents / "bob")  # removed since
    assert discover_openclaw(tmp_path, ["bob"]) == []
    (agents / "carol").rename(agents / "Carol")  # renamed: the folder's spelling counts
    assert discover_openclaw(tmp_path, ["carol"]) == []
    assert [s.agent for s in discover_openclaw(tmp_path, ["Carol"])] == ["Carol"]
    assert discover_openclaw(tmp_path, ["..", "nobody"]) == []
