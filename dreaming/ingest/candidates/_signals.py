"""Signals and scores: a candidate's counts recomputed from its evidence rows (never
incremented in place), its salience assessed once, its score, and the clock of the newest
message read that recency is measured from."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Delete,
    Update,
    and_,
    bindparam,
    delete,
    func,
    select,
    update,
)

from dreaming.config import Settings
from dreaming.forking import split_map
from dreaming.ingest import claims as claims_mod
from dreaming.ingest import salience as salience_mod
from dreaming.ingest.admission import OriginClass
from dreaming.ingest.candidates._common import chunks, joined_evidence, utc_now
from dreaming.ingest.scoring import Rarity, Signals, score
from dreaming.store import state
from dreaming.store.bulk import execute_many
from dreaming.store.state import StateKey
from dreaming.store.statuses import CandidateStatus
from dreaming.store.tables import (
    CANDIDATE_EVIDENCE,
    CANDIDATES,
    CORPUS_LINES,
)


def refresh_stale(conn: Connection, agent: str) -> int:
    """Refresh every candidate light marked stale (in this run, or in one a crash cut short)."""
    ids = [cid for (cid,) in conn.execute(_STALE, {"agent": agent})]
    return refresh_candidates(conn, agent, ids) if ids else 0


# The statements of this module are built once (see `store.compiled`).
_STALE = select(CANDIDATES.c.id).where(
    and_(CANDIDATES.c.agent == bindparam("agent"), CANDIDATES.c.stale)
)


def refresh_candidates(conn: Connection, agent: str, ids: Iterable[int]) -> int:
    """Recompute the stored signals of candidates from their evidence. Candidates left with
    no evidence (their lines were removed) and never promoted are deleted. Returns updated.

    Set-based: one UPDATE ... FROM (an aggregate of the evidence) and one DELETE per chunk of
    ids, so the signals never travel through Python (both SQLite and PostgreSQL run it)."""
    updated = 0
    ordered = sorted(set(ids))
    for chunk in chunks(ordered):
        result = conn.execute(_REFRESH, {"ids": chunk, "now": utc_now()})
        updated += result.rowcount
        conn.execute(_DROP_UNSUPPORTED, {"ids": chunk})
    return updated


def _refresh_statements() -> tuple[Update, Delete]:
    """The UPDATE ... FROM (an aggregate of the evidence of the candidates `ids`) and the
    DELETE of those left with no evidence, never promoted."""
    as_int = CORPUS_LINES.c.line.type

    def lines_of(origin: OriginClass) -> Any:
        """How many of a candidate's evidence lines are of `origin`."""
        return func.sum((CANDIDATE_EVIDENCE.c.origin_class == origin).cast(type_=as_int))

    stats = (
        select(
            CANDIDATE_EVIDENCE.c.candidate_id.label("cid"),
            func.count(func.distinct(CANDIDATE_EVIDENCE.c.session_id)).label("sessions"),
            func.count(func.distinct(CANDIDATE_EVIDENCE.c.day)).label("days"),
            lines_of(OriginClass.OWNER).label("own"),
            lines_of(OriginClass.AGENT).label("agt"),
            lines_of(OriginClass.UNTRUSTED).label("untr"),
            lines_of(OriginClass.SYSTEM).label("sysl"),
            func.count().label("n"),
            func.min(CORPUS_LINES.c.ts).label("first_ts"),
            func.max(CORPUS_LINES.c.ts).label("last_ts"),
        )
        .select_from(joined_evidence())
        .where(CANDIDATE_EVIDENCE.c.candidate_id.in_(bindparam("ids", expanding=True)))
        .group_by(CANDIDATE_EVIDENCE.c.candidate_id)
        .subquery()
    )
    refresh = (
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
            updated_at=bindparam("now", type_=CANDIDATES.c.updated_at.type),
            stale=False,
        )
    )
    # Left with no evidence: gone, unless a decision was taken on it.
    drop = delete(CANDIDATES).where(
        and_(
            CANDIDATES.c.id.in_(bindparam("ids", expanding=True)),
            CANDIDATES.c.status == CandidateStatus.PENDING,
            ~select(CANDIDATE_EVIDENCE.c.candidate_id)
            .select_from(joined_evidence())
            .where(CANDIDATE_EVIDENCE.c.candidate_id == CANDIDATES.c.id)
            .exists(),
        )
    )
    return refresh, drop


