"""Which state backend a test runs on: per-agent SQLite files (the default) or one shared
PostgreSQL database. Tests opt in through the parametrized `backend` fixture (conftest.py),
which sets CURRENT; the shared helpers (deep_helpers.build_state, tree_hash) consult it, so a
whole module runs on both backends by asking for that one fixture."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, create_engine, text


@dataclass(frozen=True)
class Backend:
    name: str  # "sqlite" | "postgres"
    url: str | None = None  # SQLAlchemy URL of the test's own PostgreSQL database

    def configure(self, root: Path) -> None:
        """Point the state folder's dreaming.toml at this backend."""
        if self.url is None:
            return
        config = root / "dreaming.toml"
        existing = config.read_text() if config.exists() else ""
        config.write_text(f'database_url = "{self.url}"\n' + existing)

    def dump(self) -> str | None:
        """Every row of every table, in a stable order (None for SQLite: the files hold it)."""
        if self.url is None:
            return None
        engine: Engine = create_engine(self.url)
        try:
            with engine.connect() as conn:
                tables = [
                    r[0]
                    for r in conn.execute(
                        text(
                            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                            "ORDER BY tablename"
                        )
                    )
                ]
                parts = []
                for table in tables:
                    rows = conn.execute(text(f'SELECT * FROM "{table}"')).all()
                    parts.append(table + "\n" + "\n".join(sorted(repr(tuple(r)) for r in rows)))
            return "\n".join(parts)
        finally:
            engine.dispose()

    def wipe(self) -> None:
        """Lose the whole shared database (every table), as deleting SQLite files would."""
        if self.url is None:
            return
        engine = create_engine(self.url)
        try:
            with engine.begin() as conn:
                conn.execute(text("DROP SCHEMA public CASCADE"))
                conn.execute(text("CREATE SCHEMA public"))
        finally:
            engine.dispose()

    def dump_hash(self) -> str | None:
        dump = self.dump()
        return None if dump is None else hashlib.sha256(dump.encode()).hexdigest()


CURRENT = Backend("sqlite")
