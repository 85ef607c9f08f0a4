"""The search index over live entries, used to show the model related entries: SQLite's
FTS5 in an agent's file, PostgreSQL's full-text search (a stored tsvector) in a fleet.

Kept in step with the `entries` table inside the same transactions, so it never lists an
entry that is gone (a purge must reach it too: invariant 4).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from sqlalchemy import Connection, bindparam, text

from dreaming.ingest.claims import STOPWORDS, query_words, words
from dreaming.store.bulk import execute_many
from dreaming.store.dialect import is_postgres
from dreaming.store.statuses import EntryStatus


def index_entry(conn: Connection, agent: str, key: str, body: str) -> None:
    """(Re)index `key` with `body`, replacing any row it has."""
    remove_entry(conn, agent, key)
    add_entry(conn, agent, key, body)


def add_entry(conn: Connection, agent: str, key: str, body: str) -> None:
    """Index an entry that has no row yet (a new entry)."""
    conn.execute(
        _INSERT_FTS,
        {"a": agent, "k": key, "t": body},
    )
    if is_postgres(conn):  # the key is the row's primary key there: nothing more to keep
        return
    # Not RETURNING: SQLite answers -1 for a virtual table's rowid there.
    rowid = conn.execute(_LAST_ROWID).scalar_one()
    conn.execute(
        _INSERT_ROW_OF,
        {"a": agent, "k": key, "r": rowid},
    )


def add_entries(conn: Connection, agent: str, entries: Sequence[tuple[str, str]]) -> None:
    """Index new entries (key, text), none of which has a row yet, in a few statements."""
    if not entries:
        return
    if is_postgres(conn):
        conn.execute(
            _INSERT_FTS,
            [{"a": agent, "k": k, "t": t} for k, t in entries],
        )
        return
    # Rowids chosen here, past the last one, so the key -> rowid rows need no lookup.
    last = conn.execute(_LAST_FTS_ROWID).scalar()
    rows = [
        {"r": (last or 0) + n, "a": agent, "k": k, "t": t} for n, (k, t) in enumerate(entries, 1)
    ]
    execute_many(conn, _INSERT_FTS_AT, rows)
    execute_many(conn, _INSERT_ROW_OF, rows)


def remove_entry(conn: Connection, agent: str, key: str) -> None:
    if is_postgres(conn):
        conn.execute(_DELETE_FTS_OF, {"a": agent, "k": key})
        return
    rowid = conn.execute(
        _ROW_OF,
        {"a": agent, "k": key},
    ).scalar()
    if rowid is None:
        return
    conn.execute(_DELETE_FTS_AT, {"r": rowid})
    conn.execute(_DELETE_ROW, {"a": agent, "k": key})


def search(conn: Connection, agent: str, query_text: str, limit: int) -> list[str]:
    """Keys of the live entries most related to `query_text`, best first."""
    # Unstemmed words: the index's porter tokenizer stems both sides the same way.
    tokens = sorted(query_words(query_text))
    if not tokens or limit <= 0:
        return []
    if is_postgres(conn):
        return _search_postgres(conn, agent, tokens, limit)
    rows = conn.execute(
        text(
            "SELECT key FROM entries_fts WHERE entries_fts MATCH :m AND agent = :a "
            "ORDER BY bm25(entries_fts) LIMIT :n"
        ),
        {"m": _fts5_match(tokens), "a": agent, "n": limit},
    )
    return [r[0] for r in rows]


def _search_postgres(conn: Connection, agent: str, tokens: list[str], limit: int) -> list[str]:
    # Each word through plainto_tsquery, which never parses operators: user text cannot
    # become tsquery syntax. OR-ed together, as the FTS5 query is.
    parts = " || ".join(f"plainto_tsquery('english', :w{i})" for i in range(len(tokens)))
    params: dict[str, object] = {f"w{i}": t for i, t in enumerate(tokens)}
    rows = conn.execute(
        text(
            f"SELECT key FROM entries_fts, (SELECT {parts}) AS q(query) "
            "WHERE agent = :a AND tsv @@ query "
            "ORDER BY ts_rank_cd(tsv, query) DESC, key LIMIT :n"
        ),
        params | {"a": agent, "n": limit},
    )
    return [r[0] for r in rows]


def _fts5_match(tokens: Iterable[str]) -> str:
    """An FTS5 query OR-ing `tokens`, each quoted: user text must never be parsed as FTS5
    query syntax (`"`, `*`, `^`, `-`, `:`, `NEAR`, `AND`/`OR`/`NOT`, parentheses)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)


