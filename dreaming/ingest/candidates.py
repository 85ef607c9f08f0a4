"""Candidates: folding claims from new corpus lines, their stored signals, and scores.

A candidate's signals are always recomputed from its evidence rows (never incremented in
place), so re-reading a rewritten file or purging a session leaves exact counts behind.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    column,
    delete,
    func,
    insert,
    select,
    table,
    update,
)

from dreaming.config import Settings
from dreaming.ingest import claims as claims_mod
from dreaming.ingest import salience as salience_mod
from dreaming.ingest.admission import OriginClass
from dreaming.ingest.scoring import Rarity, Signals, score
from dreaming.memory import diary, memory_file
from dreaming.store import state
from dreaming.store.dialect import insert_ignore
from dreaming.store.state import StateKey
from dreaming.store.statuses import CandidateStatus, EntryStatus
from dreaming.store.tables import (
    CANDIDATE_EVIDENCE,
    CANDIDATES,
    CORPUS_LINES,
    ENTRIES,
    RECALLS,
)

T = TypeVar("T")


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class FoldStats:
    """What one fold did: the candidates it touched, and the counts the light phase reports."""

    touched: frozenset[int]  # candidates that gained evidence
    echoes: int  # lines dropped as our own diary quoted back
    candidates_new: int
    recalls: int


@dataclass(slots=True)
class _Batch:
    """What a fold gathers from its lines before it writes anything."""

    # (candidate, or a pending one's negative id; corpus line id; corpus row)
    evidence: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    recalls: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)  # new: ids -1, -2, ...
    cue: set[int] = field(default_factory=set)  # known candidates a claim gave a durable cue
    echoes: int = 0


@dataclass
class Folder:
    """Folds claims into candidates; holds the agent's candidate and entry indexes."""

    agent: str
    settings: Settings
    by_key: dict[str, int]
    index: claims_mod.SimilarityIndex
    entries: claims_mod.SimilarityIndex
    entry_keys: list[str]
    entry_by_claim_key: dict[str, str]
    echoes: claims_mod.EchoIndex

    @property
    def known_keys(self) -> frozenset[str]:
        return frozenset(self.entry_keys)

    @classmethod
    def load(
        cls, conn: Connection, agent: str, settings: Settings, memory: Path, dreams: Path
    ) -> Folder:
        sim = settings.candidates.similarity
        index = claims_mod.SimilarityIndex(sim)
        by_key: dict[str, int] = {}
        for cid, key, tokens in conn.execute(
            select(CANDIDATES.c.id, CANDIDATES.c.key, CANDIDATES.c.tokens).where(
                CANDIDATES.c.agent == agent
            )
        ):
            by_key[key] = cid
            index.add(cid, frozenset(tokens.split()))
        # Our own MEMORY.md entries: a claim that repeats one is a recall, not a new candidate
        # (that is how our output echoed back in a transcript is recognised, not re-promoted).
        entries = claims_mod.SimilarityIndex(sim)
        entry_keys: list[str] = []
        entry_by_claim_key: dict[str, str] = {}
        # The database is the truth about our entries (MEMORY.md may lag after a crash until
        # deep repairs it); blocks in the file that the database does not know count too.
        known: dict[str, str] = dict(
            conn.execute(
                select(ENTRIES.c.key, ENTRIES.c.text).where(
                    and_(ENTRIES.c.agent == agent, ENTRIES.c.status == EntryStatus.LIVE)
                )
            ).all()
        )
        for block in memory_file.read(memory).live_blocks():
            known.setdefault(block.key, block.text)
        for key, body in sorted(known.items()):
            tokens = claims_mod.content_tokens(body)
            if not tokens:
                continue
            entries.add(len(entry_keys), tokens)
            entry_keys.append(key)
            entry_by_claim_key[claims_mod.claim_key(tokens)] = key
        # Our diary quoted back in a conversation is our own output, not something said.
        echoes = claims_mod.EchoIndex()
        for entry in diary.entries(diary.read(dreams)):
            for line in entry.body.splitlines():
                echoes.add(line)
        return cls(agent, settings, by_key, index, entries, entry_keys, entry_by_claim_key, echoes)

    def recalled_entry(self, claim: claims_mod.Claim) -> str | None:
        if claim.key in self.entry_by_claim_key:
            return self.entry_by_claim_key[claim.key]
        hit = self.entries.best(claim.tokens)
        return self.entry_keys[hit] if hit is not None else None

    def fold(self, conn: Connection, lines: Sequence[tuple[int, dict[str, Any]]]) -> FoldStats:
        """Fold the claims of new corpus lines into candidates. Signals are not recomputed
        here: touched candidates are marked stale and refreshed once at the end of the run."""
        batch = _Batch()
        now = _now()
        for line_id, row in lines:
            self._gather_line(batch, line_id, row, now)
        real = self._insert_new(conn, batch.pending)
        touched = {real.get(cid, cid) for cid, _, _ in batch.evidence}
        mark_stale(conn, touched.difference(real.values()))
        _set_where_ids(conn, _MARK_CUE, batch.cue)
        self._write_evidence(conn, batch.evidence, real)
        if batch.recalls:
            conn.execute(insert_ignore(conn, RECALLS), batch.recalls)
        return FoldStats(
            touched=frozenset(touched),
            echoes=batch.echoes,
            candidates_new=len(batch.pending),
            recalls=len(batch.recalls),
        )

    def _gather_line(self, batch: _Batch, line_id: int, row: dict[str, Any], now: datetime) -> None:
        """One line's recalls and claims, each claim tied to its candidate (a new one pending)."""
        body = row["text"]
        if self.echoes.contains_echo(body):
            batch.echoes += 1
            return
        if "<!--" in body:
            body = self._gather_quoted_blocks(batch, line_id, row, body)
        cs = self.settings.candidates
        for claim in claims_mod.extract(
            body, min_words=cs.min_claim_words, max_words=cs.max_claim_words
        ):
            entry = self.recalled_entry(claim)
            if entry is not None:
                batch.recalls.append(self._recall(entry, line_id, row))
                continue
            batch.evidence.append((self._candidate_of(batch, claim, now), line_id, row))

    def _gather_quoted_blocks(
        self, batch: _Batch, line_id: int, row: dict[str, Any], body: str
    ) -> str:
        """Recall the entries whose MEMORY.md blocks the line quotes; returns the line with
        every quoted block taken out. A whole block quoted back is our own output: a recall
        of that entry, and none of its words are a claim (invariant 6). A forged block (a key
        we never wrote) is dropped from claims too, but recalls nothing."""
        for m in QUOTED_BLOCK.finditer(body):
            if m["key"] in self.known_keys:
                batch.recalls.append(self._recall(m["key"], line_id, row))
        return QUOTED_BLOCK.sub(" ", body)

    def _recall(self, entry: str, line_id: int, row: dict[str, Any]) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "entry_key": entry,
            "corpus_line_id": line_id,
            "session_id": row["session_id"],
            "observed_at": row["ts"],
        }

    def _candidate_of(self, batch: _Batch, claim: claims_mod.Claim, now: datetime) -> int:
        """The candidate a claim is evidence for: the one with its key, else the most similar,
        else a new one of this batch (a negative id until it is inserted)."""
        cid = self.by_key.get(claim.key)
        if cid is None:
            cid = self.index.best(claim.tokens)
        if cid is None:
            cid = -(len(batch.pending) + 1)
            batch.pending.append(
                {
                    "agent": self.agent,
                    "key": claim.key,
                    "text": claim.text,
                    "tokens": " ".join(sorted(claim.tokens)),
                    "durable_cue": claim.durable_cue,
                    "updated_at": now,
                    "stale": True,
                }
            )
            self.by_key[claim.key] = cid
            self.index.add(cid, claim.tokens)
        elif claim.durable_cue and cid > 0:
            batch.cue.add(cid)
        return cid

    def _insert_new(self, conn: Connection, pending: list[dict[str, Any]]) -> dict[int, int]:
        """Insert the batch's new candidates; returns their real ids by pending id, and puts
        the real ids in the folder's indexes."""
        real: dict[int, int] = {}
        if not pending:
            return real
        conn.execute(_INSERT_NEW, pending)
        keys = [p["key"] for p in pending]
        ids: dict[str, int] = {}
        for chunk in _chunks(keys):
            ids.update(conn.execute(_IDS_OF_KEYS, {"agent": self.agent, "keys": chunk}).all())
        for n, p in enumerate(pending, 1):
            real[-n] = ids[p["key"]]
            self.by_key[p["key"]] = ids[p["key"]]
            self.index.rename(-n, ids[p["key"]])
        return real

    def _write_evidence(
        self,
        conn: Connection,
        evidence: list[tuple[int, int, dict[str, Any]]],
        real: dict[int, int],
    ) -> None:
        if not evidence:
            return
        conn.execute(
            insert_ignore(conn, CANDIDATE_EVIDENCE),
            [
                {
                    "candidate_id": real.get(cid, cid),
                    "corpus_line_id": line_id,
                    "agent": self.agent,
                    "session_id": row["session_id"],
                    "day": row["day"],
                    "origin_class": row["origin_class"],
                }
                for cid, line_id, row in evidence
            ],
        )


