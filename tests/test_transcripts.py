"""Transcript reading core: line handling, skip counting, cursors, format detection."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dreaming.ingest.transcripts as transcripts
from dreaming.ingest.transcripts import Cursor, cursor_is_valid, detect_format
from dreaming.messages import Format, Kind, Role, SkipReason

from .transcript_builders import (
    append_jsonl,
    cc_assistant,
    cc_user,
    ev,
    oc_header,
    oc_message,
    read,
    text,
    write_jsonl,
)


def test_public_api_is_exactly_the_intended_names() -> None:
    assert sorted(transcripts.__all__) == sorted(
        [
            "ChatFacts",
            "DEFAULT_MAX_LINE_BYTES",
            "Cursor",
            "FORMATS",
            "SourceRoot",
            "TranscriptFormat",
            "TranscriptReader",
            "format_named",
            "openclaw_agents",
            "chat_facts",
            "cursor_is_valid",
            "detect_format",
            "claude_projects",
            "discover_claude_code",
            "discover_claude_project",
            "discover_event_log",
            "discover_openclaw",
            "head_senders",
            "session_kind_from_key",
            "with_start",
        ]
    )
    for name in transcripts.__all__:
        assert getattr(transcripts, name) is not None


def _hello(path: Path, *extra: object) -> Path:
    return write_jsonl(path, [oc_header(), oc_message("user", [text("hello")]), *extra])  # type: ignore[list-item]


# ---------------------------------------------------------------- per-line skips


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        (b'{"type": "message", "message": ', SkipReason.MALFORMED_JSON),
        (b"not json at all", SkipReason.MALFORMED_JSON),
        (b'{"a": 1} trailing', SkipReason.MALFORMED_JSON),
        (b"[1, 2, 3]", SkipReason.NOT_AN_OBJECT),
        (b'"a string"', SkipReason.NOT_AN_OBJECT),
        (b"42", SkipReason.NOT_AN_OBJECT),
        (b"null", SkipReason.NOT_AN_OBJECT),
        (b"null\r", SkipReason.NOT_AN_OBJECT),
        (b"  [] ", SkipReason.NOT_AN_OBJECT),
        (b'{"type": "message", "x": "\xff\xfe"}', SkipReason.INVALID_UTF8),
        (b'{"type": "brand_new_thing"}', SkipReason.UNKNOWN_LINE_TYPE),
        (b'{"no_type": true}', SkipReason.UNKNOWN_LINE_TYPE),
        (b'{"type": ["not", "a", "string"]}', SkipReason.UNKNOWN_LINE_TYPE),
    ],
)
def test_bad_line_is_skipped_counted_and_later_lines_still_read(
    tmp_path: Path, bad_line: bytes, reason: SkipReason
) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [oc_header(), bad_line, oc_message("user", [text("after")])],
    )
    messages, reader = read(path)
    assert [(m.line, m.text) for m in messages] == [(3, "after")]
    assert reader.skips == {reason.value: 1}
    assert reader.cursor.line == 3


def test_deeply_nested_json_is_malformed_not_a_crash(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl", b"[" * 100_000)
    messages, reader = read(path)
    assert [m.text for m in messages] == ["hello"]
    assert reader.skips == {SkipReason.MALFORMED_JSON.value: 1}


def test_blank_lines_crlf_and_bom_are_tolerated_and_keep_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    header = json.dumps(oc_header()).encode()
    msg = json.dumps(oc_message("user", [text("hi")])).encode()
    path.write_bytes(b"\xef\xbb\xbf" + header + b"\r\n\n   \n" + msg + b"\r\n")
    messages, reader = read(path)
    assert [(m.line, m.text) for m in messages] == [(4, "hi")]
    assert not reader.skips
    assert reader.format is Format.OPENCLAW


def test_oversized_line_is_skipped_without_losing_the_next_line(tmp_path: Path) -> None:
    big = oc_message("user", [text("x" * 5000)])
    path = write_jsonl(tmp_path / "s.jsonl", [oc_header(), big, oc_message("user", [text("ok")])])
    messages, reader = read(path, max_line_bytes=1000)
    assert [(m.line, m.text) for m in messages] == [(3, "ok")]
    assert reader.skips == {SkipReason.OVERSIZED_LINE.value: 1}
    assert reader.cursor.offset == path.stat().st_size


def test_oversized_line_is_discarded_in_bounded_chunks(tmp_path: Path) -> None:
    # Longer than one discard chunk (1 MiB): the reader must loop, not read it whole.
    huge = b'{"type": "message", "pad": "' + b"y" * (3 * 1024 * 1024) + b'"}'
    path = _hello(tmp_path / "s.jsonl", huge, oc_message("user", [text("tail")]))
    messages, reader = read(path, max_line_bytes=4096)
    assert [m.line for m in messages] == [2, 4]
    assert reader.skips == {SkipReason.OVERSIZED_LINE.value: 1}


def test_line_exactly_at_the_cap_is_accepted(tmp_path: Path) -> None:
    line = json.dumps(oc_message("user", [text("z")])).encode()
    path = write_jsonl(tmp_path / "s.jsonl", [oc_header(), line])
    messages, reader = read(path, Format.OPENCLAW, max_line_bytes=len(line))
    assert [m.text for m in messages] == ["z"]
    assert not reader.skips
    messages, reader = read(path, Format.OPENCLAW, max_line_bytes=len(line) - 1)
    assert messages == []
    assert reader.skips == {SkipReason.OVERSIZED_LINE.value: 1}


def test_max_line_bytes_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_line_bytes"):
        read(_hello(tmp_path / "s.jsonl"), max_line_bytes=0)


# ---------------------------------------------------------------- whole-file skips


def test_empty_file_is_counted_once(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    messages, reader = read(path)
    assert messages == []
    assert reader.skips == {SkipReason.EMPTY_FILE.value: 1}
    assert reader.format is None
    assert reader.cursor.offset == 0


def test_binary_file_is_counted_and_not_parsed(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\x00\x01\x02\x89PNG\n" + json.dumps(oc_header()).encode() + b"\n")
    messages, reader = read(path, Format.OPENCLAW)
    assert messages == []
    assert reader.skips == {SkipReason.BINARY_FILE.value: 1}


def test_binary_junk_after_a_valid_line_costs_only_its_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(json.dumps(oc_header()).encode() + b"\n\x00\x01\x02\x89PNG\n")
    messages, reader = read(path, Format.OPENCLAW)
    assert messages == []
    assert SkipReason.BINARY_FILE.value not in reader.skips
    assert sum(reader.skips.values()) == 1


def test_unknown_format_is_counted_and_yields_nothing(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [{"hello": "world"}, {"type": "whatever"}])
    messages, reader = read(path)
    assert messages == []
    assert reader.format is None
    assert reader.skips == {SkipReason.UNKNOWN_FORMAT.value: 1}


def test_missing_file_is_counted_as_unreadable(tmp_path: Path) -> None:
    messages, reader = read(tmp_path / "gone.jsonl", Format.OPENCLAW)
    assert messages == []
    assert reader.skips == {SkipReason.UNREADABLE_FILE.value: 1}


def test_skips_accumulate_in_a_shared_counter(tmp_path: Path) -> None:
    from collections import Counter

    shared: Counter[str] = Counter()
    for name in ("a", "b"):
        path = _hello(tmp_path / f"{name}.jsonl", b"garbage")
        read(path, skips=shared)
    assert shared == {SkipReason.MALFORMED_JSON.value: 2}


# ---------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([oc_header(version=3), oc_message("user", "hi", id="a")], Format.OPENCLAW),
        ([oc_header(version=None), oc_message("user", "hi")], Format.OPENCLAW),
        ([oc_message("user", "hi")], Format.OPENCLAW),
        ([{"type": "summary", "summary": "x", "leafUuid": "u"}, cc_user("hi")], Format.CLAUDE_CODE),
        ([cc_user("hi")], Format.CLAUDE_CODE),
        ([cc_assistant("m1", [text("hi")])], Format.CLAUDE_CODE),
        ([ev("turn/start", ts=1), ev("user/message", "hi")], Format.EVENT_LOG),
        ([ev("context/message", "hi")], Format.EVENT_LOG),
        ([b"junk", [1], {"x": 1}, cc_user("hi")], Format.CLAUDE_CODE),
        ([{"x": 1}], None),
    ],
)
def test_detect_format(tmp_path: Path, lines: list[object], expected: Format | None) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", lines)  # type: ignore[arg-type]
    assert detect_format(path) is expected


def test_detect_format_only_sniffs_the_first_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [{"x": i} for i in range(50)] + [cc_user("hi")])
    assert detect_format(path) is None


def test_detect_format_of_missing_empty_and_binary_files(tmp_path: Path) -> None:
    assert detect_format(tmp_path / "missing.jsonl") is None
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert detect_format(tmp_path / "empty.jsonl") is None
    (tmp_path / "bin.jsonl").write_bytes(b'\x00\x89PNG\n{"type": "session"}\n')
    assert detect_format(tmp_path / "bin.jsonl") is None
    # A NUL after a transcript's first line is a bad line, not a binary file.
    (tmp_path / "nul.jsonl").write_bytes(b'{"type": "session"}\n\x00\n')
    assert detect_format(tmp_path / "nul.jsonl") is Format.OPENCLAW


def test_given_format_skips_sniffing(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [ev("user/message", "hi")])
    messages, reader = read(path, Format.EVENT_LOG)
    assert reader.format is Format.EVENT_LOG
    assert [m.text for m in messages] == ["hi"]


# ---------------------------------------------------------------- cursor


def test_cursor_after_a_full_read(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl")
    _, reader = read(path)
    size = path.stat().st_size
    assert reader.cursor.offset == size
    assert reader.cursor.line == 2
    assert reader.cursor.size == size
    data = path.read_bytes()
    assert reader.cursor.head == "s2f:" + hashlib.sha256(data).hexdigest()
    assert cursor_is_valid(path, reader.cursor)


def test_rereading_from_the_cursor_yields_nothing_new(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl")
    _, first = read(path)
    messages, second = read(path, start=first.cursor)
    assert messages == []
    assert second.cursor == first.cursor
    assert not second.restarted


def test_appending_one_line_yields_exactly_that_message(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl")
    _, first = read(path)
    append_jsonl(path, [oc_message("assistant", [text("appended")])])
    messages, second = read(path, start=first.cursor)
    assert [(m.line, m.text, m.role) for m in messages] == [(3, "appended", Role.ASSISTANT)]
    assert second.cursor.line == 3
    assert second.cursor.offset == path.stat().st_size


def test_iterating_the_same_reader_again_reads_on(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl")
    messages, reader = read(path)
    assert [m.line for m in messages] == [2]
    append_jsonl(path, [oc_message("user", [text("more")])])
    assert [(m.line, m.text) for m in reader] == [(3, "more")]
    assert list(reader) == []


def test_truncation_invalidates_the_cursor_and_the_reader_restarts(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl", oc_message("user", [text("second")]))
    _, first = read(path)
    _hello(path)  # rewritten shorter
    assert not cursor_is_valid(path, first.cursor)
    messages, second = read(path, start=first.cursor)
    assert second.restarted
    assert [(m.line, m.text) for m in messages] == [(2, "hello")]


def test_rewrite_with_same_length_invalidates_the_cursor(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [oc_header(), oc_message("user", [text("aaaa")])])
    _, first = read(path)
    write_jsonl(path, [oc_header(), oc_message("user", [text("bbbb")])])
    assert path.stat().st_size == first.cursor.offset
    assert not cursor_is_valid(path, first.cursor)
    messages, second = read(path, start=first.cursor)
    assert second.restarted
    assert [m.text for m in messages] == ["bbbb"]


def test_cursor_of_a_deleted_file_is_invalid(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl")
    _, reader = read(path)
    path.unlink()
    assert not cursor_is_valid(path, reader.cursor)


def test_an_edit_past_the_first_4kb_invalidates_the_cursor(tmp_path: Path) -> None:
    # sed -i on line 30: the head is unchanged and the file grows, yet what was read changed.
    lines = [oc_header()] + [oc_message("user", [text(f"m{i} " + "p" * 200)]) for i in range(40)]
    path = write_jsonl(tmp_path / "s.jsonl", lines)
    _, first = read(path)
    path.write_bytes(path.read_bytes().replace(b"m30 ", b"m30 REDACTED-LONGER "))
    assert path.read_bytes()[:4096] == write_jsonl(tmp_path / "o.jsonl", lines).read_bytes()[:4096]
    assert not cursor_is_valid(path, first.cursor)
    messages, second = read(path, start=first.cursor)
    assert second.restarted
    assert len(messages) == 40 and "REDACTED-LONGER" in messages[30].text


def test_a_cursor_from_an_older_version_cannot_vouch_and_the_file_is_read_again(
    tmp_path: Path,
) -> None:
    path = _hello(tmp_path / "s.jsonl")
    _, first = read(path)
    legacy = Cursor(offset=first.cursor.offset, line=1, head="b2:" + "0" * 32, size=1)
    assert not cursor_is_valid(path, legacy)
    messages, second = read(path, start=legacy)
    assert second.restarted and [m.text for m in messages] == ["hello"]


def test_a_blake2b_cursor_of_the_version_before_still_vouches_and_reads_on(
    tmp_path: Path,
) -> None:
    # "b2f:" heads (BLAKE2b over every consumed byte) were written until SHA-256 took over:
    # an upgrade must not read every transcript again, nor miss an edit they cover.
    path = _hello(tmp_path / "s.jsonl")
    size = path.stat().st_size
    blake = hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    old = Cursor(offset=size, line=2, head="b2f:" + blake, size=size)
    assert cursor_is_valid(path, old)
    append_jsonl(path, [oc_message("user", [text("new")])])
    messages, second = read(path, start=old)
    assert not second.restarted
    assert [(m.line, m.text) for m in messages] == [(3, "new")]
    # Read on with the kind it started with: the new head is BLAKE2b of the whole file.
    whole = hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    assert second.cursor.head == "b2f:" + whole and cursor_is_valid(path, second.cursor)
    # ... and it still tells an edit before it.
    path.write_bytes(path.read_bytes().replace(b"hello", b"HELLO"))
    assert not cursor_is_valid(path, old)
    assert not cursor_is_valid(path, second.cursor)
    messages, third = read(path, start=second.cursor)
    assert third.restarted and third.cursor.head.startswith("s2f:")


def test_an_append_after_the_first_4kb_keeps_the_cursor(tmp_path: Path) -> None:
    lines = [oc_header()] + [oc_message("user", [text(f"m{i} " + "p" * 200)]) for i in range(40)]
    path = write_jsonl(tmp_path / "s.jsonl", lines)
    _, first = read(path)
    assert first.cursor.offset > 4096
    append_jsonl(path, [oc_message("user", [text("new")])])
    assert cursor_is_valid(path, first.cursor)
    messages, _ = read(path, start=first.cursor)
    assert [(m.line, m.text) for m in messages] == [(42, "new")]


def test_partial_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl")
    complete = json.dumps(oc_message("user", [text("late")])).encode()
    with path.open("ab") as f:
        f.write(complete[:20])  # the agent is still writing this line
    messages, first = read(path)
    assert [m.line for m in messages] == [2]
    assert first.cursor.line == 2
    assert first.cursor.offset == path.stat().st_size - 20
    assert not first.skips
    with path.open("ab") as f:
        f.write(complete[20:] + b"\n")
    messages, _ = read(path, start=first.cursor)
    assert [(m.line, m.text) for m in messages] == [(3, "late")]


def test_complete_last_line_without_newline_is_consumed_once(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [oc_header(), oc_message("user", [text("no newline")])],
        final_newline=False,
    )
    messages, first = read(path)
    assert [(m.line, m.text) for m in messages] == [(2, "no newline")]
    assert first.cursor.offset == path.stat().st_size
    # The writer then finishes the line and goes on: the newline belongs to line 2.
    append_jsonl(path, [b"", oc_message("user", [text("next")])])
    messages, second = read(path, start=first.cursor)
    assert [(m.line, m.text) for m in messages] == [(3, "next")]
    assert not second.skips


def test_complete_non_object_last_line_is_consumed_and_counted(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl")
    with path.open("ab") as f:
        f.write(b"null")
    _, reader = read(path)
    assert reader.cursor.line == 3
    assert reader.skips == {SkipReason.NOT_AN_OBJECT.value: 1}


def test_unfinished_oversized_last_line_is_left_for_later(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl")
    with path.open("ab") as f:
        f.write(b'{"type": "message", "pad": "' + b"q" * 5000)
    _, first = read(path, max_line_bytes=1000)
    assert first.cursor.line == 2
    assert not first.skips
    append_jsonl(path, [b'"}', oc_message("user", [text("after")])])
    messages, second = read(path, start=first.cursor, max_line_bytes=1000)
    assert [(m.line, m.text) for m in messages] == [(4, "after")]
    assert second.skips == {SkipReason.OVERSIZED_LINE.value: 1}


def test_abandoned_iteration_keeps_the_old_cursor(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl", oc_message("user", [text("two")]))
    from dreaming.ingest.transcripts import TranscriptReader

    from .transcript_builders import session

    reader = TranscriptReader(session(path))
    iterator = iter(reader)
    next(iterator)
    del iterator
    assert reader.cursor.offset == 0
    assert [m.text for m in reader] == ["hello", "two"]


def test_start_cursor_line_numbers_continue(tmp_path: Path) -> None:
    path = _hello(tmp_path / "s.jsonl")
    _, first = read(path)
    append_jsonl(path, [cc_user("x")])  # foreign line: still counted as a line
    append_jsonl(path, [oc_message("user", [text("y")])])
    messages, second = read(path, start=first.cursor)
    assert [m.line for m in messages] == [4]
    assert second.skips == {SkipReason.UNKNOWN_LINE_TYPE.value: 1}


def test_cursor_is_a_frozen_value(tmp_path: Path) -> None:
    cursor = Cursor(offset=1, line=1, head="b2:x", size=1)
    with pytest.raises(AttributeError):
        cursor.offset = 2  # type: ignore[misc]


# ---------------------------------------------------------------- adversarial input


_json_lines = st.builds(
    lambda obj: json.dumps(obj).encode(),
    st.one_of(
        st.just(oc_message("user", [text("hi")])),
        st.just(oc_message("assistant", "plain")),
        st.just(cc_user("hello")),
        st.just(ev("context/message", "ctx")),
        st.dictionaries(
            st.sampled_from(["type", "message", "data", "timestamp", "role", "content"]),
            st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers())),
            max_size=4,
        ),
    ),
)
_lines = st.lists(
    st.one_of(st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")), _json_lines),
    max_size=12,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=_lines,
    fmt=st.sampled_from([None, *Format]),
    final_newline=st.booleans(),
    cap=st.sampled_from([16, 200, 8 * 1024 * 1024]),
)
def test_arbitrary_bytes_never_crash_the_reader(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    fmt: Format | None,
    final_newline: bool,
    cap: int,
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "s.jsonl"
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    path.write_bytes(data)
    total_lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    messages, reader = read(path, fmt, max_line_bytes=cap)
    for message in messages:
        assert 1 <= message.line <= total_lines
        assert message.kind in Kind
        assert message.blocks
    assert 0 <= reader.cursor.line <= total_lines
    assert 0 <= reader.cursor.offset <= len(data)
    # Whatever the content, reading on from the cursor adds nothing.
    again, _ = read(path, fmt, start=reader.cursor, max_line_bytes=cap)
    assert again == []


def test_a_nul_inside_one_line_costs_that_line_not_the_file(tmp_path: Path) -> None:
    good = oc_message("user", [text("kept")])
    path = write_jsonl(tmp_path / "s.jsonl", [oc_header(), good, good])
    raw = path.read_bytes().splitlines(keepends=True)
    raw[1] = raw[1].replace(b"kept", b"ke\x00pt")  # a raw NUL inside the first message
    path.write_bytes(b"".join(raw))
    messages, reader = read(path)
    assert [m.text for m in messages] == ["kept"]
    assert SkipReason.BINARY_FILE.value not in reader.skips
    assert sum(reader.skips.values()) == 1
