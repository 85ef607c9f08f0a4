"""Candidates: folding claims from new corpus lines, their stored signals, and scores.

A candidate's signals are always recomputed from its evidence rows (never incremented in
place), so re-reading a rewritten file or purging a session leaves exact counts behind.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import (
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

from dreaming import claims as claims_mod
from dreaming import diary, memory_file
from dreaming import salience as salience_mod
from dreaming.admission import OriginClass
from dreaming.config import Settings
from dreaming.scoring import Rarity, Signals, score
from dreaming.store.dialect import upsert
from dreaming.store.statuses import CandidateStatus, EntryStatus
from dreaming.store.tables import (
    AGENT_STATE,
    CANDIDATE_EVIDENCE,
    CANDIDATES,
    CORPUS_LINES,
    ENTRIES,
    RECALLS,
)

if TYPE_CHECKING:
    from dreaming.phases.light import LightSummary

CLOCK_KEY = "clock"
T = TypeVar("T")


def _now() -> datetime:
    return datetime.now(UTC)


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

    def fold(
        self, conn: Connection, lines: Sequence[tuple[int, dict[str, Any]]], summary: LightSummary
    ) -> set[int]:
        """Fold the claims of new corpus lines into candidates. Signals are not recomputed
        here: touched candidates are marked stale and refreshed once at the end of the run."""
        cs = self.settings.candidates
        evidence: list[tuple[int, int, dict[str, Any]]] = []  # (candidate or -pending, line, row)
        recalls: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []  # new candidates of this batch, ids -1, -2, ...
        cue: set[int] = set()
        now = _now()
        for line_id, row in lines:
            if self.echoes.contains_echo(row["text"]):
                summary.dropped["echo"] += 1
                continue
            body = row["text"]
            for m in QUOTED_BLOCK.finditer(body) if "<!--" in body else ():
                # A whole MEMORY.md block quoted back is our own output: a recall of that
                # entry, and none of its words are a claim (invariant 6). A forged block
                # (a key we never wrote) is dropped from claims too, but recalls nothing.
                if m["key"] not in self.known_keys:
                    continue
                recalls.append(
                    {
                        "agent": self.agent,
                        "entry_key": m["key"],
                        "corpus_line_id": line_id,
                        "session_id": row["session_id"],
                        "observed_at": row["ts"],
                    }
                )
            if "<!--" in body:
                body = QUOTED_BLOCK.sub(" ", body)
            found = claims_mod.extract(
                body, min_words=cs.min_claim_words, max_words=cs.max_claim_words
            )
            for claim in found:
                entry = self.recalled_entry(claim)
                if entry is not None:
                    recalls.append(
                        {
                            "agent": self.agent,
                            "entry_key": entry,
                            "corpus_line_id": line_id,
                            "session_id": row["session_id"],
                            "observed_at": row["ts"],
                        }
                    )
                    continue
                cid = self.by_key.get(claim.key)
                if cid is None:
                    cid = self.index.best(claim.tokens)
                if cid is None:
                    cid = -(len(pending) + 1)
                    pending.append(
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
                    cue.add(cid)
                evidence.append((cid, line_id, row))
        real: dict[int, int] = {}
        if pending:
            conn.execute(_INSERT_NEW, pending)
            keys = [p["key"] for p in pending]
            ids: dict[str, int] = {}
            for chunk in _chunks(keys):
                ids.update(conn.execute(_IDS_OF_KEYS, {"agent": self.agent, "keys": chunk}).all())
            for n, p in enumerate(pending, 1):
                real[-n] = ids[p["key"]]
                self.by_key[p["key"]] = ids[p["key"]]
                self.index.rename(-n, ids[p["key"]])
            summary.candidates_new += len(pending)
        touched = {real.get(cid, cid) for cid, _, _ in evidence}
        mark_stale(conn, touched.difference(real.values()))
        _set_where_ids(conn, _MARK_CUE, cue)
        if evidence:
            conn.execute(
                _do_nothing_on_conflict(conn, CANDIDATE_EVIDENCE),
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
        if recalls:
            conn.execute(_do_nothing_on_conflict(conn, RECALLS), recalls)
            summary.recalls += len(recalls)
        return touched


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
_INSERT_IGNORE: dict[tuple[str, str], Any] = {}


def _do_nothing_on_conflict(conn: Connection, table: Any) -> Any:
    """`upsert(conn, table).on_conflict_do_nothing()`, built once per backend and table."""
    key = (conn.dialect.name, table.name)
    stmt = _INSERT_IGNORE.get(key)
    if stmt is None:
        stmt = _INSERT_IGNORE[key] = upsert(conn, table).on_conflict_do_nothing()
    return stmt


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


_READ_CLOCK = select(AGENT_STATE.c.value).where(
    and_(AGENT_STATE.c.agent == bindparam("agent"), AGENT_STATE.c.key == CLOCK_KEY)
)
_SET_STATE: dict[str, Any] = {}


def _set_state(conn: Connection) -> Any:
    """Upsert of one agent_state row, built once per backend."""
    stmt = _SET_STATE.get(conn.dialect.name)
    if stmt is None:
        ins = upsert(conn, AGENT_STATE)
        stmt = ins.on_conflict_do_update(
            index_elements=["agent", "key"], set_={"value": ins.excluded.value}
        )
        _SET_STATE[conn.dialect.name] = stmt
    return stmt


def read_clock(conn: Connection, agent: str) -> datetime | None:
    value = conn.execute(_READ_CLOCK, {"agent": agent}).scalar()
    return datetime.fromisoformat(value) if value else None


def advance_clock(conn: Connection, agent: str, newest: datetime | None) -> None:
    if newest is None:
        return
    current = read_clock(conn, agent)
    if current is not None and current >= newest:
        return
    conn.execute(_set_state(conn), {"agent": agent, "key": CLOCK_KEY, "value": newest.isoformat()})
