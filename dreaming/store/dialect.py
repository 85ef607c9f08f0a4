"""What differs between the two backends, in one place: SQLite files and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def upsert(conn: Connection, table: Table) -> sqlite.Insert | postgresql.Insert:
    """An INSERT that understands ON CONFLICT on this connection's backend. Both dialects
    spell `on_conflict_do_nothing` / `on_conflict_do_update(index_elements=..., set_=...)`
    the same way, so call sites stay backend-neutral."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


_INSERT_IGNORE: dict[tuple[str, str], sqlite.Insert | postgresql.Insert] = {}


def insert_ignore(conn: Connection, table: Table) -> sqlite.Insert | postgresql.Insert:
    """`INSERT ... ON CONFLICT DO NOTHING` into `table`, built once per backend and table
    (light commits one per transcript file: building the statement anew each time shows)."""
    key = (conn.dialect.name, table.name)
    stmt = _INSERT_IGNORE.get(key)
    if stmt is None:
        stmt = _INSERT_IGNORE[key] = upsert(conn, table).on_conflict_do_nothing()
    return stmt


def is_postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"
