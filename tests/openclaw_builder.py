"""Builds small fake OpenClaw state folders for tests."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


@dataclass
class FakeOpenClaw:
    root: Path
    index: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def session(
        self,
        agent: str,
        session_id: str,
        turns: list[tuple[str, str]],
        *,
        key: str | None = None,
        start: datetime = datetime(2026, 3, 1, 9, 0, tzinfo=UTC),
        **index_fields: Any,
    ) -> Path:
        folder = self.root / "agents" / agent / "sessions"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [
            {"type": "session", "version": 3, "id": session_id, "timestamp": start.isoformat()}
        ]
        for i, (role, text) in enumerate(turns):
            lines.append(message(role, text, start + timedelta(minutes=i), f"{session_id}-{i}"))
        path = folder / f"{session_id}.jsonl"
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
        if key is not None:
            self.index.setdefault(agent, {})[key] = {
                "sessionId": session_id,
                "updatedAt": int(start.timestamp() * 1000),
                **index_fields,
            }
            (folder / "sessions.json").write_text(json.dumps(self.index[agent]))
        return path


def message(role: str, text: str, ts: datetime, mid: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": mid,
        "parentId": None,
        "timestamp": ts.isoformat().replace("+00:00", "Z"),
        "message": {"role": role, "content": [{"type": "text", "text": text}]},
    }


def append(path: Path, role: str, text: str, ts: datetime, mid: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(message(role, text, ts, mid), ensure_ascii=False) + "\n")


def block(name: str, ident: str, *, group: bool = False) -> str:
    """OpenClaw's inbound metadata for a message from `name` (a group chat's, or a DM's)."""
    info: dict[str, Any] = {"message_id": "7", "sender_id": ident, "sender": name}
    if group:
        info |= {"group_subject": "Family", "is_group_chat": True}
    who = {"label": f"{name} ({ident})", "id": ident, "name": name}
    return (
        f"Conversation info (untrusted metadata):\n```json\n{json.dumps(info, indent=2)}\n```\n\n"
        f"Sender (untrusted metadata):\n```json\n{json.dumps(who, indent=2)}\n```\n\n"
    )
