"""The store on both backends (the `backend` fixture): per-agent SQLite files and the shared
PostgreSQL database of a fleet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect, text

from dreaming.errors import LockedError, SchemaTooNewError
from dreaming.store import MIGRATIONS, agent_lock, open_engine, open_shared_engine, schema_version
from dreaming.store.engine import advisory_lock
from dreaming.store.models import SQLModel
from tests.backends import Backend


def _open(backend: Backend, tmp_path: Path) -> Engine:
    if backend.url is None:
        return open_engine(tmp_path / "a.sqlite")
    return open_shared_engine(backend.url)


def test_fresh_database_has_every_model_table_and_column(backend: Backend, tmp_path: Path) -> None:
    engine = _open(backend, tmp_path)
    insp = inspect(engine)
    for table in SQLModel.metadata.sorted_tables:
        cols = {c["name"] for c in insp.get_columns(table.name)}
        assert cols == {c.name for c in table.columns}, table.name
    engine.dispose()


def test_the_core_tables_are_the_models_tables() -> None:
    """tables.py is generated from models.py (`python -m dreaming.store.codegen`): the same
    tables, columns in the same order, with the same types, keys, nullability and defaults."""
    import dreaming.store.codegen as codegen
    import dreaming.store.tables as tables

    assert {t.name for t in tables.METADATA.sorted_tables} == set(SQLModel.metadata.tables)
    for name, model in codegen.NAMES.items():
        core, declared = getattr(tables, name), codegen.model_table(model)
        assert core.name == declared.name
        assert [c.name for c in core.columns] == [c.name for c in declared.columns], name
        for c, d in zip(core.columns, declared.columns, strict=True):
            where = f"{core.name}.{c.name}: regenerate with python -m dreaming.store.codegen"
            assert codegen._TYPES[type(d.type).__name__].startswith(type(c.type).__name__), where
            assert (c.primary_key, c.nullable, c.autoincrement) == (
                d.primary_key,
                d.nullable,
                d.autoincrement,
            ), where
            assert (bool(c.index), bool(c.unique)) == (bool(d.index), bool(d.unique)), where
            assert (c.default.arg if c.default else None) == (  # type: ignore[attr-defined]
                d.default.arg if d.default else None  # type: ignore[attr-defined]
            ), where


def test_the_generated_file_is_what_codegen_writes(tmp_path: Path) -> None:
    """Byte for byte, after the formatter: nobody edited it by hand."""
    import dreaming.store.codegen as codegen
    import dreaming.store.tables as tables

    out = tmp_path / "tables.py"
    out.write_text(codegen.render(), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(out)], check=True)
    assert out.read_text(encoding="utf-8") == Path(tables.__file__).read_text(encoding="utf-8")


def test_migrations_are_recorded_and_idempotent(backend: Backend, tmp_path: Path) -> None:
    _open(backend, tmp_path).dispose()
    engine = _open(backend, tmp_path)
    with engine.connect() as conn:
        names = [r[0] for r in conn.execute(text("SELECT name FROM schema_migrations"))]
    assert sorted(names) == sorted(n for n, _ in MIGRATIONS)
    assert schema_version() == len(MIGRATIONS)
    engine.dispose()


def test_newer_database_is_refused(backend: Backend, tmp_path: Path) -> None:
    engine = _open(backend, tmp_path)
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO schema_migrations VALUES ('9999_from_the_future', '2030-01-01')")
        )
    engine.dispose()
    with pytest.raises(SchemaTooNewError, match="newer than this dreaming supports"):
        _open(backend, tmp_path)


def test_big_integers_round_trip(backend: Backend, tmp_path: Path) -> None:
    # File cursors hold nanosecond mtimes and byte offsets past 2 GiB.
    engine = _open(backend, tmp_path)
    big = 1_796_051_920_044_175_897
    with engine.begin() as conn:
        conn.execute(
            text(
                'INSERT INTO file_cursors (agent, path, session_id, "offset", size, mtime_ns, '
                "updated_at) VALUES ('a', 'p', 's', :o, :o, :m, '2026-01-01')"
            ),
            {"o": 5 * 2**30, "m": big},
        )
        row = conn.execute(text('SELECT "offset", mtime_ns FROM file_cursors')).one()
    assert tuple(row) == (5 * 2**30, big)
    engine.dispose()


def test_agent_lock_is_exclusive(backend: Backend, tmp_path: Path) -> None:
    if backend.url is None:
        lock = tmp_path / "locks" / "main.lock"

        def hold(holder: str, agent: str = "main"):  # type: ignore[no-untyped-def]
            return agent_lock(tmp_path / "locks" / f"{agent}.lock", agent, holder)

        assert lock.parent.name == "locks"
    else:
        engine = _open(backend, tmp_path)

        def hold(holder: str, agent: str = "main"):  # type: ignore[no-untyped-def]
            return advisory_lock(engine, agent, holder)

    with hold("light"):
        with pytest.raises(LockedError, match=r"main.*light"):
            with hold("deep"):
                pass
        with hold("deep", agent="other"):
            pass
    with hold("deep"):
        pass


def test_a_waiting_lock_gets_the_agent_when_it_is_let_go_and_runs_meanwhile_step_aside(
    backend: Backend, tmp_path: Path
) -> None:
    """`forget --wait`: a holder that waits gets the agent as soon as the current one lets go,
    gives up after its wait, and while it waits a lock taken without waiting is refused (the
    flock's waiting file; PostgreSQL's lock queue), so runs cannot starve it."""
    import threading
    import time

    engine = _open(backend, tmp_path) if backend.url is not None else None

    def hold(holder: str, wait_s: float = 0):  # type: ignore[no-untyped-def]
        if engine is None:
            return agent_lock(tmp_path / "locks" / "main.lock", "main", holder, wait_s=wait_s)
        return advisory_lock(engine, "main", holder, wait_s=wait_s)

    release = threading.Event()
    taken = threading.Event()
    got: list[str] = []

    def run_holder() -> None:
        with hold("nightly"):
            taken.set()
            release.wait(30)

    def waiter() -> None:
        with hold("forget", wait_s=30):
            got.append("forget")

    first = threading.Thread(target=run_holder)
    first.start()
    assert taken.wait(30)
    started = time.monotonic()
    with pytest.raises(LockedError, match=r"waited 0\.2s"):
        with hold("forget", wait_s=0.2):
            pass
    assert time.monotonic() - started >= 0.2
    second = threading.Thread(target=waiter)
    second.start()

    def queued() -> bool:
        if engine is None:  # the waiter holds the waiting file: a run says so
            try:
                with hold("run"):
                    return False
            except LockedError as err:
                return "forget" in str(err) and "is waiting for it" in str(err)
        with engine.connect() as conn:  # the waiter is in the server's lock queue
            return bool(
                conn.execute(
                    text(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    )
                ).scalar()
            )

    deadline = time.monotonic() + 30
    while not queued():
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.05)
    with pytest.raises(LockedError):  # a run that comes now is refused
        with hold("run"):
            pass
    release.set()
    first.join(30)
    second.join(30)
    assert got == ["forget"]
    with hold("run"):  # nobody waits any more
        pass
    if engine is not None:
        engine.dispose()


def _schema(path: Path) -> list[tuple[str, str, str]]:
    import sqlite3

    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        return [(t, n, s or "") for t, n, s in rows]


def test_a_new_database_from_the_template_equals_one_migrated_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dreaming.store import engine as engine_mod

    open_engine(tmp_path / "template.sqlite").dispose()
    monkeypatch.setattr(engine_mod, "_template_image", lambda: None)
    open_engine(tmp_path / "in-place.sqlite").dispose()
    assert _schema(tmp_path / "template.sqlite") == _schema(tmp_path / "in-place.sqlite")
    engine = open_engine(tmp_path / "template.sqlite")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        names = [r[0] for r in conn.execute(text("SELECT name FROM schema_migrations"))]
    assert sorted(names) == sorted(n for n, _ in MIGRATIONS)
    engine.dispose()
    # Nothing but the databases (and their WAL files) is left in the folder.
    aside = tmp_path / ".new-databases"
    assert {p.name.split(".")[0] for p in tmp_path.iterdir() if p != aside} == {
        "template",
        "in-place",
    }
    assert list(aside.iterdir()) == []


def test_the_template_image_is_a_sound_file_already_in_wal_mode(tmp_path: Path) -> None:
    """A new agent's file is born in WAL mode (no switch on its first connection), and
    is a sound database a plain sqlite3 connection can open, check and write."""
    import sqlite3

    from dreaming.store import engine as engine_mod

    image = engine_mod._template_image()
    if image is None:
        pytest.skip("this sqlite3 cannot serialize")
    assert image[18:20] == b"\x02\x02"
    path = tmp_path / "copy.sqlite"
    path.write_bytes(image)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO corpus_dirty_days (agent, day) VALUES ('a', '2026-01-01')")
        conn.commit()
    finally:
        conn.close()
    assert engine_mod._in_wal_mode(b"short") == b"short"


def test_a_copy_a_killed_process_left_aside_is_removed(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    aside = tmp_path / ".new-databases"
    aside.mkdir()
    dead = aside / f"old.sqlite.{done.stdout.strip()}.1"
    live = aside / f"other.sqlite.{os.getpid()}.1"  # another thread of ours, still at work
    dead.write_bytes(b"half a database")
    live.write_bytes(b"half a database")
    open_engine(tmp_path / "main.sqlite").dispose()
    assert not dead.exists() and live.exists()


def test_an_existing_file_is_never_replaced_by_the_template(tmp_path: Path) -> None:
    path = tmp_path / "main.sqlite"
    engine = open_engine(path)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO agent_state (agent, key, value) VALUES ('a', 'k', 'v')"))
    engine.dispose()
    engine = open_engine(path)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT value FROM agent_state")).scalar() == "v"
    engine.dispose()


def test_agent_databases_share_one_compiled_statement_cache(tmp_path: Path) -> None:
    from sqlalchemy import select

    from dreaming.store.tables import CANDIDATES

    query = select(CANDIDATES.c.id).where(CANDIDATES.c.agent == "a")
    first, second = open_engine(tmp_path / "a.sqlite"), open_engine(tmp_path / "b.sqlite")
    try:
        assert first.dialect is second.dialect
        with first.connect() as conn:
            conn.execute(query).all()
        with second.connect() as conn:
            cached = conn.execute(query).context.cache_hit
        # CACHE_HIT: compiled once, by the first engine, for both.
        assert cached == second.dialect.CACHE_HIT
    finally:
        first.dispose()
        second.dispose()


def test_a_storage_fault_names_the_file_of_the_engine_it_happened_in(tmp_path: Path) -> None:
    from dreaming.errors import StorageError

    first, second = open_engine(tmp_path / "a.sqlite"), open_engine(tmp_path / "b.sqlite")
    try:
        second.dispose()  # new connections open the file as it is now: not a database
        (tmp_path / "b.sqlite").write_bytes(b"this is no SQLite file" * 1000)
        with pytest.raises(StorageError) as raised, second.connect() as conn:
            conn.execute(text("SELECT count(*) FROM agent_state"))
        assert str(raised.value).startswith(str(tmp_path / "b.sqlite"))
        with first.connect() as conn:  # the other agent's file is fine
            conn.execute(text("SELECT count(*) FROM agent_state"))
    finally:
        first.dispose()
        second.dispose()
