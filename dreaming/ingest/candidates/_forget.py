"""A purge's part in the candidates: which evidence and recalls a scope of sessions (or
lines) holds, and their removal, with every candidate they supported refreshed, its text
taken again from a kept line, and reopened."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    delete,
    func,
    select,
    update,
)

from dreaming.config import Settings
from dreaming.ingest import claims as claims_mod
from dreaming.ingest.candidates._common import joined_evidence
from dreaming.ingest.candidates._signals import refresh_candidates, rescore
from dreaming.store import state
from dreaming.store.state import StateKey
from dreaming.store.statuses import CandidateStatus
from dreaming.store.tables import (
    CANDIDATE_EVIDENCE,
    CANDIDATES,
    CORPUS_LINES,
    RECALLS,
)


def evidence_of(
    agent: str, sessions: Sequence[str], line_ids: Sequence[int] | None = None
) -> ColumnElement[bool]:
    """The evidence rows citing `sessions`, or only the corpus lines `line_ids`."""
    ev = CANDIDATE_EVIDENCE.c
    lines = ev.session_id.in_(sessions) if line_ids is None else ev.corpus_line_id.in_(line_ids)
    return and_(ev.agent == agent, lines)


def recalls_of(
    agent: str, sessions: Sequence[str], line_ids: Sequence[int] | None = None
) -> ColumnElement[bool]:
    """The recall rows of `sessions`, or only of the corpus lines `line_ids`."""
    rc = RECALLS.c
    lines = rc.session_id.in_(sessions) if line_ids is None else rc.corpus_line_id.in_(line_ids)
    return and_(rc.agent == agent, lines)


def forget_lines(
    conn: Connection,
    agent: str,
    sessions: Sequence[str],
    line_ids: Sequence[int] | None,
    *,
    candidates: Sequence[int],
    settings: Settings,
    carries: Callable[[str], bool],
) -> None:
    """A purge's part here: the evidence and recalls of the purged lines go; the candidates
    that cited them are re-derived from what remains (`carries`: holds purged text)."""
    conn.execute(delete(CANDIDATE_EVIDENCE).where(evidence_of(agent, sessions, line_ids)))
    refresh_candidates(conn, agent, candidates)
    # Whatever status: a candidate no remaining line supports is gone with its sessions.
    supported = select(CANDIDATE_EVIDENCE.c.candidate_id).where(
        CANDIDATE_EVIDENCE.c.candidate_id.in_(candidates)
    )
    conn.execute(
        delete(CANDIDATES).where(
            and_(CANDIDATES.c.id.in_(candidates), CANDIDATES.c.id.not_in(supported))
        )
    )
    for cid, text, tokens in conn.execute(
        select(CANDIDATES.c.id, CANDIDATES.c.text, CANDIDATES.c.tokens).where(
            CANDIDATES.c.id.in_(candidates)
        )
    ).all():
        if carries(text):
            _rederive_text(conn, cid, frozenset(tokens.split()), settings)
    # What remains of them is decided again: a fact the purged sessions shared with kept
    # ones may be rebuilt by a later night from the kept sessions alone.
    conn.execute(
        update(CANDIDATES)
        .where(CANDIDATES.c.id.in_(candidates))
        .values(status=CandidateStatus.PENDING, decided_evidence=0)
    )
    # Only these changed; the others' word rarity moved by what left the corpus, which
    # the next light or deep rescores before anything is chosen (the mark), so a purge
    # costs what it removes, not a pass over every candidate.
    rescore(conn, agent, settings, only=candidates)
    state.put_if_absent(conn, agent, StateKey.RESCORE_PENDING, "1")
    conn.execute(delete(RECALLS).where(recalls_of(agent, sessions, line_ids)))


def _rederive_text(conn: Connection, cid: int, wanted: frozenset[str], settings: Settings) -> None:
    """A candidate kept sessions still support took its text and word bag from the first line
    that said it, which may be purged: take them again from the claim of a remaining line
    closest to its words (the first of equals, lines in time order); none: it goes."""
    cs = settings.candidates
    lines = conn.execute(
        select(CORPUS_LINES.c.text)
        .select_from(joined_evidence())
        .where(CANDIDATE_EVIDENCE.c.candidate_id == cid)
        .order_by(CORPUS_LINES.c.ts.asc().nulls_first(), CORPUS_LINES.c.id)  # as SQLite sorts
    ).scalars()
    claims = (
        c
        for t in lines
        for c in claims_mod.extract(t, min_words=cs.min_claim_words, max_words=cs.max_claim_words)
    )
    best = max(claims, key=lambda c: claims_mod.jaccard(c.tokens, wanted), default=None)
    if best is None:
        conn.execute(delete(CANDIDATE_EVIDENCE).where(CANDIDATE_EVIDENCE.c.candidate_id == cid))
        conn.execute(delete(CANDIDATES).where(CANDIDATES.c.id == cid))
        return
    # Taken from a kept line: even if a purged line said the same words, these are the kept
    # session's words now.
    conn.execute(
        update(CANDIDATES)
        .where(CANDIDATES.c.id == cid)
        .values(text=best.text, tokens=" ".join(sorted(best.tokens)))
    )


def candidates_of(
    conn: Connection, agent: str, sessions: Sequence[str], line_ids: Sequence[int] | None
) -> list[int]:
    """Ids of the candidates with evidence in `sessions` (or the lines `line_ids`), sorted."""
    query = select(CANDIDATE_EVIDENCE.c.candidate_id).where(evidence_of(agent, sessions, line_ids))
    return sorted({c for (c,) in conn.execute(query)})


def count_evidence(
    conn: Connection, agent: str, sessions: Sequence[str], line_ids: Sequence[int] | None
) -> int:
    query = select(func.count()).select_from(CANDIDATE_EVIDENCE)
    return int(conn.execute(query.where(evidence_of(agent, sessions, line_ids))).scalar_one())


def count_recalls(
    conn: Connection, agent: str, sessions: Sequence[str], line_ids: Sequence[int] | None
) -> int:
    query = select(func.count()).select_from(RECALLS)
    return int(conn.execute(query.where(recalls_of(agent, sessions, line_ids))).scalar_one())
