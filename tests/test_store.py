from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from dreaming.errors import LockedError, SchemaTooNewError
from dreaming.store import MIGRATIONS, agent_lock, open_engine, schema_version
from dreaming.store.models import SQLModel


def test_fresh_database_has_every_model_table_and_column(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "a.sqlite")
    insp = inspect(engine)
    for table in SQLModel.metadata.sorted_tables:
        cols = {c["name"] for c in insp.get_columns(table.name)}
        assert cols == {c.name for c in table.columns}, table.name


def test_migrations_are_recorded_and_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    open_engine(path).dispose()
    engine = open_engine(path)
    with engine.connect() as conn:
        names = [r[0] for r in conn.execute(text("SELECT name FROM schema_migrations"))]
    assert names == [n for n, _ in MIGRATIONS]
    assert schema_version() == len(MIGRATIONS)


def test_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    engine = open_engine(path)
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO schema_migrations VALUES ('9999_from_the_future', '2030-01-01')")
        )
    engine.dispose()
    with pytest.raises(SchemaTooNewError, match="newer than this dreaming supports"):
        open_engine(path)


def test_agent_lock_is_exclusive(tmp_path: Path) -> None:
    lock = tmp_path / "locks" / "main.lock"
    with agent_lock(lock, "main", "light"):
        with pytest.raises(LockedError, match="main"):
            with agent_lock(lock, "main", "deep"):
                pass
    with agent_lock(lock, "main", "deep"):
        pass
