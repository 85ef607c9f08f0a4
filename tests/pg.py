"""A throwaway PostgreSQL server on loopback, for tests of the PostgreSQL code paths.

Tests must exercise the real server (its locking, its SQL dialect, its errors), not SQLite
pretending, and must not depend on a server someone set up on the machine. So each test
session runs its own `postgres` from the installed binaries: a fresh cluster in a temporary
directory, trust authentication for the user `dreaming`, listening on 127.0.0.1 on a free
port (and on a Unix socket inside the data directory, never in /var/run/postgresql), with
durability switched off because the data dies with the session anyway.

`initdb` and `postgres` refuse to run as root, and CI runs as root: then the server runs as
the `postgres` system user (or `nobody`), which owns the temporary directory.

    with PostgresServer() as server:
        server.create_database("t1")
        engine = sqlalchemy.create_engine(server.url("t1"))

Use the `pg_server` / `pg_database` / `pg_url` fixtures of tests/conftest.py in tests.
`PostgresUnavailable` says why the server could not be had (the fixture turns it into a skip).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

# psycopg is imported where used: it comes with the `fleet` extra, and tests/conftest.py
# imports this module, so a `dev`-only install must still be able to run the other tests.

__all__ = ["PgDatabase", "PostgresServer", "PostgresUnavailable", "find_bin_dir"]

SUPERUSER = "dreaming"
HOST = "127.0.0.1"
START_TIMEOUT = 30.0

# libpq and the server read these; a developer's PGHOST/PGPORT/PGDATA must not redirect us.
_PG_ENV_PREFIX = "PG"
# Users that may own the server when we are root, in order of preference.
_UNPRIVILEGED_USERS = ("postgres", "nobody")
_BIND_ERRORS = ("could not bind", "Address already in use", "could not create any TCP/IP")


class PostgresUnavailable(RuntimeError):  # noqa: N818  (reads as "skip: PostgreSQL unavailable")
    """No PostgreSQL server could be started here; `reason` says why (shown in the skip)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _has_server_binaries(bin_dir: Path) -> bool:
    return all((bin_dir / name).is_file() for name in ("initdb", "postgres"))


def _version_key(path: Path) -> tuple[int, ...]:
    # /usr/lib/postgresql/<ver>/bin: "9.6" < "15" numerically, not as strings.
    return tuple(int(part) for part in re.findall(r"\d+", path.parent.name))


def find_bin_dir() -> Path:
    """The directory holding `initdb` and `postgres`.

    Tried in order: $DREAMING_PG_BIN (explicit choice wins), `pg_config --bindir` (the
    installation the developer set up; but libpq-dev's pg_config may name a directory without
    the server, so it is checked), the highest /usr/lib/postgresql/*/bin (Debian's layout,
    not on PATH), then PATH.
    """
    explicit = os.environ.get("DREAMING_PG_BIN")
    if explicit:
        path = Path(explicit)
        if not _has_server_binaries(path):
            raise PostgresUnavailable(f"DREAMING_PG_BIN={explicit} has no initdb and postgres")
        return path

    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            if out and _has_server_binaries(Path(out)):
                return Path(out)

    debian = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if _has_server_binaries(p)]
    if debian:
        return max(debian, key=_version_key)

    initdb = shutil.which("initdb")
    if initdb:
        # Follow symlinks (/usr/local/bin/initdb -> .../15/bin/initdb): postgres sits beside
        # the real file, and initdb itself looks for postgres next to its own resolved path.
        path = Path(initdb).resolve().parent
        if _has_server_binaries(path):
            return path

    raise PostgresUnavailable(
        "no PostgreSQL server binaries (initdb, postgres): set DREAMING_PG_BIN, or install "
        "PostgreSQL (Debian: apt-get install postgresql)"
    )


