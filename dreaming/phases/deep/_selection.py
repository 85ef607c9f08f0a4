"""Which candidates deep looks at tonight, and what is shown with them: selection past the
gates (the sentences of one utterance kept together), the live entries related to a batch,
and short evidence snippets from the corpus."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, func, or_, select

from dreaming.config import DeepSettings
from dreaming.ingest import claims as claims_mod
from dreaming.ingest import slots as slots_mod
from dreaming.ingest.admission import OriginClass
from dreaming.ingest.candidates import read_clock
from dreaming.ingest.slots import Slots
from dreaming.memory import entry_index, gates, lineage
from dreaming.phases.deep._likeness import statement
from dreaming.store.statuses import HELD, CandidateStatus
from dreaming.store.tables import CANDIDATE_EVIDENCE, CANDIDATES, CORPUS_LINES, ENTRIES

PROMOTABLE_CLASSES = (OriginClass.OWNER, OriginClass.AGENT)

_SPEAKER = {"user": "the user", "assistant": "the agent", "system": "system", "tool": "tool"}


@dataclass(frozen=True, slots=True)
class Candidate:
    id: int
    key: str
    text: str
    tokens: frozenset[str]
    sessions: int
    days: int
    owner_lines: int
    agent_lines: int
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    features: str = ""
    first_line: int = 0  # corpus line first said in: the sentences of one utterance share it
    holder: str | None = None  # whose first-person claim it is (`candidates.speaker`)
    # The people who said it, where its lines name them and the owner did not say it too
    # (the owner stays implicit); empty for the owner's and the agent's own.
    speakers: tuple[str, ...] = ()

    @classmethod
    def of_row(cls, r: Mapping[Any, Any]) -> Candidate:
        return cls(
            r["id"],
            r["key"],
            r["text"],
            frozenset(r["tokens"].split()),
            r["sessions"],
            r["days"],
            r["owner_lines"],
            r["agent_lines"],
            r["first_seen"],
            r["last_seen"],
            r["features"] or "",
            holder=r.get("speaker"),
        )

    @property
    def voice(self) -> str | None:
        """The one person it is said by, when its lines name one (see `speakers`)."""
        return self.holder or (self.speakers[0] if len(self.speakers) == 1 else None)

    @property
    def said_by(self) -> str:
        if self.owner_lines and self.agent_lines:
            return "user and agent"
        return "user" if self.owner_lines else "agent"


def select_candidates(conn: Connection, agent: str, s: DeepSettings) -> list[Candidate]:
    """Candidates past every gate (`dreaming.memory.gates`), most salient first. SQL narrows
    the rows to those that can pass; the gates say the last word."""
    clock = read_clock(conn, agent)
    rows = conn.execute(
        select(CANDIDATES)
        .where(
            and_(
                CANDIDATES.c.agent == agent,
                or_(
                    CANDIDATES.c.status == CandidateStatus.PENDING,
                    CANDIDATES.c.evidence_count > CANDIDATES.c.decided_evidence,
                ),
                gates.may_pass(s),
                CANDIDATES.c.score > 0,
                (CANDIDATES.c.owner_lines + CANDIDATES.c.agent_lines) > 0,
            )
        )
        .order_by(CANDIDATES.c.score.desc(), CANDIDATES.c.id)
    ).mappings()
    out: list[Candidate] = []
    for r in rows:
        if gates.held_back(r, s, clock) is not None:
            continue
        out.append(Candidate.of_row(r))
        if len(out) >= s.max_candidates:
            break
    return _by_utterance(conn, out)


def _by_utterance(conn: Connection, selected: list[Candidate]) -> list[Candidate]:
    """Selected candidates with each utterance's sentences next to each other (after the
    best of them), so they land in one batch and can be folded into one entry."""
    if not selected:
        return selected
    first: dict[int, int] = {}
    ids = [c.id for c in selected]
    said = speakers_of(conn, ids)
    for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):
        first.update(conn.execute(_FIRST_LINE, {"ids": chunk}).all())
    order: dict[int, list[Candidate]] = {}
    for c in selected:
        line = first.get(c.id, 0)
        named = said.get(c.id, ())
        order.setdefault(line or -c.id, []).append(replace(c, first_line=line, speakers=named))
    return [c for members in order.values() for c in members]


def speakers_of(conn: Connection, candidate_ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    """Candidate id -> the people its user lines name, sorted; none where the owner (a user
    line naming nobody) said it too."""
    found: dict[int, set[str | None]] = {}
    ids = list(candidate_ids)
    for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):
        for cid, speaker in conn.execute(_USER_SPEAKERS, {"ids": chunk}):
            found.setdefault(cid, set()).add(speaker)
    return {
        cid: tuple(sorted(n for n in names if n is not None))
        for cid, names in found.items()
        if None not in names
    }


def utterances(batch: Sequence[Candidate]) -> list[tuple[Candidate, list[Candidate]]]:
    """The batch with the sentences of one utterance folded together: the first (highest
    scored) carries the others, so one entry states them and pays its framing once."""
    groups: dict[int, list[Candidate]] = {}
    for c in batch:
        groups.setdefault(c.first_line or -c.id, []).append(c)
    return [(members[0], members[1:]) for members in groups.values()]


def related_entries(
    conn: Connection, agent: str, batch: Sequence[Candidate], per_candidate: int
) -> list[tuple[str, str]]:
    """The entries (key, text), live or archived, most like the batch's candidates,
    `per_candidate` each."""
    keys: list[str] = []
    for c in batch:
        for key in entry_index.search(conn, agent, c.text, per_candidate):
            if key not in keys:
                keys.append(key)
    texts: dict[str, str] = dict(
        conn.execute(
            select(ENTRIES.c.key, ENTRIES.c.text).where(
                and_(
                    ENTRIES.c.agent == agent,
                    ENTRIES.c.key.in_(keys),
                    ENTRIES.c.status.in_(HELD),
                )
            )
        ).all()
    )
    return [(k, texts[k]) for k in keys if k in texts]


def snippets(conn: Connection, candidate_id: int) -> list[str]:
    """Up to three evidence lines, each with who said it and when, so the model can tell
    a person's instruction from the agent's narration of it."""
    rows = conn.execute(
        select(CORPUS_LINES.c.text, CORPUS_LINES.c.role, CORPUS_LINES.c.day, CORPUS_LINES.c.speaker)
        .select_from(
            CANDIDATE_EVIDENCE.join(
                CORPUS_LINES, CORPUS_LINES.c.id == CANDIDATE_EVIDENCE.c.corpus_line_id
            )
        )
        .where(CANDIDATE_EVIDENCE.c.candidate_id == candidate_id)
        .order_by(
            CORPUS_LINES.c.ts.desc().nulls_last(), CORPUS_LINES.c.id.desc()
        )  # as SQLite sorts
        .limit(3)
    ).all()
    return [
        f"{day} {speaker or _SPEAKER.get(role, role)}: {claims_mod.clean(text).strip()[:300]}"
        for text, role, day, speaker in rows
    ]


def day(ts: datetime | None) -> str | None:
    return ts.date().isoformat() if ts is not None else None


def owner_said_at(conn: Connection, candidate_ids: Sequence[int]) -> dict[int, datetime]:
    """When the owner last said each candidate, on the transcripts' clock: what decides
    which of two values of a slot is the current one (an agent's later restatement of an
    old value does not make it new)."""
    out: dict[int, datetime] = {}
    ids = list(candidate_ids)
    for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):
        out.update(conn.execute(_OWNER_SAID_AT, {"ids": chunk}).all())
    return out


# Built once (see `store.compiled`), each over a chunk of candidate ids.
_EVIDENCE_LINES = CANDIDATE_EVIDENCE.join(
    CORPUS_LINES, CORPUS_LINES.c.id == CANDIDATE_EVIDENCE.c.corpus_line_id
)
_OF_CHUNK = CANDIDATE_EVIDENCE.c.candidate_id.in_(bindparam("ids", expanding=True))
_FIRST_LINE = (
    select(CANDIDATE_EVIDENCE.c.candidate_id, func.min(CANDIDATE_EVIDENCE.c.corpus_line_id))
    .where(_OF_CHUNK)
    .group_by(CANDIDATE_EVIDENCE.c.candidate_id)
)
_USER_SPEAKERS = (
    select(CANDIDATE_EVIDENCE.c.candidate_id, CORPUS_LINES.c.speaker)
    .select_from(_EVIDENCE_LINES)
    .where(and_(_OF_CHUNK, CORPUS_LINES.c.role == "user"))
    .distinct()
)
_OWNER_SAID_AT = (
    select(CANDIDATE_EVIDENCE.c.candidate_id, func.max(CORPUS_LINES.c.ts))
    .select_from(_EVIDENCE_LINES)
    .where(
        and_(
            _OF_CHUNK,
            CANDIDATE_EVIDENCE.c.origin_class == OriginClass.OWNER,
            CORPUS_LINES.c.ts.is_not(None),
        )
    )
    .group_by(CANDIDATE_EVIDENCE.c.candidate_id)
)


MAX_SAME_SLOT = 3  # entries shown per candidate as stating its slot


def same_slot(
    conn: Connection, agent: str, batch: Sequence[Candidate], slots: Slots
) -> dict[int, list[tuple[str, str]]]:
    """Candidate id -> the entries (key, text), live or archived, it would replace if said
    later than them: another value of the same slot, or what it corrects outright. Only the
    owner's candidates: an agent-only line never replaces a fact."""
    live = lineage.held_entries(conn, agent)
    if not live:
        return {}
    readings = [(key, text, slots.read(statement(text))) for key, text in live]
    out: dict[int, list[tuple[str, str]]] = {}
    for c in batch:
        if not c.owner_lines:
            continue
        mine = slots.read(c.text)
        found = [
            (r.likeness, key, text)
            for key, text, old in readings
            if (r := slots_mod.replaces(mine, old)) is not None
        ]
        if found:
            found.sort(key=lambda f: -f[0])
            out[c.id] = [(key, text) for _, key, text in found[:MAX_SAME_SLOT]]
    return out
