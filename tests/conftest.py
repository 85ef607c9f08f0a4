"""Hermetic tests: state under tmp_path, no environment variable the code reads leaks in."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import backends
from tests.backends import Backend
from tests.fake_openai import fake_openai_fixture  # noqa: F401  (provides the `fake_openai` fixture)
from tests.pg import PgDatabase, PostgresServer, PostgresUnavailable

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

_ENV_VARS = (
    "DREAMING_STATE_DIR",
    "DREAMING_CONFIG",
    "DREAMING_STRIP_TAGS",
    "DREAMING_DEBUG",
    # Where OpenClaw's own configuration is, and the profile it runs under.
    "OPENCLAW_CONFIG_PATH",
    "OPENCLAW_PROFILE",
    "OPENCLAW_HOME",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    # The openai package reads these from os.environ whatever env we pass it; the HTTP
    # library follows the proxy variables.
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_ADMIN_KEY",
    "OPENAI_CUSTOM_HEADERS",
    "OPENAI_WEBHOOK_SECRET",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
)


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not present at {SHARED_DATA}")
    return SHARED_DATA


# --- PostgreSQL (tests marked `postgres`) -------------------------------------------------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """One private PostgreSQL server for the whole session (tests/pg.py), stopped at its end.

    Without PostgreSQL the tests that need it are skipped, so a laptop without it can still
    run the suite; CI sets DREAMING_REQUIRE_POSTGRES=1 so that they can never be skipped
    silently there.
    """
    server = PostgresServer()
    try:
        server.start()
    except PostgresUnavailable as e:
        if os.environ.get("DREAMING_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL unavailable (DREAMING_REQUIRE_POSTGRES=1): {e.reason}")
        pytest.skip(f"PostgreSQL unavailable: {e.reason}")
    try:
        yield server
    finally:
        server.stop()


_pg_db_counter = itertools.count(1)


@pytest.fixture
def pg_database(pg_server: PostgresServer) -> Iterator[PgDatabase]:
    """An empty database for this test alone, dropped afterwards (with its leftover
    connections, so a test that forgets to dispose an engine cannot exhaust the server)."""
    name = f"t_{next(_pg_db_counter)}_{os.getpid()}"
    pg_server.create_database(name)
    try:
        yield PgDatabase(name=name, url=pg_server.url(name), dsn=pg_server.dsn(name))
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def pg_url(pg_database: PgDatabase) -> str:
    """SQLAlchemy URL of a fresh database for this test (see `pg_database`)."""
    return pg_database.url


@pytest.fixture
def pg_dsn(pg_database: PgDatabase) -> str:
    """libpq DSN of a fresh database for this test (see `pg_database`)."""
    return pg_database.dsn


# --- one parametrized fixture for the state backend ----------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """Run the test once on per-agent SQLite files and once on a shared PostgreSQL database.
    Helpers that build state folders read `tests.backends.CURRENT`, set here."""
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    chosen = Backend(request.param, url)
    monkeypatch.setattr(backends, "CURRENT", chosen)
    return chosen


@pytest.fixture
def fork_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """`forking.fork_safe` as if this test process ran no thread but the ones the test
    starts: another test in this worker may have left an idle one (a loopback server's),
    which a forked child never touches, and a test of forking must not depend on the order
    tests ran in."""
    import threading

    from dreaming import forking

    for stop in forking._before_fork:  # as `fork_safe` does before it counts (corpus's)
        stop()
    foreign = threading.active_count() - 1
    # (one of them may end meanwhile: never fewer than this thread)
    monkeypatch.setattr(forking, "_threads", lambda: max(1, threading.active_count() - foreign))
