"""Opening an agent's store: engine, pragmas, migrations, and the lock around a run."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.pool import NullPool, StaticPool

from dreaming.errors import LockedError, LockLostError, StateError
from dreaming.store.compiled import share as share_compiled
from dreaming.store.migrations import migrate
from dreaming.store.storage import convert_sqlite_faults, os_fault

WAL_CHECKPOINT_PAGES = 16_384


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    # WAL lets status/entries read while a run writes; NORMAL sync is durable at checkpoints,
    # and a transaction either commits whole or not at all, which is what crash safety needs.
    # The busy timeout first: switching a new file to WAL needs a lock another process may
    # hold for a moment, and without the timeout that wait fails at once.
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    # Checkpoint the WAL into the file every 64 MiB of it (4 KiB pages), not every 4 MiB: a
    # night rewrites the same candidate and index pages batch after batch, and each
    # checkpoint copied them into the file again and synced it (10,000 chat sessions: 38
    # commits 0.61-0.79 s, now 0.37-0.41 s). Closing the last connection still checkpoints
    # all of it, as before; what a commit makes durable is unchanged.
    cur.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
    cur.execute("PRAGMA foreign_keys=ON")
    # Freed pages are zeroed: a purged row must not linger in the file (invariant 4).
    cur.execute("PRAGMA secure_delete=ON")
    cur.close()


_OPEN_ATTEMPTS = 8


def open_engine(db_path: Path, *, create: bool = True) -> Engine:
    """Open (and migrate) an agent's SQLite database. `create=False` refuses to make one."""
    if not create and not db_path.exists():
        raise StateError(f"{db_path}: no database yet (run `dreaming run --phase light` first)")
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise os_fault(err, db_path.parent) or err from None
    if create and not db_path.exists():
        _from_template(db_path)
    engine = create_engine(f"sqlite:///{db_path}")
    event.listen(engine, "connect", _sqlite_pragmas)
    # Read-only, full, damaged: one StorageError naming the file, wherever it shows.
    convert_sqlite_faults(engine)
    for attempt in range(1, _OPEN_ATTEMPTS + 1):
        try:
            _migrate(engine, str(db_path))
            return share_compiled(engine)
        except OperationalError as err:
            # Two processes opening a brand-new file: SQLite can answer "locked" without
            # consulting the busy timeout while the other sets up the WAL (SQLITE_BUSY_RECOVERY).
            if "locked" not in str(err) or attempt == _OPEN_ATTEMPTS:
                raise
            engine.dispose()
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")


def _from_template(db_path: Path) -> None:
    """Start a new database as a copy of one migrated in memory once per process: a fleet
    worker makes hundreds of new agents' files, and running every migration for each cost
    a fifteenth of a first night. The copy is written aside and linked into place, so the
    name appears only with the whole file, and a process that lost the race to make it keeps
    the other's. Where that cannot be done (no `serialize`, a read-only or full disk, no hard
    links) nothing is left behind, and opening the file makes and migrates it as before."""
    image = _template_image()
    if image is None:
        return
    folder = db_path.parent / _ASIDE
    aside = folder / f"{db_path.name}.{os.getpid()}.{threading.get_ident()}"
    try:
        folder.mkdir(exist_ok=True)
        _remove_dead_copies(folder)
        with open(aside, "xb") as f:
            f.write(image)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # made meanwhile: theirs is as good
            os.link(aside, db_path)
    except OSError:
        pass  # opening the file says what is wrong, in the words it always has
    finally:
        with contextlib.suppress(OSError):
            aside.unlink()


_ASIDE = ".new-databases"  # beside the agents' files: copies not yet linked into place


def _remove_dead_copies(folder: Path) -> None:
    """Copies a killed process left half made (their names end in its pid and thread)."""
    for path in folder.iterdir():
        parts = path.name.rsplit(".", 2)
        if len(parts) == 3 and parts[1].isdigit() and not _alive(int(parts[1])):
            with contextlib.suppress(OSError):
                path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's: it exists
    return True