# A new candidate names only these columns; the others take the defaults of the table's DDL
# (the models' defaults: a test checks they agree), so SQLAlchemy does not fill a dozen
# defaults per row in Python. Same SQLAlchemy types, so values bind as before.
_NEW_COLUMNS = ("agent", "key", "text", "tokens", "durable_cue", "updated_at", "stale")
_INSERT_NEW = insert(
    table(CANDIDATES.name, *(column(c, CANDIDATES.c[c].type) for c in _NEW_COLUMNS))
)
# Statements built once (building one costs more than SQLite spends running it).
_IDS_OF_KEYS = select(CANDIDATES.c.key, CANDIDATES.c.id).where(
    and_(
        CANDIDATES.c.agent == bindparam("agent"),
        CANDIDATES.c.key.in_(bindparam("keys", expanding=True)),
    )
)


def _set_where_ids(conn: Connection, stmt: Any, ids: Iterable[int]) -> None:
    for chunk in _chunks(sorted(set(ids))):
        conn.execute(stmt, {"ids": chunk})


# A managed entry as it looks in a corpus line (whitespace collapsed to single spaces): a
# legacy block, or a compact line "- text <!-- m:... -->" (its line break is gone, so it
# starts at a dash after a space or at the start; the text stops at the first "<", as
# entry text has no markup). The conditional closes a block only where one was opened.
# The text is possessive and bounded: each dash costs at most one scan of an entry's length.
QUOTED_BLOCK = re.compile(
    r"(?:(?P<block><!--\s*dreaming:entry\s+)|(?<!\S)-\s[^<]{1,2000}+<!--\s*)"
    r"(?P<key>m:[0-9a-f]{16})\s*-->"
    r"(?(block).*?<!--\s*/\s*dreaming:entry\s*-->)",
    re.IGNORECASE | re.DOTALL,
)
_IDS = CANDIDATES.c.id.in_(bindparam("ids", expanding=True))
_MARK_STALE = update(CANDIDATES).where(_IDS).values(stale=True)
_MARK_CUE = update(CANDIDATES).where(_IDS).values(durable_cue=True)


