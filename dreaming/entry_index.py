"""The search index over live entries (SQLite FTS5), used to show the model related entries.

Kept in step with the `entries` table inside the same transactions, so it never lists an
entry that is gone (a purge must reach it too: invariant 4).
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from dreaming.claims import query_words


def index_entry(conn: Connection, agent: str, key: str, body: str) -> None:
    remove_entry(conn, agent, key)
    conn.execute(
        text("INSERT INTO entries_fts (agent, key, text) VALUES (:a, :k, :t)"),
        {"a": agent, "k": key, "t": body},
    )
    # Not RETURNING: SQLite answers -1 for a virtual table's rowid there.
    rowid = conn.execute(text("SELECT last_insert_rowid()")).scalar_one()
    conn.execute(
        text("INSERT INTO entry_index_rows (agent, key, fts_rowid) VALUES (:a, :k, :r)"),
        {"a": agent, "k": key, "r": rowid},
    )


def remove_entry(conn: Connection, agent: str, key: str) -> None:
    rowid = conn.execute(
        text("SELECT fts_rowid FROM entry_index_rows WHERE agent = :a AND key = :k"),
        {"a": agent, "k": key},
    ).scalar()
    if rowid is None:
        return
    conn.execute(text("DELETE FROM entries_fts WHERE rowid = :r"), {"r": rowid})
    conn.execute(
        text("DELETE FROM entry_index_rows WHERE agent = :a AND key = :k"), {"a": agent, "k": key}
    )


def search(conn: Connection, agent: str, query_text: str, limit: int) -> list[str]:
    """Keys of the live entries most related to `query_text`, best first."""
    # Unstemmed words: the index's porter tokenizer stems both sides the same way.
    tokens = sorted(query_words(query_text))
    if not tokens or limit <= 0:
        return []
    # Every token quoted: user text must never be parsed as FTS5 query syntax.
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)
    rows = conn.execute(
        text(
            "SELECT key FROM entries_fts WHERE entries_fts MATCH :m AND agent = :a "
            "ORDER BY bm25(entries_fts) LIMIT :n"
        ),
        {"m": match, "a": agent, "n": limit},
    )
    return [r[0] for r in rows]


def all_keys(conn: Connection, agent: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(text("SELECT key FROM entries_fts WHERE agent = :a"), {"a": agent})
    ]
