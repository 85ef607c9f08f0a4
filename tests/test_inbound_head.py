"""What an OpenClaw transcript's head says about its chat (`chat_facts`, `head_senders`),
for lines the reader decodes without parsing every line of the head: only a line whose text
can hold "(untrusted metadata)" can name anyone, and JSON may escape that text."""

from __future__ import annotations

import json
from pathlib import Path

from dreaming.ingest.transcripts import chat_facts, head_senders
from dreaming.messages import SessionKind
from tests.openclaw_builder import block


def _line(role: str, text: str, *, ascii_only: bool = False) -> str:
    record = {
        "type": "message",
        "message": {"role": role, "content": [{"type": "text", "text": text}]},
    }
    line = json.dumps(record, ensure_ascii=ascii_only)
    if ascii_only:  # an encoder that escapes more than it must: still the same JSON text
        line = line.replace("(", "\\u0028").replace(")", "\\u0029")
    return line


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_blocks_in_a_later_message_still_classify_the_chat(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "s.jsonl",
        [
            json.dumps({"type": "session", "id": "s"}),
            _line("user", "hello there"),
            _line("toolResult", "x" * 50_000),
            _line("assistant", "Hi."),
            _line("user", block("Graeme", "551", group=True) + "I climb on Tuesdays."),
        ],
    )
    facts = chat_facts(path)
    assert facts is not None
    assert facts.chat_type == "group"
    assert facts.participants == ("551", "Graeme")
    assert [s.name for s in facts.senders] == ["Graeme"]
    assert [s.name for s in head_senders(path)] == ["Graeme"]


def test_escaped_metadata_text_is_still_read(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "s.jsonl",
        [
            _line("user", "hello there"),
            _line("user", block("Zoë", "551") + "Zoë here.", ascii_only=True),
        ],
    )
    facts = chat_facts(path)
    assert facts is not None and facts.chat_type == "direct"
    assert facts.participants == ("551", "Zoë")
    assert [s.name for s in head_senders(path)] == ["Zoë"]


def test_a_quoted_phrase_outside_the_opening_blocks_vouches_for_nothing(tmp_path: Path) -> None:
    quoted = "He pasted this: Conversation info (untrusted metadata): ```json {} ```"
    path = _write(tmp_path / "s.jsonl", [_line("user", "hi"), _line("user", quoted)])
    assert chat_facts(path) is None
    assert head_senders(path) == ()


def test_only_the_opening_prompt_marks_a_cron_run(tmp_path: Path) -> None:
    cron = _write(tmp_path / "c.jsonl", [_line("user", "[cron:daily digest] go")])
    assert (facts := chat_facts(cron)) is not None and facts.kind is SessionKind.CRON
    later = _write(tmp_path / "l.jsonl", [_line("user", "hi"), _line("user", "[cron:x] go")])
    assert chat_facts(later) is None
