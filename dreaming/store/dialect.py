"""What differs between the two backends, in one place: SQLite files and PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import sqlite

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql


def upsert(conn: Connection, table: Table) -> sqlite.Insert | postgresql.Insert:
    """An INSERT that understands ON CONFLICT on this connection's backend. Both dialects
    spell `on_conflict_do_nothing` / `on_conflict_do_update(index_elements=..., set_=...)`
    the same way, so call sites stay backend-neutral."""
    if conn.dialect.name == "postgresql":
        # Imported here: the PostgreSQL dialect costs ~30 ms of every process's start-up,
        # and only fleets (a postgresql:// database_url) ever get here.
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    return sqlite.insert(table)


# Built once per backend, table and columns: light writes several per transcript file it
# commits, and building the statement anew each time shows in the ingest benchmark.
_BUILT: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], Any] = {}


def insert_ignore(conn: Connection, table: Table) -> sqlite.Insert | postgresql.Insert:
    """`INSERT ... ON CONFLICT DO NOTHING` into `table`."""
    key = (conn.dialect.name, table.name, (), ())
    stmt = _BUILT.get(key)
    if stmt is None:
        stmt = _BUILT[key] = upsert(conn, table).on_conflict_do_nothing()
    return stmt


def upsert_replace(
    conn: Connection, table: Table, keys: Sequence[str], columns: Sequence[str]
) -> Any:
    """`INSERT ... ON CONFLICT (keys) DO UPDATE` setting each of `columns` to the value
    inserted: the row is inserted, or replaces the one with its keys."""
    key = (conn.dialect.name, table.name, tuple(keys), tuple(columns))
    stmt = _BUILT.get(key)
    if stmt is None:
        ins = upsert(conn, table)
        stmt = _BUILT[key] = ins.on_conflict_do_update(
            index_elements=list(keys), set_={c: ins.excluded[c] for c in columns}
        )
    return stmt


def is_postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def is_sqlite(conn: Connection) -> bool:
    return conn.dialect.name == "sqlite"
