"""What the agent said in REM's window that no candidate holds, as claims REM can tally.

The agent's own lines corroborate candidates but create none (`candidates._fold`), so what
only the agent said lives in the corpus alone. Its themes are still the agent's night (a
coding agent's owner says little; what the two worked on is in the agent's words), so REM
reads the window's agent lines that gave no candidate evidence and recalled no entry, takes
their claims as light would, and folds them here, in memory, into claim groups shaped like
candidate rows (negative ids): near-duplicates by the same similarity light folds with.
Lines quoting a managed entry or our diary are our own output and are left out, as light
leaves them out. Nothing is written: REM derives themes, quotes and the sessions its window
read (so forget finds the diary entry), never candidates.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import Connection, and_, bindparam, exists, or_, select

from dreaming.config import Settings
from dreaming.ingest import claims as claims_mod
from dreaming.ingest.admission import OriginClass
from dreaming.memory import diary
from dreaming.phases._rem_themes import Evidence
from dreaming.store.tables import CANDIDATE_EVIDENCE, CORPUS_LINES, RECALLS


class ClaimRow(NamedTuple):
    """A group of the agent's claims, in the shape REM reads candidate rows in."""

    id: int  # negative: no candidate has it
    text: str
    tokens: str
    score: float | None
    features: str | None


@dataclass
class AgentClaims:
    rows: list[ClaimRow] = field(default_factory=list)
    evidence: dict[int, list[Evidence]] = field(default_factory=lambda: defaultdict(list))
    sessions: set[str] = field(default_factory=set)

    def lines(self, ident: int) -> list[int]:
        """The corpus lines behind one group, newest first."""
        return sorted({e.line for e in self.evidence.get(ident, ())}, reverse=True)


def gather(
    conn: Connection, agent: str, since: datetime, settings: Settings, dreams: Path
) -> AgentClaims:
    """The window's agent claims no candidate holds, grouped."""
    since_day = since.date().isoformat()  # for lines without a time of their own
    # Recalls are few and keyed by entry: one scan, not a lookup per line.
    recalled = {n for (n,) in conn.execute(_RECALLED, {"agent": agent})}
    echoes = claims_mod.EchoIndex()
    for entry in diary.entries(diary.read(dreams)):
        for text in entry.body.splitlines():
            echoes.add(text)
    cs = settings.candidates
    index = claims_mod.SimilarityIndex(cs.similarity)
    by_key: dict[str, int] = {}
    out = AgentClaims()
    lines = conn.execute(_UNHELD, {"agent": agent, "since": since, "since_day": since_day})
    for line_id, session_id, day, text, speaker in lines:
        if line_id in recalled or "<!--" in text or echoes.contains_echo(text):
            continue  # our own output quoted back: no claim of anyone's
        for claim in claims_mod.extract(
            text, min_words=cs.min_claim_words, max_words=cs.max_claim_words
        ):
            holder = speaker if claim.first_person else None
            key = claims_mod.held_key(claim.key, holder)
            ident = by_key.get(key)
            if ident is None:
                ident = index.best(claim.tokens, holder)
            if ident is None:
                ident = -(len(out.rows) + 1)
                tokens = " ".join(sorted(claim.tokens))
                out.rows.append(ClaimRow(ident, claim.text, tokens, 0.0, None))
                index.add(ident, claim.tokens, holder)
            by_key.setdefault(key, ident)
            out.evidence[ident].append(Evidence(session_id, day, OriginClass.AGENT.value, line_id))
            out.sessions.add(session_id)
    return out


# Built once (see `store.compiled`).
_UNHELD = (
    select(
        CORPUS_LINES.c.id,
        CORPUS_LINES.c.session_id,
        CORPUS_LINES.c.day,
        CORPUS_LINES.c.text,
        CORPUS_LINES.c.speaker,
    )
    .where(
        and_(
            CORPUS_LINES.c.agent == bindparam("agent"),
            CORPUS_LINES.c.origin_class == OriginClass.AGENT.value,
            or_(
                CORPUS_LINES.c.ts >= bindparam("since"),
                and_(CORPUS_LINES.c.ts.is_(None), CORPUS_LINES.c.day >= bindparam("since_day")),
            ),
            ~exists().where(CANDIDATE_EVIDENCE.c.corpus_line_id == CORPUS_LINES.c.id),
        )
    )
    .order_by(CORPUS_LINES.c.id)
)
_RECALLED = select(RECALLS.c.corpus_line_id).where(RECALLS.c.agent == bindparam("agent"))
