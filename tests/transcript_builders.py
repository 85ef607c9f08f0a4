"""Small builders for hand-made transcripts in tmp_path (OpenClaw, Claude Code, event log)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dreaming.ingest.transcripts import Cursor, TranscriptReader
from dreaming.messages import Format, Message, SessionFile

Line = dict[str, Any] | str | bytes


def encode(line: Line) -> bytes:
    if isinstance(line, bytes):
        return line
    if isinstance(line, str):
        return line.encode()
    return json.dumps(line, ensure_ascii=False).encode()


def write_jsonl(path: Path, lines: Sequence[Line], *, final_newline: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"\n".join(encode(line) for line in lines)
    path.write_bytes(data + b"\n" if final_newline and lines else data)
    return path


def append_jsonl(path: Path, lines: Sequence[Line]) -> None:
    with path.open("ab") as f:
        for line in lines:
            f.write(encode(line) + b"\n")


def session(path: Path, fmt: Format | None = None, agent: str = "main") -> SessionFile:
    return SessionFile(agent=agent, session_id=path.stem, path=path, format=fmt)


def read(
    path: Path, fmt: Format | None = None, *, start: Cursor | None = None, **kwargs: Any
) -> tuple[list[Message], TranscriptReader]:
    reader = TranscriptReader(session(path, fmt), start=start, **kwargs)
    return list(reader), reader


# ---------------------------------------------------------------- OpenClaw / pi


def oc_header(version: int | None = 3, ts: str = "2026-03-08T12:15:35.580Z") -> dict[str, Any]:
    header: dict[str, Any] = {"type": "session", "id": "sess-1", "timestamp": ts, "cwd": "/w"}
    if version is not None:
        header["version"] = version
    return header


def oc_message(
    role: str,
    content: Any,
    *,
    ts: str | None = "2026-03-08T13:03:27.042Z",
    id: str | None = None,
    **message_fields: Any,
) -> dict[str, Any]:
    line: dict[str, Any] = {"type": "message", "message": {"role": role, "content": content}}
    line["message"].update(message_fields)
    if ts is not None:
        line["timestamp"] = ts
    if id is not None:
        line["id"] = id
        line["parentId"] = None
    return line


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def oc_tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": "call-1", "name": name, "arguments": arguments}


# ---------------------------------------------------------------- Claude Code


def cc_user(content: Any, *, ts: str = "2025-06-14T11:00:00Z", **flags: Any) -> dict[str, Any]:
    line = {
        "type": "user",
        "timestamp": ts,
        "uuid": "u-1",
        "sessionId": "s",
        "message": {"role": "user", "content": content},
    }
    line.update(flags)
    return line


def cc_assistant(
    message_id: str | None, blocks: list[Any], *, ts: str = "2025-06-14T11:00:30Z", **extra: Any
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "model": "claude-x", "content": blocks}
    if message_id is not None:
        message["id"] = message_id
    line = {"type": "assistant", "timestamp": ts, "sessionId": "s", "message": message}
    line.update(extra)
    return line


def cc_tool_use(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_1", "name": name, "input": arguments}


def cc_tool_result(result: str = "ok") -> dict[str, Any]:
    return cc_user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}])


# ---------------------------------------------------------------- event log


def ev(
    event_type: str, content: Any = None, *, source: Any = None, **fields: Any
) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if content is not None:
        data["content"] = content
    if source is not None:
        data["source"] = source
    line: dict[str, Any] = {"type": event_type, "data": data}
    line.update(fields)
    return line


# ---------------------------------------------------------------- folders


def openclaw_root(
    root: Path,
    agent: str = "main",
    *,
    index: Any = None,
    files: Mapping[str, Sequence[Line]] | None = None,
    raw_index: str | None = None,
) -> Path:
    """<root>/agents/<agent>/sessions/ with the given transcripts and sessions.json."""
    sessions = root / "agents" / agent / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    for name, lines in (files or {}).items():
        write_jsonl(sessions / name, lines)
    if raw_index is not None:
        (sessions / "sessions.json").write_text(raw_index)
    elif index is not None:
        (sessions / "sessions.json").write_text(json.dumps(index))
    return sessions