@functools.cache
def _template_image() -> bytes | None:
    """The bytes of a database with every migration applied (None: sqlite3 cannot say)."""
    engine = create_engine("sqlite://", poolclass=StaticPool)
    try:
        _migrate(engine, "the template database")
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            serialize = getattr(raw, "serialize", None)
            return _in_wal_mode(bytes(serialize())) if serialize is not None else None
    finally:
        engine.dispose()


def _in_wal_mode(image: bytes) -> bytes:
    """The image with its header's file format versions (bytes 18 and 19) set to 2, as
    `PRAGMA journal_mode=WAL` leaves a file: a new agent's file opens in WAL mode, and
    the pragma each connection runs finds nothing to change. Switching a rollback-mode
    file takes an exclusive lock, a journal and a sync: a millisecond of every new agent's
    first night. (An in-memory database cannot be put in WAL mode before serializing.)"""
    if len(image) < 20 or image[18:20] != b"\x01\x01":
        return image  # not the header this expects: let the pragma switch it as before
    return image[:18] + b"\x02\x02" + image[20:]


def _migrate(engine: Engine, where: str) -> None:
    """Run pending migrations in one real transaction that holds the write lock throughout.

    The sqlite3 module never wraps DDL in a transaction on its own, so each CREATE would
    commit by itself: two processes creating one database would collide, and a process
    killed half way would leave tables without their migration record. Here the driver is
    told to keep out (isolation_level None) and we BEGIN IMMEDIATE ourselves, which also
    makes a second process wait (busy_timeout) rather than race."""
    with engine.connect() as conn:
        dbapi = conn.connection.dbapi_connection
        assert dbapi is not None
        previous = dbapi.isolation_level
        dbapi.isolation_level = None
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                migrate(conn, where)
            except BaseException:
                conn.exec_driver_sql("ROLLBACK")
                raise
            conn.exec_driver_sql("COMMIT")
        finally:
            conn.rollback()  # SQLAlchemy's own bookkeeping; nothing is left to undo
            dbapi.isolation_level = previous


def open_shared_engine(url: str, *, pool_size: int = 5) -> Engine:
    """Open (and migrate) the one database a fleet shares: every agent's rows, keyed by
    agent. Only PostgreSQL is accepted: it is what gives many machines one consistent state
    (row locks, advisory locks, conditional updates). `pool_size`: connections kept for
    concurrent runs in this process (a run works on one or two at a time)."""
    # Timestamps are stored as naive UTC (as in SQLite): the session time zone must be UTC or
    # the server would shift aware datetimes into its own zone on the way in.
    engine = create_engine(
        _driver_url(url), connect_args=_CONNECT_ARGS, pool_size=pool_size, max_overflow=10
    )
    _ping_idle_connections(engine)
    with engine.begin() as conn:
        # DDL is transactional in PostgreSQL; the advisory lock makes a second process that
        # starts at the same moment wait for the first one's migrations instead of racing.
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
        migrate(conn, redact(url))
    return engine


_IDLE_PING_S = 1.0
# Every fleet connection: UTC sessions (above), and TCP keepalives on both ends, so that a
# machine that vanishes (no FIN, no RST) is noticed in about a minute rather than the
# kernel's two hours: the server then ends the session and releases its locks.
_KEEPALIVE_S = (30, 10, 3)  # idle, interval, count
_CONNECT_ARGS: dict[str, Any] = {
    "options": "-c timezone=UTC "
    f"-c tcp_keepalives_idle={_KEEPALIVE_S[0]} -c tcp_keepalives_interval={_KEEPALIVE_S[1]} "
    f"-c tcp_keepalives_count={_KEEPALIVE_S[2]}",
    "keepalives": 1,
    "keepalives_idle": _KEEPALIVE_S[0],
    "keepalives_interval": _KEEPALIVE_S[1],
    "keepalives_count": _KEEPALIVE_S[2],
}


