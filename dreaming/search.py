"""`dreaming entries search`: a person's query over the memory, through the entries' search
index (`dreaming.memory.entry_index`: FTS5 in an agent's file, PostgreSQL full-text search
in a fleet), ranked.

The query is split into words and each word is quoted before it reaches the index, so no
character of it is ever read as query syntax (`"`, `*`, `-`, `NEAR`, an apostrophe). An
entry matches when it holds any of the words; the more of them and the rarer they are, the
higher it ranks.

Which entries are searched is a set of entry statuses (`statuses`, default: live entries).
Entries that leave MEMORY.md for an archive the agent can search join by passing their
status here, once the index keeps them: nothing else changes.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, and_, func, select

from dreaming.memory import entry_index
from dreaming.store.statuses import EntryStatus
from dreaming.store.tables import ENTRIES, ORIGINS

DEFAULT_LIMIT = 10


@dataclass(frozen=True)
class Hit:
    agent: str
    key: str
    text: str
    status: str
    origins: int  # sessions the entry came from
    score: float  # higher is better; comparable within one agent's index

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "key": self.key,
            "text": self.text,
            "status": self.status,
            "origins": self.origins,
            "score": round(self.score, 6),
        }


@dataclass(frozen=True)
class SearchResult:
    query: str
    words: tuple[str, ...]  # what the index was asked for
    agents: tuple[str, ...]
    hits: tuple[Hit, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "words": list(self.words),
            "agents": list(self.agents),
            "hits": [dict(h.to_dict(), rank=i) for i, h in enumerate(self.hits, 1)],
        }


def search_agent(
    conn: Connection,
    agent: str,
    words: Collection[str],
    limit: int,
    statuses: Collection[str] = (EntryStatus.LIVE,),
) -> list[Hit]:
    """The agent's best `limit` entries for `words`, best first."""
    scored = entry_index.ranked(conn, agent, words, limit, statuses)
    if not scored:
        return []
    keys = [k for k, _ in scored]
    rows = {
        r.key: (r.text, r.status)
        for r in conn.execute(
            select(ENTRIES.c.key, ENTRIES.c.text, ENTRIES.c.status).where(
                and_(ENTRIES.c.agent == agent, ENTRIES.c.key.in_(keys))
            )
        )
    }
    counts: dict[str, int] = {
        k: n
        for k, n in conn.execute(
            select(ORIGINS.c.entry_key, func.count())
            .where(and_(ORIGINS.c.agent == agent, ORIGINS.c.entry_key.in_(keys)))
            .group_by(ORIGINS.c.entry_key)
        )
    }
    return [
        Hit(agent, key, rows[key][0], rows[key][1], counts.get(key, 0), score)
        for key, score in scored
        if key in rows
    ]


def search(
    engines: Sequence[tuple[str, Engine]],
    query: str,
    limit: int = DEFAULT_LIMIT,
    statuses: Collection[str] = (EntryStatus.LIVE,),
) -> SearchResult:
    """Search each (agent, engine) and keep the best `limit` hits over all of them."""
    words = entry_index.search_words(query)
    hits: list[Hit] = []
    if words:
        for agent, engine in engines:
            with engine.connect() as conn:
                hits.extend(search_agent(conn, agent, words, limit, statuses))
    hits.sort(key=lambda h: (-h.score, h.agent, h.key))
    return SearchResult(query, tuple(words), tuple(a for a, _ in engines), tuple(hits[:limit]))