_REFRESH, _DROP_UNSUPPORTED = _refresh_statements()


# What light had assessed ahead (`phases.light._assess_ahead`): each text's salience and
# features, as `assess` gives them with the lexicon that is also the settings' now.
Assessed = Callable[[salience_mod.Lexicon], Mapping[str, tuple[float, str]]]


def assess_new(
    conn: Connection, agent: str, settings: Settings, ahead: Assessed | None = None
) -> list[int]:
    """Read the salience of candidates not yet assessed (new ones, and rows from before
    salience existed). Once per candidate: its text does not change. Returns their ids.
    `ahead`: the answers already made for some texts (the rest are worked out here)."""
    # What only the agent said is never promoted on its own: it is read once the owner says
    # it too. Agents talk far more than their owners, so this is most of the work.
    query = _UNASSESSED if settings.deep.promote_agent_only else _UNASSESSED_OWNERS
    rows = conn.execute(query, {"agent": agent}).all()
    if not rows:
        return []  # the lexicon takes most of a second to build: not for nothing (a purge)
    lexicon = salience_mod.lexicon_for(settings.salience.extra())

    def assessed(text: str) -> tuple[float, str]:
        found = salience_mod.assess(text, lexicon)
        return found.value, found.names()

    made = ahead(lexicon) if ahead is not None else {}
    texts = [text for _, text in rows]
    todo = [text for text in texts if text not in made]
    # A first night over a backlog assesses thousands (about 0.1 ms each): half of them on
    # the second core (`forking.split_map`), in a forked child that has the lexicon.
    more = dict(zip(todo, split_map(assessed, todo, min_items=SPLIT_FROM), strict=True))
    found = [made[text] if text in made else more[text] for text in texts]
    changes = [
        {"cid": cid, "salience": value, "features": names}
        for (cid, _), (value, names) in zip(rows, found, strict=True)
    ]
    if changes:
        execute_many(conn, _SET_SALIENCE, changes)
    return [c["cid"] for c in changes]


# From this many texts to assess, a forked child takes half (fewer: the fork costs more).
SPLIT_FROM = 500

_UNASSESSED = select(CANDIDATES.c.id, CANDIDATES.c.text).where(
    and_(CANDIDATES.c.agent == bindparam("agent"), CANDIDATES.c.features.is_(None))
)
_UNASSESSED_OWNERS = _UNASSESSED.where(CANDIDATES.c.owner_lines > 0)
_SET_SCORE = update(CANDIDATES).where(CANDIDATES.c.id == bindparam("cid"))
_SET_SALIENCE = (
    update(CANDIDATES)
    .where(CANDIDATES.c.id == bindparam("cid"))
    .values(salience=bindparam("salience"), features=bindparam("features"))
)


