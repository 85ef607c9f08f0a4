"""LoCoMo for the locomo bench (imported as `_locomo_data` from bench/): the benchmark's
fixed figures, the conversations read from locomo10.json, and their OpenClaw transcripts."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import iso

QUICK_CONVERSATIONS = 2
QA_CATEGORIES = (1, 2, 3, 4)
MATCH_CONTAINMENT = 0.5  # share of an observation's content words the entry must contain
MIN_NEEDLE_CHARS = 20
RAW = " (raw bytes)"
ROLES = ("both-user", "b-assistant")
SCHEDULES = ("once", "nightly")
EXAMPLES = 4  # examples per funnel stage kept in the JSON document
SMALL_TALK_EXAMPLES = 5  # small-talk entry texts per conversation kept in the JSON document
DEFAULT_OVERHEAD = 30.0  # framing per entry of the random baseline when MEMORY.md has none
RANDOM_DRAWS = 5  # random selections per conversation; their mean is reported
RANDOM_MEANS = ("selected", "cost", "qa_any", "qa_all", "recall_evidence")  # averaged per draw


# -- LoCoMo ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Session:
    number: int
    session_id: str
    start: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Observation:
    speaker: str
    text: str
    dia_ids: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    question: str
    category: int
    evidence: tuple[str, ...]  # normalized, every id names a turn


@dataclass
class Conversation:
    agent: str
    speakers: tuple[str, str]
    sessions: list[Session]
    questions: list[Question]
    observations: list[Observation]
    qa_unresolvable: int = 0
    # Evidence turns of every QA question, any category (5 included): what is not small talk.
    qa_turns: frozenset[str] = frozenset()
    line_of: dict[str, tuple[str, int]] = field(default_factory=dict)  # dia_id -> (sid, line)
    dia_of: dict[tuple[str, int], str] = field(default_factory=dict)  # (sid, line) -> dia_id

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)

    @property
    def transcript_chars(self) -> int:
        return sum(len(t.text) for s in self.sessions for t in s.turns)

    def turn(self, dia_id: str) -> Turn | None:
        sid, line = self.line_of.get(dia_id, ("", 0))
        for s in self.sessions:
            if s.session_id == sid:
                return s.turns[line - 2]
        return None


_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA = re.compile(r"D:?(\d+):0*(\d+)")


def parse_when(value: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" (taken as UTC)."""
    return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def dia_ids(raw: str | Sequence[str], known: set[str]) -> tuple[str, ...]:
    """Normalized turn ids in an evidence field ("D8:6; D9:17", "D:11:26", ["D1:3"]) that
    name a turn of the conversation, in order, without repeats."""
    items = [raw] if isinstance(raw, str) else list(raw)
    out: list[str] = []
    for item in items:
        for m in _DIA.finditer(str(item)):
            ident = f"D{int(m.group(1))}:{int(m.group(2))}"
            if ident in known and ident not in out:
                out.append(ident)
    return tuple(out)


def load(path: Path, limit: int | None) -> list[Conversation]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    out: list[Conversation] = []
    for i, sample in enumerate(raw[:limit] if limit else raw):
        conv = sample["conversation"]
        agent = str(sample.get("sample_id") or f"conv-{i}").lower()
        sessions: list[Session] = []
        numbers = sorted(
            int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)) and conv[k]
        )
        for n in numbers:
            turns = tuple(Turn(t["dia_id"], t["speaker"], t["text"]) for t in conv[f"session_{n}"])
            sessions.append(
                Session(n, f"{agent}-s{n:02d}", parse_when(conv[f"session_{n}_date_time"]), turns)
            )
        known = {t.dia_id for s in sessions for t in s.turns}
        questions: list[Question] = []
        unresolvable = 0
        qa_turns = frozenset(d for q in sample["qa"] for d in dia_ids(q.get("evidence", []), known))
        for q in sample["qa"]:
            if q.get("category") not in QA_CATEGORIES:
                continue
            ev = dia_ids(q.get("evidence", []), known)
            if not ev:
                unresolvable += 1
                continue
            questions.append(Question(q["question"], q["category"], ev))
        observations = [
            Observation(speaker, fact[0], ids)
            for key in sorted(
                sample.get("observation", {}), key=lambda k: int(re.sub(r"\D", "", k) or 0)
            )
            for speaker, facts in sample["observation"][key].items()
            for fact in facts
            if (ids := dia_ids(fact[1], known))
        ]
        out.append(
            Conversation(
                agent,
                (conv["speaker_a"], conv["speaker_b"]),
                sessions,
                questions,
                observations,
                unresolvable,
                qa_turns,
            )
        )
    return out


# -- transcripts ----------------------------------------------------------------------------


def sender_block(speaker: str) -> str:
    """The inbound metadata OpenClaw puts in front of a message from a chat channel, naming
    its sender: `Sender (untrusted metadata):` and a fenced JSON object."""
    ident = re.sub(r"\W+", "-", speaker.casefold()).strip("-") or "speaker"
    meta = {"label": f"{speaker} ({ident})", "id": ident, "name": speaker}
    return f"Sender (untrusted metadata):\n```json\n{json.dumps(meta, indent=2)}\n```\n\n"


def write_conversation(
    state: Path, conv: Conversation, roles: str, upto: int | None = None
) -> dict[str, int]:
    """OpenClaw v3 transcripts and sessions.json for `conv` (its first `upto` sessions);
    fills its line maps. Files already there are left alone (a later night reads only what
    is new). Returns sessions and transcript bytes."""
    folder = state / "agents" / conv.agent / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    speaker_b = conv.speakers[1]
    index: dict[str, Any] = {}
    size = 0
    for s in conv.sessions[:upto]:
        lines: list[dict[str, Any]] = [
            {"type": "session", "version": 3, "id": s.session_id, "timestamp": iso(s.start)}
        ]
        parent: str | None = None
        for k, turn in enumerate(s.turns):
            role = "assistant" if roles == "b-assistant" and turn.speaker == speaker_b else "user"
            mid = f"{s.session_id}-m{k:03d}"
            said = sender_block(turn.speaker) + turn.text if role == "user" else turn.text
            lines.append(
                {
                    "type": "message",
                    "id": mid,
                    "parentId": parent,
                    "timestamp": iso(s.start + timedelta(minutes=k)),
                    "message": {"role": role, "content": [{"type": "text", "text": said}]},
                }
            )
            parent = mid
            conv.line_of[turn.dia_id] = (s.session_id, k + 2)
            conv.dia_of[(s.session_id, k + 2)] = turn.dia_id
        body = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in lines)
        path = folder / f"{s.session_id}.jsonl"
        if not path.exists():  # unchanged files keep their mtime: light sees nothing new
            path.write_text(body, encoding="utf-8")
        size += len(body.encode())
        started = int(s.start.timestamp() * 1000)
        index[f"agent:{conv.agent}:main:{s.session_id}"] = {
            "sessionId": s.session_id,
            "updatedAt": started + 60_000 * len(s.turns),
            "sessionStartedAt": started,
            "chatType": "direct",
        }
    (folder / "sessions.json").write_text(json.dumps(index, indent=1), encoding="utf-8")
    return {"sessions": len(index), "bytes": size}


# -- matching -------------------------------------------------------------------------------