def mark_stale(conn: Connection, ids: Iterable[int]) -> None:
    _set_where_ids(conn, _MARK_STALE, ids)


def _chunks(items: Sequence[T], size: int = 500) -> Iterable[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _joined_evidence() -> Any:
    return CANDIDATE_EVIDENCE.join(
        CORPUS_LINES, CORPUS_LINES.c.id == CANDIDATE_EVIDENCE.c.corpus_line_id
    )


def refresh_stale(conn: Connection, agent: str) -> int:
    """Refresh every candidate light marked stale (in this run, or in one a crash cut short)."""
    ids = [
        cid
        for (cid,) in conn.execute(
            select(CANDIDATES.c.id).where(and_(CANDIDATES.c.agent == agent, CANDIDATES.c.stale))
        )
    ]
    return refresh_candidates(conn, agent, ids) if ids else 0


def refresh_candidates(conn: Connection, agent: str, ids: Iterable[int]) -> int:
    """Recompute the stored signals of candidates from their evidence. Candidates left with
    no evidence (their lines were removed) and never promoted are deleted. Returns updated.

    Set-based: one UPDATE ... FROM (an aggregate of the evidence) and one DELETE per chunk of
    ids, so the signals never travel through Python (both SQLite and PostgreSQL run it)."""
    updated = 0
    ordered = sorted(set(ids))
    as_int = CORPUS_LINES.c.line.type
    for chunk in _chunks(ordered):
        stats = (
            select(
                CANDIDATE_EVIDENCE.c.candidate_id.label("cid"),
                func.count(func.distinct(CANDIDATE_EVIDENCE.c.session_id)).label("sessions"),
                func.count(func.distinct(CANDIDATE_EVIDENCE.c.day)).label("days"),
                func.sum(
                    (CANDIDATE_EVIDENCE.c.origin_class == OriginClass.OWNER).cast(type_=as_int)
                ).label("own"),
                func.sum(
                    (CANDIDATE_EVIDENCE.c.origin_class == OriginClass.AGENT).cast(type_=as_int)
                ).label("agt"),
                func.sum(
                    (CANDIDATE_EVIDENCE.c.origin_class == OriginClass.UNTRUSTED).cast(type_=as_int)
                ).label("untr"),
                func.sum(
                    (CANDIDATE_EVIDENCE.c.origin_class == OriginClass.SYSTEM).cast(type_=as_int)
                ).label("sysl"),
                func.count().label("n"),
                func.min(CORPUS_LINES.c.ts).label("first_ts"),
                func.max(CORPUS_LINES.c.ts).label("last_ts"),
            )
            .select_from(_joined_evidence())
            .where(CANDIDATE_EVIDENCE.c.candidate_id.in_(chunk))
            .group_by(CANDIDATE_EVIDENCE.c.candidate_id)
            .subquery()
        )
        result = conn.execute(
            update(CANDIDATES)
            .where(CANDIDATES.c.id == stats.c.cid)
            .values(
                sessions=stats.c.sessions,
                days=stats.c.days,
                owner_lines=func.coalesce(stats.c.own, 0),
                agent_lines=func.coalesce(stats.c.agt, 0),
                untrusted_lines=func.coalesce(stats.c.untr, 0),
                system_lines=func.coalesce(stats.c.sysl, 0),
                evidence_count=stats.c.n,
                first_seen=stats.c.first_ts,
                last_seen=stats.c.last_ts,
                updated_at=_now(),
                stale=False,
            )
        )
        updated += result.rowcount
        # Left with no evidence: gone, unless a decision was taken on it.
        conn.execute(
            delete(CANDIDATES).where(
                and_(
                    CANDIDATES.c.id.in_(chunk),
                    CANDIDATES.c.status == CandidateStatus.PENDING,
                    ~select(CANDIDATE_EVIDENCE.c.candidate_id)
                    .select_from(_joined_evidence())
                    .where(CANDIDATE_EVIDENCE.c.candidate_id == CANDIDATES.c.id)
                    .exists(),
                )
            )
        )
    return updated


def assess_new(conn: Connection, agent: str, settings: Settings) -> int:
    """Read the salience of candidates not yet assessed (new ones, and rows from before
    salience existed). Once per candidate: its text does not change. Returns how many."""
    lexicon = salience_mod.lexicon_for(settings.salience.extra())
    wanted = and_(CANDIDATES.c.agent == agent, CANDIDATES.c.features.is_(None))
    if not settings.deep.promote_agent_only:
        # What only the agent said is never promoted on its own: it is read once the owner
        # says it too. Agents talk far more than their owners, so this is most of the work.
        wanted = and_(wanted, CANDIDATES.c.owner_lines > 0)
    rows = conn.execute(select(CANDIDATES.c.id, CANDIDATES.c.text).where(wanted)).all()
    changes = []
    for cid, text in rows:
        found = salience_mod.assess(text, lexicon)
        changes.append({"cid": cid, "salience": found.value, "features": found.names()})
    if changes:
        conn.execute(_SET_SALIENCE, changes)
    return len(changes)


_SET_SALIENCE = (
    update(CANDIDATES)
    .where(CANDIDATES.c.id == bindparam("cid"))
    .values(salience=bindparam("salience"), features=bindparam("features"))
)


def rescore(conn: Connection, agent: str, settings: Settings) -> int:
    """Score every candidate against the agent's clock. Returns the number pending."""
    assess_new(conn, agent, settings)
    clock = read_clock(conn, agent)
    half_life = settings.candidates.recency_half_life_days
    c = CANDIDATES.c
    rows = conn.execute(
        select(
            c.id,
            c.sessions,
            c.days,
            c.owner_lines,
            c.agent_lines,
            c.untrusted_lines,
            c.system_lines,
            c.last_seen,
            c.durable_cue,
            c.rem_boost,
            c.status,
            c.score,
            c.salience,
            c.features,
            c.tokens,
            func.length(c.text).label("chars"),
        ).where(c.agent == agent)
    ).all()
    # Rarity is relative to the whole corpus, so it is read over every candidate each time.
    rarity = Rarity(r.tokens.split() for r in rows)
    parse = functools.lru_cache(maxsize=256)(salience_mod.parse_features)
    pending = 0
    changes = []
    for r in rows:
        features = parse(r.features)
        value = score(
            Signals(
                sessions=r.sessions,
                days=r.days,
                owner_lines=r.owner_lines,
                agent_lines=r.agent_lines,
                untrusted_lines=r.untrusted_lines,
                system_lines=r.system_lines,
                last_seen=r.last_seen,
                durable_cue=bool(r.durable_cue),
                rem_boost=r.rem_boost,
                salience=r.salience or 0.0,
                features=features,
                rarity=rarity.of(r.tokens.split()) if r.salience else 0.0,
                chars=r.chars or 0,
            ),
            clock,
            half_life,
        )
        if r.status == CandidateStatus.PENDING:
            pending += 1
        if value != r.score:
            changes.append({"cid": r.id, "score": value})
    if changes:
        conn.execute(update(CANDIDATES).where(CANDIDATES.c.id == bindparam("cid")), changes)
    return pending


def read_clock(conn: Connection, agent: str) -> datetime | None:
    value = state.get(conn, agent, StateKey.CLOCK)
    return datetime.fromisoformat(value) if value else None


def advance_clock(conn: Connection, agent: str, newest: datetime | None) -> None:
    if newest is None:
        return
    current = read_clock(conn, agent)
    if current is not None and current >= newest:
        return
    state.put(conn, agent, StateKey.CLOCK, newest.isoformat())


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
    rescore(conn, agent, settings)
    conn.execute(delete(RECALLS).where(recalls_of(agent, sessions, line_ids)))


def _rederive_text(conn: Connection, cid: int, wanted: frozenset[str], settings: Settings) -> None:
    """A candidate kept sessions still support took its text and word bag from the first line
    that said it, which may be purged: take them again from the claim of a remaining line
    closest to its words (the first of equals, lines in time order); none: it goes."""
    cs = settings.candidates
    lines = conn.execute(
        select(CORPUS_LINES.c.text)
        .select_from(_joined_evidence())
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
