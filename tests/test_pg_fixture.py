"""The PostgreSQL test fixtures (tests/pg.py, tests/conftest.py) do what PostgreSQL tests rely on.

A fixture that quietly connected to some other server, shared a database between tests, ran
as root or left a postmaster behind would make every PostgreSQL test after it meaningless.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psycopg
import pytest
import sqlalchemy
from sqlalchemy import text

from tests.pg import PgDatabase, PostgresServer, PostgresUnavailable, find_bin_dir


@pytest.mark.postgres
def test_psycopg_connects_and_creates_a_table(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO t VALUES (1, 'a')")
        assert conn.execute("SELECT name FROM t").fetchall() == [("a",)]


@pytest.mark.postgres
def test_sqlalchemy_url_uses_psycopg3_and_creates_a_table(pg_url: str) -> None:
    assert pg_url.startswith("postgresql+psycopg://")
    engine = sqlalchemy.create_engine(pg_url)
    try:
        assert engine.dialect.driver == "psycopg"
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE t (id int PRIMARY KEY)"))
            conn.execute(text("INSERT INTO t VALUES (1), (2)"))
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM t")).scalar_one() == 2
            assert conn.execute(text("SHOW server_encoding")).scalar_one() == "UTF8"
    finally:
        engine.dispose()


_seen_databases: set[str] = set()


@pytest.mark.postgres
@pytest.mark.parametrize("run", [1, 2])
def test_each_test_gets_its_own_empty_database(pg_database: PgDatabase, run: int) -> None:
    # Both runs create the same table: the second would fail if it saw the first's database.
    assert pg_database.name not in _seen_databases
    _seen_databases.add(pg_database.name)
    assert pg_database.name in pg_database.url and pg_database.name in pg_database.dsn
    with psycopg.connect(pg_database.dsn) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
        assert tables == []
        conn.execute("CREATE TABLE isolation_probe (run int)")
        conn.execute("INSERT INTO isolation_probe VALUES (%s)", (run,))


@pytest.mark.postgres
def test_server_runs_unprivileged_and_owns_its_data(pg_server: PostgresServer, pg_dsn: str) -> None:
    # The backend exits when its connection closes, so its /proc entry is read
    # while the connection is still open (reading it afterwards was a race).
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute(
            "SELECT current_setting('data_directory'), pg_backend_pid(), inet_server_addr()::text"
        ).fetchone()
        assert row is not None
        data_dir, backend_pid, server_addr = row
        statuses: dict[int, str] = {}
        if sys.platform.startswith("linux"):
            for pid in (pg_server.pid, backend_pid):
                statuses[pid] = Path(f"/proc/{pid}/status").read_text()
    assert server_addr.split("/")[0] == "127.0.0.1"
    assert Path(data_dir) == pg_server.data_dir
    assert Path(data_dir).stat().st_uid == pg_server.server_uid
    if os.geteuid() == 0:
        assert pg_server.server_uid != 0
    for status in statuses.values():
        uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
        assert {int(u) for u in uid_line.split()[1:]} == {pg_server.server_uid}


@pytest.mark.postgres
def test_stop_kills_the_server_and_removes_its_data(pg_server: PostgresServer) -> None:
    # A server of its own: the session's must outlive this test.
    server = PostgresServer()
    server.start()
    base_dir, pid, port = server.base_dir, server.pid, server.port
    assert base_dir is not None and (base_dir / "data" / "PG_VERSION").is_file()
    assert pid is not None and port != pg_server.port
    server.create_database("scratch")
    conn = psycopg.connect(server.dsn("scratch"))  # left open: stop must not wait for it
    try:
        server.stop()
        assert not base_dir.exists()
        assert server.pid is None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(f"postgresql://dreaming@127.0.0.1:{port}/postgres", connect_timeout=2)
        with pytest.raises(RuntimeError, match="not started"):
            server.url()
        server.stop()  # idempotent
    finally:
        conn.close()


def test_missing_binaries_are_reported_as_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DREAMING_PG_BIN", str(tmp_path))
    with pytest.raises(PostgresUnavailable, match="no initdb and postgres") as info:
        find_bin_dir()
    assert str(tmp_path) in info.value.reason
    with pytest.raises(PostgresUnavailable):
        PostgresServer().start()