def rescore(
    conn: Connection,
    agent: str,
    settings: Settings,
    only: Collection[int] | None = None,
    ahead: Assessed | None = None,
) -> int:
    """Score every candidate (or only those in `only`, and any assessed just now, against
    the whole corpus's word rarity) on the agent's clock. Returns how many of them are
    pending. Scoring every one records the settings it scored with (`scores_current`).
    `ahead`: see `assess_new`."""
    assessed = assess_new(conn, agent, settings, ahead)
    clock = read_clock(conn, agent)
    half_life = settings.candidates.recency_half_life_days
    if only is None:
        rows = conn.execute(_SCORED, {"agent": agent}).all()
        state.put(conn, agent, StateKey.SCORED_WITH, _scoring(settings))
    elif not (only := {*only, *assessed}):
        return 0
    else:
        rows = conn.execute(_SCORED_ONLY, {"agent": agent, "ids": sorted(only)}).all()
    # Rarity is relative to the whole corpus, so it is read over every candidate each time.
    # Each row's words are cut once: a full rescore reads the rarity over its own rows.
    words = [_words_of(r[_TOKENS_AT]) for r in rows]
    rarity = Rarity(words if only is None else map(_words_of, _all_tokens(conn, agent)))
    parse = functools.lru_cache(maxsize=256)(salience_mod.parse_features)
    pending = 0
    changes = []
    # Rows unpacked by position, in `_SCORED`'s order (a column more or fewer fails here): a
    # row's attributes are looked up by name, and a full rescore reads sixteen of each.
    for row, said in zip(rows, words, strict=True):
        (
            cid,
            sess,
            days,
            own,
            agt,
            untr,
            sysl,
            last,
            cue,
            boost,
            status,
            old,
            sal,
            feats,
            _,
            chars,
        ) = row
        value = score(
            Signals(
                sessions=sess,
                days=days,
                owner_lines=own,
                agent_lines=agt,
                untrusted_lines=untr,
                system_lines=sysl,
                last_seen=last,
                durable_cue=bool(cue),
                rem_boost=boost,
                salience=sal or 0.0,
                features=parse(feats),
                rarity=rarity.of(said) if sal else 0.0,
                chars=chars or 0,
            ),
            clock,
            half_life,
        )
        if status == CandidateStatus.PENDING:
            pending += 1
        if value != old:
            changes.append({"cid": cid, "score": value})
    if changes:
        execute_many(conn, _SET_SCORE, changes)
    return pending


_SCORED = select(
    CANDIDATES.c.id,
    CANDIDATES.c.sessions,
    CANDIDATES.c.days,
    CANDIDATES.c.owner_lines,
    CANDIDATES.c.agent_lines,
    CANDIDATES.c.untrusted_lines,
    CANDIDATES.c.system_lines,
    CANDIDATES.c.last_seen,
    CANDIDATES.c.durable_cue,
    CANDIDATES.c.rem_boost,
    CANDIDATES.c.status,
    CANDIDATES.c.score,
    CANDIDATES.c.salience,
    CANDIDATES.c.features,
    CANDIDATES.c.tokens,
    func.length(CANDIDATES.c.text).label("chars"),
).where(CANDIDATES.c.agent == bindparam("agent"))
_TOKENS_AT = [c.name for c in _SCORED.selected_columns].index("tokens")
_SCORED_ONLY = _SCORED.where(CANDIDATES.c.id.in_(bindparam("ids", expanding=True)))


def scores_current(conn: Connection, agent: str, settings: Settings) -> bool:
    """Whether every stored score is what scoring them all again would give: no fold or
    purge has left a rescore pending since the last full one (which also moved the clock),
    and it scored with the settings of now. Then a change to some candidates (REM's boosts)
    needs only theirs rescored."""
    return state.get(conn, agent, StateKey.RESCORE_PENDING) is None and state.get(
        conn, agent, StateKey.SCORED_WITH
    ) == _scoring(settings)


def _scoring(settings: Settings) -> str:
    # What `rescore` reads of the settings (the weights are the code's own).
    return f"half-life {settings.candidates.recency_half_life_days!r}"


def _all_tokens(conn: Connection, agent: str) -> Iterable[str]:
    return conn.execute(_TOKENS, {"agent": agent}).scalars()


_TOKENS = select(CANDIDATES.c.tokens).where(CANDIDATES.c.agent == bindparam("agent"))


def read_clock(conn: Connection, agent: str) -> datetime | None:
    value = state.get(conn, agent, StateKey.CLOCK)
    return datetime.fromisoformat(value) if value else None


_UNREAD = datetime.min  # `advance_clock`'s caller does not know the clock: it is read


def advance_clock(
    conn: Connection, agent: str, newest: datetime | None, current: datetime | None = _UNREAD
) -> None:
    """Move the agent's clock to `newest` if that is later; `current` is the clock as the
    caller knows it (light, holding the lock, keeps it) or read here."""
    if newest is None:
        return
    if current is _UNREAD:
        current = read_clock(conn, agent)
    if current is not None and current >= newest:
        return
    state.put(conn, agent, StateKey.CLOCK, newest.isoformat())


def _words_of(tokens: str) -> list[str]:
    # The negation mark is no word: it would make every negated claim look commoner.
    return [t for t in tokens.split() if t != claims_mod.NEGATED]