def _ping_idle_connections(engine: Engine) -> None:
    """Check a pooled connection before use only if it sat idle, instead of SQLAlchemy's
    pool_pre_ping on every checkout: a run checks out hundreds of times within moments (a
    ping each was ~13% of a run), while a connection that idled between tasks may have been
    dropped by a server restart or a firewall. A dead one raises DisconnectionError, which
    makes the pool discard it and hand out a fresh one."""

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < _IDLE_PING_S:
            return
        try:
            engine.dialect.do_ping(dbapi)
        except Exception as err:
            raise DisconnectionError(f"pooled connection is dead: {err}") from err


_MIGRATION_LOCK = 0x647265616D696E67  # "dreaming"


def _driver_url(url: str) -> str:
    try:
        parsed = make_url(url)
    except ArgumentError as err:
        raise StateError(f"database_url {redact(url)!r} is not a database URL: {err}") from None
    if parsed.get_backend_name() != "postgresql":
        raise StateError(
            f"database_url must be a postgresql:// URL (got {parsed.get_backend_name()}://); "
            "leave it unset for per-agent SQLite files"
        )
    try:
        import psycopg  # noqa: F401  (the driver: only fleets need it)
    except ImportError:
        raise StateError(
            "database_url needs the fleet extra: pip install 'dreaming[fleet]'"
        ) from None
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def redact(url: str) -> str:
    """A URL fit for messages and logs: the password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<invalid URL>"


def advisory_key(agent: str) -> int:
    """A stable signed 64-bit key per agent for pg_advisory_lock (collisions negligible)."""
    digest = hashlib.blake2b(f"dreaming:agent:{agent}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class HeldLock:
    """An agent's lock while a run holds it. `check()` raises LockLostError when the lock
    is gone (an advisory lock whose server session died), so a run stops at the next phase
    instead of going on beside the run that took the agent over."""

    def __init__(self, agent: str, conn: Connection | None = None) -> None:
        self.agent = agent
        self._conn = conn

    def check(self) -> None:
        if self._conn is None:  # flock: held by this process until it exits
            return
        try:
            self._conn.execute(text("SELECT 1")).scalar_one()
            self._conn.rollback()
        except DBAPIError as err:
            raise LockLostError(self.agent, str(err).splitlines()[0]) from err


_LOCK_ENGINES: dict[str, Engine] = {}


def _lock_engine(engine: Engine) -> Engine:
    """An engine without a pool for lock sessions (one per URL and process, so its dialect
    is set up once): every connect is a new server session, every close ends it."""
    url = engine.url.render_as_string(hide_password=False)
    if url not in _LOCK_ENGINES:
        _LOCK_ENGINES[url] = create_engine(
            engine.url, poolclass=NullPool, connect_args=_CONNECT_ARGS
        )
    return _LOCK_ENGINES[url]


@contextlib.contextmanager
def advisory_lock(
    engine: Engine, agent: str, holder: str, *, wait_s: float = 0
) -> Iterator[HeldLock]:
    """Hold the agent's exclusive lock in PostgreSQL for a run, on a connection of its own.

    A session-level advisory lock belongs to the server connection: if the process dies,
    its connection closes and the server releases the lock, so a killed worker never
    leaves an agent locked; if its machine dies, the server's TCP keepalives (set on every
    connection, about a minute) end the session. The connection is not from the pool: it
    is closed, not returned, when the run ends, so a lock can never outlive its run in an
    idle pooled session, and runs never compete with their own work for pool slots. The
    holder is written as the connection's application_name, which is how a refused run
    can say who has the agent.

    `wait_s` > 0 waits up to that long (lock_timeout) in the server's lock queue, which is
    fair: a run that tries for the agent while a purge waits in it is refused."""
    key = advisory_key(agent)
    with _lock_engine(engine).connect() as conn:
        conn.execute(
            text("SELECT set_config('application_name', :n, false)"),
            {"n": f"dreaming {agent} {holder} pid {os.getpid()}"[:63]},
        )
        conn.commit()
        got = _advisory_wait(conn, key, wait_s) if wait_s > 0 else _advisory_try(conn, key)
        if not got:
            raise LockedError(agent, _advisory_holder(conn, agent), wait_s)
        try:
            yield HeldLock(agent, conn)
        finally:
            _advisory_release(conn, key)


def _advisory_release(conn: Connection, key: int) -> None:
    """Unlock before the session closes. Closing alone releases the lock too, but the server
    ends a session after the client has hung up, so a run (or a purge) that asked for the
    agent right after this one could still be refused. A session that is already dead
    (the lock was lost with it) has nothing left to release."""
    try:
        if conn.in_transaction():
            conn.rollback()
        conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
        conn.commit()
    except SQLAlchemyError:
        pass  # the connection is gone, and the server released the lock with it


def _advisory_try(conn: Connection, key: int) -> bool:
    got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar_one()
    conn.commit()
    return bool(got)


def _advisory_wait(conn: Connection, key: int, wait_s: float) -> bool:
    """Queue for the lock for up to `wait_s`; whether it was granted."""
    timeout = f"{max(1, round(wait_s * 1000))}ms"
    conn.execute(text("SELECT set_config('lock_timeout', :t, false)"), {"t": timeout})
    try:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
        got = True
    except OperationalError as err:
        if getattr(err.orig, "sqlstate", None) != "55P03":  # lock_not_available
            raise
        got = False
    conn.rollback()  # a session-level advisory lock outlives the transaction
    conn.execute(text("SELECT set_config('lock_timeout', '0', false)"))
    conn.commit()
    return got


def _advisory_holder(conn: Any, agent: str) -> str:
    key = advisory_key(agent)
    row = conn.execute(
        text(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            "WHERE l.locktype = 'advisory' AND l.granted "
            "AND l.classid::bigint = ((:k >> 32) & 4294967295) "
            "AND l.objid::bigint = (:k & 4294967295) AND l.objsubid = 1 LIMIT 1"
        ),
        {"k": key},
    ).scalar()
    conn.rollback()
    return str(row) if row else "another process"


_WAIT_POLL_S = 0.1


@contextlib.contextmanager
def agent_lock(path: Path, agent: str, holder: str, *, wait_s: float = 0) -> Iterator[HeldLock]:
    """Hold the agent's exclusive lock for a run. flock is released by the kernel when the
    process dies, so a killed run never leaves a stale lock behind.

    `wait_s` > 0 waits up to that long for a lock another process holds (a purge that must
    not be starved by the scheduler's runs). While it waits it holds the waiting file beside
    the lock, and every lock taken without waiting steps aside (busy) while that is held: the
    agent goes to the waiter as soon as the current holder lets go."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise os_fault(err, path) or err from None
    try:
        if wait_s > 0:
            with _waiting(_waiting_file(path), agent, holder, wait_s) as deadline:
                _flock(fd, agent, deadline, wait_s)
        else:
            _refuse_if_waited_for(_waiting_file(path), agent)
            _flock(fd, agent, None, 0)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} {holder}".encode(), 0)
        yield HeldLock(agent)
    finally:
        os.close(fd)


def _waiting_file(lock: Path) -> Path:
    return lock.with_name(lock.name + ".waiting")


def _holder(fd: int) -> str:
    return os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"


def _flock(fd: int, agent: str, deadline: float | None, wait_s: float) -> None:
    """Take the exclusive flock on `fd`, polling until `deadline` (None: no waiting)."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if deadline is None or time.monotonic() >= deadline:
                raise LockedError(agent, _holder(fd), wait_s) from None
        time.sleep(_WAIT_POLL_S)


@contextlib.contextmanager
def _waiting(path: Path, agent: str, holder: str, wait_s: float) -> Iterator[float]:
    """Say "waiting for the agent" for as long as the block runs; yields the deadline. Two
    waiters queue on the file itself, within the same deadline."""
    deadline = time.monotonic() + wait_s
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _flock(fd, agent, deadline, wait_s)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} {holder}".encode(), 0)
        yield deadline
    finally:
        os.close(fd)  # the flock goes with it


def _refuse_if_waited_for(path: Path, agent: str) -> None:
    """A lock taken without waiting while another process waits for the agent: busy."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockedError(agent, f"{_holder(fd)} is waiting for it") from None
    finally:
        os.close(fd)
