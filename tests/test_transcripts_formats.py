"""Per-format rules: OpenClaw/pi, Claude Code and the durable event log."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dreaming.messages import Format, Kind, Role, SkipReason

from .transcript_builders import (
    cc_assistant,
    cc_tool_result,
    cc_tool_use,
    cc_user,
    ev,
    oc_header,
    oc_message,
    oc_tool_call,
    read,
    text,
    write_jsonl,
)

# ---------------------------------------------------------------- OpenClaw / pi


def test_openclaw_v3_user_and_assistant_text_only(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            oc_header(version=3),
            oc_message("user", [text("hello"), {"type": "image", "data": "AAA"}], id="a1"),
            oc_message(
                "assistant",
                [
                    {"type": "thinking", "thinking": "secret musing"},
                    text("hi there"),
                    oc_tool_call("read", path="/x"),
                    text("second block"),
                ],
                id="a2",
            ),
            oc_message("toolResult", [text("file contents")], toolCallId="call-1"),
            oc_message("bashExecution", "ls output"),
            oc_message("custom", [text("extension message")]),
        ],
    )
    messages, reader = read(path)
    assert reader.format is Format.OPENCLAW
    assert [(m.line, m.role, m.kind, m.blocks, m.message_id) for m in messages] == [
        (2, Role.USER, Kind.SPEECH, ("hello",), "a1"),
        (3, Role.ASSISTANT, Kind.SPEECH, ("hi there", "second block"), "a2"),
    ]
    assert messages[1].text == "hi there\n\nsecond block"
    assert not reader.skips


def test_openclaw_v1_without_ids_and_string_content(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [oc_header(version=None), oc_message("user", "plain string content")],
    )
    messages, _ = read(path)
    assert [(m.text, m.message_id, m.session_id, m.agent) for m in messages] == [
        ("plain string content", None, "s", "main")
    ]


def test_openclaw_known_line_types_are_silent_unknown_are_counted(tmp_path: Path) -> None:
    quiet: list[dict[str, Any]] = [
        {"type": "model_change", "provider": "p", "modelId": "m"},
        {"type": "thinking_level_change", "thinkingLevel": "off"},
        {"type": "compaction", "summary": "earlier we talked about X", "firstKeptEntryId": "a"},
        {"type": "custom", "customType": "model-snapshot", "data": {}},
        {"type": "custom_message", "customType": "x", "content": "injected", "display": True},
        {"type": "branch_summary", "summary": "other branch"},
        {"type": "label", "targetId": "a", "label": "bookmark"},
        {"type": "session_info", "name": "title"},
    ]
    path = write_jsonl(
        tmp_path / "s.jsonl", [oc_header(), *quiet, {"type": "mystery"}, {"type": "mystery2"}]
    )
    messages, reader = read(path)
    assert messages == []
    assert reader.skips == {SkipReason.UNKNOWN_LINE_TYPE.value: 2}


def test_openclaw_message_line_without_message_object_is_counted(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [oc_header(), {"type": "message", "message": "x"}])
    messages, reader = read(path)
    assert messages == []
    assert reader.skips == {SkipReason.UNKNOWN_LINE_TYPE.value: 1}


def test_openclaw_empty_assistant_reply_yields_nothing(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            oc_header(),
            oc_message("assistant", [], stopReason="error", errorMessage="fetch failed"),
            oc_message("assistant", [text("   \n")]),
            oc_message("assistant", [{"type": "thinking", "thinking": "hm"}]),
        ],
    )
    messages, reader = read(path)
    assert messages == []
    assert not reader.skips


def test_openclaw_timestamps_iso_then_epoch_ms_then_none(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            oc_header(),
            oc_message("user", "iso", ts="2026-03-08T13:03:27.042Z"),
            oc_message("user", "epoch", ts=None, timestamp=1772975007032),
            oc_message("user", "offset", ts="2026-03-08T22:03:27+09:00"),
            oc_message("user", "naive", ts="2026-03-08T13:03:27"),
            oc_message("user", "none", ts=None),
            oc_message("user", "garbage", ts="yesterday-ish"),
        ],
    )
    stamps = {m.text: m.timestamp for m in read(path)[0]}
    assert stamps["iso"] == datetime(2026, 3, 8, 13, 3, 27, 42000, tzinfo=UTC)
    assert stamps["epoch"] == datetime(2026, 3, 8, 13, 3, 27, 32000, tzinfo=UTC)
    assert stamps["offset"] == datetime(2026, 3, 8, 13, 3, 27, tzinfo=UTC)
    assert stamps["naive"] == datetime(2026, 3, 8, 13, 3, 27, tzinfo=UTC)
    assert stamps["none"] is None
    assert stamps["garbage"] is None
    for stamp in stamps.values():
        assert stamp is None or stamp.tzinfo is UTC


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (oc_tool_call("write", path="/w/notes.md", content="x"), ("/w/notes.md",)),
        (oc_tool_call("edit", path="/w/a.py", oldText="a", newText="b"), ("/w/a.py",)),
        (oc_tool_call("Edit", file_path="/w/b.py"), ("/w/b.py",)),
        (oc_tool_call("multiedit", file_path="/w/c.py", edits=[]), ("/w/c.py",)),
        (
            oc_tool_call(
                "apply_patch",
                input="*** Begin Patch\n*** Update File: src/x.py\n@@\n-a\n+b\n"
                "*** Add File: src/y.py\n+new\n*** End Patch",
            ),
            ("src/x.py", "src/y.py"),
        ),
        (oc_tool_call("read", path="/w/notes.md"), ()),
        (oc_tool_call("bash", command="echo > f"), ()),
        (oc_tool_call("str_replace_based_edit_tool", command="view", path="/w/v"), ()),
    ],
)
def test_openclaw_writes_from_write_like_tool_calls(
    tmp_path: Path, call: dict[str, object], expected: tuple[str, ...]
) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl", [oc_header(), oc_message("assistant", [text("doing it"), call])]
    )
    (message,) = read(path)[0]
    assert message.writes == expected


def test_openclaw_tool_only_reply_with_a_write_is_kept_for_its_writes(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [oc_header(), oc_message("assistant", [oc_tool_call("write", path="/w/MEMORY.md")])],
    )
    (message,) = read(path)[0]
    assert message.blocks == ()
    assert message.text == ""
    assert message.writes == ("/w/MEMORY.md",)


def test_openclaw_tool_arguments_as_json_string(tmp_path: Path) -> None:
    call = {"type": "toolCall", "id": "c", "name": "write", "arguments": '{"path": "/w/s.md"}'}
    path = write_jsonl(tmp_path / "s.jsonl", [oc_header(), oc_message("assistant", [call])])
    assert read(path)[0][0].writes == ("/w/s.md",)


# ---------------------------------------------------------------- Claude Code


def test_claude_code_string_and_text_block_content(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            cc_user("a plain prompt"),
            cc_user([text("a block prompt"), {"type": "image", "source": {}}]),
            cc_assistant(
                "m1",
                [
                    {"type": "thinking", "thinking": "hidden"},
                    text("answer"),
                    cc_tool_use("Bash", command="ls"),
                ],
            ),
            cc_tool_result("tool output"),
        ],
    )
    messages, reader = read(path)
    assert reader.format is Format.CLAUDE_CODE
    assert [(m.line, m.role, m.kind, m.text) for m in messages] == [
        (1, Role.USER, Kind.SPEECH, "a plain prompt"),
        (2, Role.USER, Kind.SPEECH, "a block prompt"),
        (3, Role.ASSISTANT, Kind.SPEECH, "answer"),
    ]
    assert messages[2].message_id == "m1"
    assert messages[0].timestamp == datetime(2025, 6, 14, 11, 0, tzinfo=UTC)


def test_claude_code_lines_sharing_message_id_are_joined(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            cc_user("do it"),
            cc_assistant("m1", [text("first part")], ts="2025-06-14T11:00:01Z"),
            cc_assistant("m1", [cc_tool_use("Write", file_path="/p/a.ex", content="x")]),
            cc_tool_result(),
            {"type": "progress", "data": {}},
            cc_assistant("m1", [text("second part")]),
            cc_assistant("m1", [cc_tool_use("Edit", file_path="/p/b.ex")]),
            cc_tool_result(),
            cc_assistant("m2", [text("next message")]),
            cc_user("thanks"),
        ],
    )
    messages, reader = read(path)
    assert [(m.line, m.role, m.blocks, m.writes) for m in messages] == [
        (1, Role.USER, ("do it",), ()),
        (2, Role.ASSISTANT, ("first part", "second part"), ("/p/a.ex", "/p/b.ex")),
        (9, Role.ASSISTANT, ("next message",), ()),
        (10, Role.USER, ("thanks",), ()),
    ]
    assert messages[1].timestamp == datetime(2025, 6, 14, 11, 0, 1, tzinfo=UTC)
    assert not reader.skips


def test_claude_code_group_is_flushed_at_end_of_file(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [cc_user("go"), cc_assistant("m1", [text("a")]), cc_assistant("m1", [text("b")])],
    )
    messages, _ = read(path)
    assert [(m.line, m.blocks) for m in messages] == [(1, ("go",)), (2, ("a", "b"))]


def test_claude_code_assistant_lines_without_id_are_not_joined(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [cc_assistant(None, [text("a")]), cc_assistant(None, [text("b")])],
    )
    assert [(m.line, m.text) for m in read(path, Format.CLAUDE_CODE)[0]] == [(1, "a"), (2, "b")]


HARNESS_TEXTS = [
    "<local-command-caveat>Caveat: The messages below were generated by the user while "
    "running local commands. DO NOT respond to these messages</local-command-caveat>",
    "Caveat: The messages below were generated by the user while running local commands. "
    "DO NOT respond to these messages or otherwise consider them in your response.",
    "<command-name>/mcp</command-name>\n<command-message>mcp</command-message>\n"
    "<command-args></command-args>",
    "<command-message>handgemacht:create-beads</command-message>\n<command-name>/x</command-name>",
    "<command-args>--verbose</command-args>",
    "<local-command-stdout>Reconnected to tidewave.</local-command-stdout>",
    "<local-command-stderr>boom</local-command-stderr>",
    "[Request interrupted by user]",
    "[Request interrupted by user for tool use]",
    "<task-notification>\n<task-id>b7636e2</task-id>\n<status>completed</status>",
    "This session is being continued from a previous conversation that ran out of context.",
    "   \n<command-name>/clear</command-name>",
]


@pytest.mark.parametrize("harness_text", HARNESS_TEXTS)
def test_claude_code_harness_user_text_is_marked_harness(tmp_path: Path, harness_text: str) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [cc_user(harness_text), cc_user([text(harness_text)])])
    messages, _ = read(path)
    assert [(m.role, m.kind, m.text) for m in messages] == [
        (Role.USER, Kind.HARNESS, harness_text),
        (Role.USER, Kind.HARNESS, harness_text),
    ]


@pytest.mark.parametrize(
    "flags", [{"isMeta": True}, {"isCompactSummary": True, "isVisibleInTranscriptOnly": True}]
)
def test_claude_code_meta_and_compact_summary_lines_are_harness(
    tmp_path: Path, flags: dict[str, Any]
) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [cc_user("looks like a real prompt", **flags)])
    (message,) = read(path)[0]
    assert message.kind is Kind.HARNESS


def test_claude_code_harness_markers_only_count_at_the_start(tmp_path: Path) -> None:
    said = "what does <command-name> mean in a transcript? [Request interrupted by user]"
    path = write_jsonl(tmp_path / "s.jsonl", [cc_user(said)])
    assert read(path)[0][0].kind is Kind.SPEECH


def test_claude_code_system_reminder_is_kept_as_text(tmp_path: Path) -> None:
    said = "fix the bug\n<system-reminder>the file changed</system-reminder>"
    path = write_jsonl(tmp_path / "s.jsonl", [cc_user([text(said)])])
    (message,) = read(path)[0]
    assert (message.kind, message.text) == (Kind.SPEECH, said)


def test_claude_code_synthetic_assistant_reply_is_harness(tmp_path: Path) -> None:
    line = cc_assistant("m9", [text("No response requested.")])
    line["message"]["model"] = "<synthetic>"
    path = write_jsonl(tmp_path / "s.jsonl", [line])
    assert read(path, Format.CLAUDE_CODE)[0][0].kind is Kind.HARNESS


def test_claude_code_quiet_and_unknown_types(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"type": "summary", "summary": "Tested things", "leafUuid": "x"},
            {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted"},
            {"type": "progress", "data": {"type": "hook_progress"}},
            {"type": "file-history-snapshot", "snapshot": {}},
            {"type": "queue-operation", "operation": "enqueue", "content": "queued text"},
            {"type": "brand-new"},
            {"silly": "this"},
            {"type": "user", "message": "error"},
        ],
    )
    messages, reader = read(path, Format.CLAUDE_CODE)
    assert messages == []
    assert reader.skips == {SkipReason.UNKNOWN_LINE_TYPE.value: 3}


def test_claude_code_tool_results_are_not_user_speech(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [cc_tool_result("<system-reminder>x</system-reminder> output"), cc_user(["bare string"])],
    )
    messages, reader = read(path, Format.CLAUDE_CODE)
    assert messages == []
    assert not reader.skips


# ---------------------------------------------------------------- event log


def test_event_log_speech_and_injected(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            ev("turn/start", ts="2026-01-01T00:00:00Z"),
            ev("user/message", "remember I like tea", source="user", ts="2026-01-01T00:00:01Z"),
            ev("assistant/chunk", "rem"),
            ev("assistant/message", [text("noted")], timestamp=1767225602000),
            ev("context/message", "<memories>likes tea</memories>", source="hindsight"),
            ev(
                "steering/message",
                [text("keep going")],
                source={"kind": "plugin", "plugin": "loop"},
            ),
            ev("tool/call", {"name": "x"}),
        ],
    )
    messages, reader = read(path)
    assert reader.format is Format.EVENT_LOG
    assert [(m.line, m.role, m.kind, m.text, m.source) for m in messages] == [
        (2, Role.USER, Kind.SPEECH, "remember I like tea", "user"),
        (4, Role.ASSISTANT, Kind.SPEECH, "noted", None),
        (5, Role.SYSTEM, Kind.INJECTED, "<memories>likes tea</memories>", "hindsight"),
        (6, Role.SYSTEM, Kind.INJECTED, "keep going", '{"kind":"plugin","plugin":"loop"}'),
    ]
    assert messages[0].timestamp == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert messages[1].timestamp == datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC)
    assert not reader.skips


@pytest.mark.parametrize("event_type", ["context/message", "steering/message"])
def test_event_log_injection_wins_over_text_that_looks_like_speech(
    tmp_path: Path, event_type: str
) -> None:
    # Text that a person would plausibly say, with a source claiming to be the user.
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [ev(event_type, "User: I am allergic to peanuts.", source="user", ts=5)],
    )
    (message,) = read(path, Format.EVENT_LOG)[0]
    assert (message.kind, message.role) == (Kind.INJECTED, Role.SYSTEM)
    assert message.timestamp == datetime(1970, 1, 1, 0, 0, 5, tzinfo=UTC)


def test_event_log_unknown_and_malformed_events_are_counted(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            ev("user/message", "hi"),
            {"type": "user/message", "data": "not an object"},
            ev("weird/thing"),
            ev("nonamespace"),
            ev("step/end"),
            ev("compaction/start"),
        ],
    )
    messages, reader = read(path, Format.EVENT_LOG)
    assert [m.text for m in messages] == ["hi"]
    assert reader.skips == {SkipReason.UNKNOWN_LINE_TYPE.value: 3}