def search_words(query_text: str) -> list[str]:
    """The words a person's query is searched by: its content words, numbers included
    (`eu-west-1`), else, for a query of nothing but stopwords, every word it has. Only word
    characters: nothing of the query's punctuation reaches the index's query syntax."""
    found = list(dict.fromkeys(w.casefold() for w in words(query_text)))
    content = [w for w in found if w not in STOPWORDS]
    return content or found


def ranked(
    conn: Connection,
    agent: str,
    tokens: Collection[str],
    limit: int,
    statuses: Collection[str] = (EntryStatus.LIVE,),
) -> list[tuple[str, float]]:
    """(key, score) of the agent's indexed entries that hold any of `tokens`, best first
    (higher scores are better: FTS5's bm25 negated, PostgreSQL's ts_rank_cd). Only entries
    whose `entries.status` is in `statuses`: the index holds live entries today; an entry
    status that stays in the index (entries moved out of MEMORY.md to an archive) is
    searched by passing its status here."""
    if not tokens or limit <= 0 or not statuses:
        return []
    params: dict[str, object] = {"a": agent, "n": limit, "s": [str(s) for s in statuses]}
    if is_postgres(conn):
        parts = " || ".join(f"plainto_tsquery('english', :w{i})" for i in range(len(tokens)))
        params |= {f"w{i}": t for i, t in enumerate(tokens)}
        query = (
            f"SELECT f.key, ts_rank_cd(f.tsv, q.query) AS score FROM entries_fts f"
            f" JOIN entries e ON e.agent = f.agent AND e.key = f.key, (SELECT {parts}) AS q(query)"
            " WHERE f.agent = :a AND e.status IN :s AND f.tsv @@ q.query"
            " ORDER BY score DESC, f.key LIMIT :n"
        )
    else:
        params["m"] = _fts5_match(tokens)
        query = (
            "SELECT entries_fts.key, -bm25(entries_fts) AS score FROM entries_fts"
            " JOIN entries e ON e.agent = entries_fts.agent AND e.key = entries_fts.key"
            " WHERE entries_fts MATCH :m AND entries_fts.agent = :a AND e.status IN :s"
            " ORDER BY score DESC, entries_fts.key LIMIT :n"
        )
    stmt = text(query).bindparams(bindparam("s", expanding=True))
    return [(r[0], float(r[1])) for r in conn.execute(stmt, params)]


_INSERT_FTS = text("INSERT INTO entries_fts (agent, key, text) VALUES (:a, :k, :t)")
_LAST_ROWID = text("SELECT last_insert_rowid()")
_LAST_FTS_ROWID = text("SELECT rowid FROM entries_fts ORDER BY rowid DESC LIMIT 1")
_DELETE_FTS_OF = text("DELETE FROM entries_fts WHERE agent = :a AND key = :k")
_ROW_OF = text("SELECT fts_rowid FROM entry_index_rows WHERE agent = :a AND key = :k")
_DELETE_FTS_AT = text("DELETE FROM entries_fts WHERE rowid = :r")
_DELETE_ROW = text("DELETE FROM entry_index_rows WHERE agent = :a AND key = :k")
_INSERT_FTS_AT = text("INSERT INTO entries_fts (rowid, agent, key, text) VALUES (:r, :a, :k, :t)")
_INSERT_ROW_OF = text("INSERT INTO entry_index_rows (agent, key, fts_rowid) VALUES (:a, :k, :r)")
