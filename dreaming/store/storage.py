"""Storage faults told as what they are: a file dreaming cannot write (read-only), a disk
that is full or failing, a database that is damaged. Each becomes a `StorageError` that
names the file and what to do, instead of a driver's traceback; the step that met it
committed nothing (SQLite rolls the transaction back, files are written by rename).

The agents' engines convert their own faults (`convert_sqlite_faults`); the runner and the
CLI convert an `OSError` (`os_fault`) where a file of the state folder or a workspace failed.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

from dreaming.errors import StorageError

# How SQLite names them (sqlite3's `sqlite_errorname`, Python 3.11+), by what they mean.
_READ_ONLY = ("SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH")
_CANNOT_OPEN = ("SQLITE_CANTOPEN",)
_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_NO_SPACE = ("SQLITE_FULL", "SQLITE_IOERR")
# sqlite3 itself raises this (no SQLite code) for a TEXT value that is not UTF-8.
_UNDECODABLE = "Could not decode to UTF-8"

_READ_ONLY_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS}
_NO_SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def _writable(path: Path) -> bool:
    """Whether this process may write `path` (or create it) and files beside it: SQLite
    needs its folder too, for the write-ahead log and the shared-memory file."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    return not path.exists() or os.access(path, os.W_OK)


def _owner(path: Path) -> int | None:
    for candidate in (path, path.parent):
        try:
            return candidate.stat().st_uid
        except OSError:
            continue
    return None


def _user(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def read_only(path: Path, detail: str) -> StorageError:
    owner = _owner(path)
    how = (
        "make the file and its folder writable (chmod u+w), or mount them read-write"
        if owner is None or owner == os.geteuid()
        else f"run as {_user(owner)}, who owns it, or make it and its folder writable for this user"
    )
    return StorageError(
        str(path),
        f"cannot be written ({detail})",
        f"dreaming writes beside its state even to read it (locks, the write-ahead log): {how}",
    )


def no_space(path: Path, detail: str) -> StorageError:
    try:
        free = shutil.disk_usage(path.parent if path.parent.exists() else Path("/")).free
        room = f"{free / 2**20:.1f} MiB free there"
    except OSError:
        room = "free space unknown"
    soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    limit = (
        f", a file-size limit of {soft / 2**10:.0f} KiB (ulimit -f)"
        if soft != resource.RLIM_INFINITY
        else ""
    )
    return StorageError(
        str(path),
        f"could not be written ({detail}; {room}{limit})",
        "free some space or raise the limit (a failing disk reads the same), then run"
        " again; the step that failed kept nothing",
    )


def damaged(path: Path, detail: str) -> StorageError:
    return StorageError(
        str(path),
        f"the database is damaged ({detail})",
        "restore it from a backup, or move it aside (keep it to inspect) and run again: a"
        " new one is built from the transcripts, forgotten sessions stay forgotten and"
        " MEMORY.md's entries are adopted",
    )


def sqlite_fault(err: BaseException, path: Path) -> StorageError | None:
    """`err` (a sqlite3 error, or SQLAlchemy's wrapper of one) as a storage fault of the
    database at `path`; None when it is something else (a lock wait, a bug)."""
    orig = getattr(err, "orig", None) or err
    name = str(getattr(orig, "sqlite_errorname", "") or "")
    detail = str(orig).splitlines()[0] if str(orig) else type(orig).__name__
    if _UNDECODABLE in detail:
        return damaged(path, "a stored text is not valid UTF-8")
    if name.startswith(_DAMAGED):
        return damaged(path, detail)
    if name.startswith(_READ_ONLY):
        return read_only(path, detail)
    if name.startswith(_CANNOT_OPEN + _NO_SPACE):
        # A read-only folder can read as "unable to open" or as an I/O error on the
        # shared-memory file; only a writable one means the disk itself.
        if not _writable(path):
            return read_only(path, detail)
        if name.startswith(_CANNOT_OPEN):
            return StorageError(str(path), f"cannot be opened ({detail})", "is it a database file?")
        return no_space(path, detail)
    return None


def os_fault(err: OSError, path: Path | None = None) -> StorageError | None:
    """An OSError on a file (`err.filename`, else `path`) as a storage fault, or None."""
    where = Path(err.filename) if isinstance(err.filename, str) else path
    if where is None:
        return None
    detail = err.strerror or str(err)
    if err.errno in _READ_ONLY_ERRNOS:
        return read_only(where, detail)
    if err.errno in _NO_SPACE_ERRNOS:
        return no_space(where, detail)
    return None


def convert_sqlite_faults(engine: Engine) -> None:
    """Make `engine` raise a StorageError naming its database file for a storage fault,
    wherever it happens (opening, migrating, any statement or commit)."""
    event.listen(engine, "handle_error", _name_the_file, retval=True)


def _name_the_file(context: Any) -> BaseException | None:
    # The file is the failing engine's, not one this handler was made for: SQLAlchemy keeps
    # handle_error listeners on the dialect, which every agent engine shares
    # (`store.compiled`), so one handler serves them all.
    database = context.engine.url.database if context.engine is not None else None
    return sqlite_fault(context.original_exception, Path(database)) if database else None