def _free_port() -> int:
    """A port nobody listens on right now (the kernel's pick); `start` retries if it is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class PgDatabase:
    """A fresh database of a PostgresServer: its name and two ways to reach it."""

    name: str
    url: str  # SQLAlchemy: postgresql+psycopg://...
    dsn: str  # libpq (psycopg, Procrastinate): postgresql://...


@dataclass(frozen=True)
class _RunAs:
    """Credentials to drop to when we are root (initdb/postgres refuse to run as root)."""

    name: str
    uid: int
    gid: int


def _unprivileged_user() -> _RunAs | None:
    if os.geteuid() != 0:
        return None
    for name in _UNPRIVILEGED_USERS:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return _RunAs(name, entry.pw_uid, entry.pw_gid)
    raise PostgresUnavailable(
        f"running as root and none of the users {_UNPRIVILEGED_USERS} exists to run postgres"
    )


def _parent_death_signal() -> Callable[[], None] | None:
    """A preexec_fn that makes the kernel send SIGQUIT to postgres if pytest dies.

    Without it a pytest killed with SIGKILL (a CI timeout) leaves an orphaned postmaster
    behind. SIGQUIT is postgres's immediate shutdown. Linux only; elsewhere nothing.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    signum = int(signal.SIGQUIT)

    def preexec() -> None:
        prctl(pr_set_pdeathsig, signum, 0, 0, 0)

    return preexec


class PostgresServer:
    """One private PostgreSQL cluster and its postmaster; `start()` it, `stop()` it.

    `stop()` removes everything, so tests can neither see nor leave state behind.
    """

    def __init__(self, bin_dir: Path | None = None, *, start_timeout: float = START_TIMEOUT):
        self._bin_dir = bin_dir
        self.start_timeout = start_timeout
        self.host = HOST
        self.port = 0
        self.base_dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._run_as: _RunAs | None = None

    # --- addresses -----------------------------------------------------------------------

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq connection string (for psycopg, Procrastinate, psql)."""
        self._require_running()
        return f"postgresql://{SUPERUSER}@{self.host}:{self.port}/{dbname}"

    def url(self, dbname: str = "postgres") -> str:
        """A SQLAlchemy URL that selects the psycopg (v3) driver, not the default psycopg2."""
        self._require_running()
        return f"postgresql+psycopg://{SUPERUSER}@{self.host}:{self.port}/{dbname}"

    @property
    def data_dir(self) -> Path:
        if self.base_dir is None:
            raise RuntimeError("PostgresServer is not started")
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / "postgres.log"

    @property
    def pid(self) -> int | None:
        """The postmaster's process id, while it runs."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    @property
    def server_uid(self) -> int:
        """The uid the server runs as: ours, or the unprivileged user's when we are root."""
        return self._run_as.uid if self._run_as is not None else os.geteuid()

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """initdb a fresh cluster and start postgres on a free port; wait until it answers.

        Raises PostgresUnavailable (with the server's log) if any step fails; nothing is left
        behind then.
        """
        if self._proc is not None:
            raise RuntimeError("PostgresServer already started")
        try:
            import psycopg  # noqa: F401  (fail early, with a reason, if the extra is missing)
        except ImportError as e:
            raise PostgresUnavailable(
                f"psycopg not installed (pip install -e '.[fleet]'): {e}"
            ) from e
        try:
            bin_dir = self._bin_dir or find_bin_dir()
            self._run_as = _unprivileged_user()
            self._make_base_dir()
            self._initdb(bin_dir)
            # The port is free when picked but may be taken before postgres binds it.
            for attempt in range(3):
                self.port = _free_port()
                self._launch(bin_dir)
                if self._wait_ready(retry_bind=attempt < 2):
                    return
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Immediate shutdown (no checkpoint: the data is thrown away), then delete the data.

        Safe to call twice, and after a failed start.
        """
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            # SIGQUIT: immediate shutdown; the postmaster takes its backends down with it.
            proc.send_signal(signal.SIGQUIT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- databases -----------------------------------------------------------------------

    def create_database(self, name: str) -> None:
        """CREATE DATABASE (autocommit: it cannot run inside a transaction)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def drop_database(self, name: str) -> None:
        """DROP DATABASE, disconnecting whatever a test left connected (WITH FORCE)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    # --- internals -----------------------------------------------------------------------

    def _require_running(self) -> None:
        if self._proc is None or self.port == 0:
            raise RuntimeError("PostgresServer is not started")

    def _make_base_dir(self) -> None:
        # Under /tmp, not pytest's tmp_path: /tmp/pytest-of-root is 0700 root, so the
        # postgres user could not reach a data dir in there. mkdtemp makes it 0700; when we
        # are root it is handed to the server's user, which alone needs to get in.
        parent = "/tmp" if self._run_as is not None and Path("/tmp").is_dir() else None
        self.base_dir = Path(tempfile.mkdtemp(prefix="dreaming-pg-", dir=parent))
        if self._run_as is not None:
            os.chown(self.base_dir, self._run_as.uid, self._run_as.gid)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_PG_ENV_PREFIX)}
        env["LC_ALL"] = "C"
        env.pop("LANG", None)
        if self._run_as is not None:
            env["HOME"] = str(self.base_dir)
            env["USER"] = env["LOGNAME"] = self._run_as.name
        return env

    def _credentials(self) -> tuple[int | None, int | None, list[int] | None]:
        """Popen's user, group, extra_groups: the unprivileged user's, or ours (all None)."""
        if self._run_as is None:
            return None, None, None
        return self._run_as.uid, self._run_as.gid, []

    def _initdb(self, bin_dir: Path) -> None:
        cmd = [
            str(bin_dir / "initdb"),
            "-D",
            str(self.data_dir),
            "-A",
            "trust",
            "-U",
            SUPERUSER,
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ]
        user, group, extra_groups = self._credentials()
        try:
            result = subprocess.run(
                cmd,
                cwd=self.base_dir,
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                user=user,
                group=group,
                extra_groups=extra_groups,
            )
        except (OSError, subprocess.SubprocessError) as e:
            raise PostgresUnavailable(f"initdb could not run: {e}") from e
        if result.returncode != 0:
            raise PostgresUnavailable(
                f"initdb failed (exit {result.returncode}):\n{result.stdout}{result.stderr}"
            )

    def _launch(self, bin_dir: Path) -> None:
        settings = {
            "listen_addresses": self.host,
            "port": str(self.port),
            # Our own socket directory: the default (/var/run/postgresql) may not exist or
            # may belong to the machine's own cluster.
            "unix_socket_directories": str(self.data_dir),
            # Throwaway data: durability only costs time.
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            # Fleet tests run many workers, each with a pool.
            "max_connections": "200",
        }
        cmd = [str(bin_dir / "postgres"), "-D", str(self.data_dir)]
        for key, value in settings.items():
            cmd += ["-c", f"{key}={value}"]
        user, group, extra_groups = self._credentials()
        # The log is opened by us (root may write anywhere), the child inherits the fd.
        with self.log_path.open("ab") as log:
            try:
                self._proc = subprocess.Popen(
                    cmd,
                    cwd=self.base_dir,
                    env=self._env(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    preexec_fn=_parent_death_signal(),
                    user=user,
                    group=group,
                    extra_groups=extra_groups,
                )
            except OSError as e:
                raise PostgresUnavailable(f"postgres could not run: {e}") from e

    def _log_tail(self, limit: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return "(no log)"

    def _wait_ready(self, *, retry_bind: bool) -> bool:
        """True once a connection succeeds; False if postgres lost the port race (retry).

        Connecting (not pg_isready) is the real test: it is what the tests do next.
        """
        import psycopg

        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        last_error = ""
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                log = self._log_tail()
                self._proc = None
                if retry_bind and any(marker in log for marker in _BIND_ERRORS):
                    return False
                raise PostgresUnavailable(f"postgres exited with code {code}; its log:\n{log}")
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2):
                    return True
            except psycopg.OperationalError as e:
                last_error = str(e).strip()
            time.sleep(0.02)
        raise PostgresUnavailable(
            f"postgres did not accept connections on {self.host}:{self.port} within "
            f"{self.start_timeout:.0f} s (last error: {last_error}); its log:\n{self._log_tail()}"
        )
