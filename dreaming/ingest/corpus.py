"""Corpus lines (`corpus_lines`, `corpus_dirty_days`): normalization, references, the
stored lines, and the dated corpus files in the workspace.

The database is the source of truth; a day's file is rewritten from it (atomically) after
the lines commit. Days touched by a commit are marked dirty in the same transaction and
cleared only after their file is written, so a crash in between is repaired by the next run.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    and_,
    bindparam,
    delete,
    select,
)

from dreaming import forking
from dreaming.store.bulk import iso_time, time_text
from dreaming.store.dialect import insert_ignore, is_sqlite
from dreaming.store.tables import CORPUS_LINES, DIRTY_DAYS
from dreaming.syntax import atomic_write

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def normalize(text: str, max_chars: int) -> str:
    """Collapse whitespace (a corpus line is one line), drop control characters, cap length."""
    # str.split() splits on runs of exactly what the regex \s matches (str.isspace): the
    # same as re.sub(r"\s+", " ", ...).strip(), about twice as fast.
    text = " ".join(_CONTROL.sub("", text).split())
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return text


def text_hash(text: str) -> str:
    return "b2:" + hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


# What a file name may hold that would break a corpus line: a line break splits the line in
# two, a bracket ends the reference early. Written as %XX, as in a URL.
_UNSAFE_IN_REF = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\[\]%]")


def _safe(part: str) -> str:
    return _UNSAFE_IN_REF.sub(lambda m: "".join(f"%{b:02X}" for b in m[0].encode()), part)


def reference(agent: str, session_id: str, line: int) -> str:
    return f"{_session_ref(agent, session_id)}#L{line}"


def _session_ref(agent: str, session_id: str) -> str:
    """What every line's reference of one session starts with (before "#L")."""
    return f"{_safe(agent)}/sessions/{_safe(agent)}/{_safe(session_id)}"


def day_of(ts: datetime | None, fallback: str) -> str:
    return ts.date().isoformat() if ts is not None else fallback


def render_day(agent: str, rows: Iterable[tuple[str, int, str]]) -> str:
    """rows: (session_id, line, text), already in file order. Each line starts with its
    `reference`; the part before "#L" is made once a session, not once a line."""
    refs: dict[str, str] = {}
    out = []
    for s, n, t in rows:
        ref = refs.get(s)
        if ref is None:
            ref = refs[s] = _session_ref(agent, s)
        out.append(f"[{ref}#L{n}] {t}\n")
    return "".join(out)


def write_day(folder: Path, day: str, content: str) -> Path:
    path = folder / f"{day}.txt"
    if content:
        atomic_write(path, content)
    else:
        path.unlink(missing_ok=True)
    return path


WRITE_BATCH = 32  # temp files open at once, whose fsyncs run together


def write_days(folder: Path, days: Iterable[tuple[str, str]]) -> int:
    """Write many days' files (day, content) as `write_day` does - temp file in the folder,
    fsync, rename over the old file (`syntax.atomic_write`), or unlink when empty - but
    fsync a batch of temp files at once, from a few threads: the disk's flushes overlap instead
    of queueing. Every file is still on disk before its rename. Returns the days written."""
    folder.mkdir(parents=True, exist_ok=True)
    batch: list[tuple[IO[str], str, Path]] = []
    written = 0
    try:
        for day, content in days:
            path = folder / f"{day}.txt"
            written += 1
            if not content:
                path.unlink(missing_ok=True)
                continue
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
            fh = os.fdopen(fd, "w", encoding="utf-8", newline="")
            batch.append((fh, tmp, path))
            fh.write(content)
            fh.flush()
            if len(batch) >= WRITE_BATCH:
                _commit(batch)
        _commit(batch)
    except BaseException:
        for open_file, temp, _ in batch:
            open_file.close()
            Path(temp).unlink(missing_ok=True)
        raise
    return written


def _commit(batch: list[tuple[IO[str], str, Path]]) -> None:
    """fsync every temp file of the batch, then rename each over its day file (a file leaves
    the batch once renamed, so a failure cleans up only what is still a temp file)."""
    fds = [fh.fileno() for fh, _, _ in batch]
    if len(fds) > 1:
        _fsync_all(fds)
    elif fds:
        os.fsync(fds[0])
    while batch:
        fh, tmp, path = batch[0]
        fh.close()
        Path(tmp).replace(path)
        batch.pop(0)


_FSYNC_THREADS = 8
_fsyncers: ThreadPoolExecutor | None = None
_fsyncers_lock = threading.Lock()


def _fsync_all(fds: Sequence[int]) -> None:
    """fsync the files together, from threads kept for the process: a fleet worker writes
    a batch for every agent, and starting eight threads each time cost five times the CPU
    of handing the fsyncs to threads already there."""
    global _fsyncers
    with _fsyncers_lock:
        if _fsyncers is None:
            _fsyncers = ThreadPoolExecutor(_FSYNC_THREADS, thread_name_prefix="corpus-fsync")
        pool = _fsyncers
    try:
        futures = [pool.submit(os.fsync, fd) for fd in fds]
    except RuntimeError:  # shut down (the interpreter exits, or `stop_fsync_threads` let the
        # threads go for a fork another thread prepares): one at a time, here
        for fd in fds:
            os.fsync(fd)
        return
    wait(futures)  # all done, failed or not, before the caller closes any of the files
    for future in futures:
        future.result()  # every file on disk (or its error raised) before any rename


def stop_fsync_threads() -> None:
    """Let the idle fsync threads go (the next write starts them again): a process about to
    fork must run no other thread."""
    global _fsyncers
    with _fsyncers_lock:
        pool, _fsyncers = _fsyncers, None
    if pool is not None:
        pool.shutdown(wait=True)


def _forget_fsyncers() -> None:
    # A forked child has none of its parent's threads: it starts its own when it needs them.
    global _fsyncers, _fsyncers_lock
    _fsyncers, _fsyncers_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_fsyncers)
forking.on_fork_check(stop_fsync_threads)


def add_files(
    conn: Connection,
    agent: str,
    files: Sequence[Sequence[dict[str, Any]]],
    times: Sequence[Sequence[str | None]] | None = None,
) -> list[list[tuple[int, dict[str, Any]]]]:
    """Insert the rows of several session files' reads (each in line order) that are not
    stored yet, in one statement (a page of rows at a time) whatever the number of files.
    Returns, per file, each inserted row with its id; the caller marks their days dirty
    (`mark_dirty`). A line stored already (a forced re-ingestion) is neither new nor folded
    again: the insert skips it and returns no id for it. `times`: each row's time as
    `iso_time` writes it, when the reader made them (else they are made here)."""
    rows = [r for file_rows in files for r in file_rows]
    if not rows:
        return [[] for _ in files]
    made = [t for file_times in times for t in file_times] if times is not None else None
    if made is not None and len(made) != len(rows):
        made = None
    if is_sqlite(conn):
        ids = _insert_sqlite(conn, rows, made)
    else:
        returned = conn.execute(_insert_returning(conn), rows)
        ids = _aligned(rows, {(s, n): i for s, n, i in returned})
    out: list[list[tuple[int, dict[str, Any]]]] = []
    start = 0
    for file_rows in files:
        end = start + len(file_rows)
        placed = zip(ids[start:end], file_rows, strict=True)
        out.append([(i, r) for i, r in placed if i is not None])
        start = end
    return out


def _aligned(rows: Sequence[dict[str, Any]], ids: dict[tuple[str, int], int]) -> list[int | None]:
    """Each row's id in `ids` (by its session and line), None for a row not inserted."""
    return [ids.get((r["session_id"], r["line"])) for r in rows]


def _insert_returning(conn: Connection) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING RETURNING (session, line, id): SQLAlchemy sends
    many rows as pages of multi-row VALUES and gathers what each page returns."""
    stmt = _RETURNING.get(conn.dialect.name)
    if stmt is None:
        c = CORPUS_LINES.c
        stmt = insert_ignore(conn, CORPUS_LINES).returning(c.session_id, c.line, c.id)
        _RETURNING[conn.dialect.name] = stmt
    return stmt


_RETURNING: dict[str, Any] = {}

# The SQLite path of the same insert, through the driver: at a corpus row a microsecond or so
# of SQLite's own work drowned in SQLAlchemy's per-row, per-column parameter handling (a
# tenth of light over big transcripts). The time column's own bind processor still converts
# the time, so the stored text is the one SQLAlchemy would store: the dialect's processor
# (`dialect_impl`), which writes "... 00:32:15.000000". The type's generic one hands the
# driver a datetime, which sqlite3 writes as "... 00:32:15" when the microseconds are 0, and
# SQL comparing times as text then orders those rows before their own second.
_COLUMNS = (
    "agent",
    "session_id",
    "line",
    "ts",
    "day",
    "role",
    "origin_class",
    "text",
    "text_hash",
    "speaker",
)
_PAGE = 1000  # rows a statement: 10,000 parameters, under SQLite's 32,766
_ROW_SQL = "(" + ", ".join("?" * len(_COLUMNS)) + ")"
# The largest id the table has ever had (AUTOINCREMENT keeps it here); none before its first row.
_SEQUENCE = "SELECT seq FROM sqlite_sequence WHERE name = 'corpus_lines'"
_SINCE = "SELECT session_id, line, id FROM corpus_lines WHERE id > ? ORDER BY id"


def _insert_sqlite(
    conn: Connection, rows: Sequence[dict[str, Any]], times: Sequence[str | None] | None
) -> list[int | None]:
    """Each row's id, in the rows' order, None for a row not inserted (stored already). No
    RETURNING: making and fetching a row per row cost a tenth of light's insert. A page whose
    every row went in took the ids after the last one, in order (AUTOINCREMENT: one above the
    largest ever, row by row); a page that skipped rows already stored (a forced
    re-ingestion) reads back the ids above the sequence as it stood, which only its rows can
    hold."""
    convert = time_text(conn.dialect, CORPUS_LINES.c.ts.type)
    if convert is not iso_time:  # the reader's times are not what this dialect stores
        times = None
    head = f"INSERT INTO corpus_lines ({', '.join(_COLUMNS)}) VALUES "
    tail = " ON CONFLICT DO NOTHING"
    out: list[int | None] = []
    for start in range(0, len(rows), _PAGE):
        page = rows[start : start + _PAGE]
        made = times[start : start + _PAGE] if times is not None else None
        params: list[Any] = []
        for k, r in enumerate(page):
            ts = r["ts"]
            params += (
                r["agent"],
                r["session_id"],
                r["line"],
                made[k] if made is not None else convert(ts) if ts is not None else None,
                r["day"],
                r["role"],
                r["origin_class"],
                r["text"],
                r["text_hash"],
                r["speaker"],
            )
        before = conn.exec_driver_sql(_SEQUENCE).scalar() or 0
        sql = head + ", ".join([_ROW_SQL] * len(page)) + tail
        result = conn.exec_driver_sql(sql, tuple(params))
        inserted, last = result.rowcount, result.lastrowid
        first = last - len(page) + 1 if last is not None else 0
        if inserted == len(page) and first > before and _holds(conn, first, page[0]):
            out += range(first, first + len(page))
        elif inserted:
            since = conn.exec_driver_sql(_SINCE, (before,))
            out += _aligned(page, {(s, n): i for s, n, i in since})
        else:
            out += [None] * len(page)
    return out


def _holds(conn: Connection, row_id: int, row: dict[str, Any]) -> bool:
    """Whether the corpus row `row_id` is `row` (its session and line): a check, one lookup
    a page, that ids were taken in the order the rows were given."""
    found = conn.exec_driver_sql(
        "SELECT session_id, line FROM corpus_lines WHERE id = ?", (row_id,)
    ).first()
    return found is not None and tuple(found) == (row["session_id"], row["line"])


def mark_dirty(conn: Connection, agent: str, days: Iterable[str]) -> None:
    """Mark `days` to be written out by `flush_files`, in the transaction of their lines."""
    rows = [{"agent": agent, "day": d} for d in sorted(set(days))]
    if rows:
        conn.execute(insert_ignore(conn, DIRTY_DAYS), rows)


DAYS_PER_QUERY = 31


def flush_files(engine: Engine, agent: str, folder: Path) -> int:
    """Rewrite every dirty day's corpus file from the table, then clear the marks. A mark is
    cleared only after its file is written (a crash in between rewrites it next run)."""
    with engine.connect() as conn:
        days = sorted(d for (d,) in conn.execute(_DIRTY_DAYS, {"agent": agent}))
        if not days:
            return 0

        def rendered() -> Iterator[tuple[str, str]]:
            # One query a month of days, its rows in day order. SQLite hands rows over as
            # they are read; PostgreSQL's client takes each query's result whole, so a
            # month of text is what it holds at most.
            for start in range(0, len(days), DAYS_PER_QUERY):
                chunk = days[start : start + DAYS_PER_QUERY]
                rows = conn.execute(_DAYS_LINES, {"agent": agent, "days": chunk})
                empty = set(chunk)
                for day, lines in _by_day(rows):
                    empty.discard(day)
                    yield day, render_day(agent, lines)
                for day in sorted(empty):  # a dirty day with no lines has lost them all
                    yield day, ""

        write_days(folder, rendered())
    with engine.begin() as conn:
        for chunk in range(0, len(days), 500):
            conn.execute(_CLEAN_DAYS, {"agent": agent, "days": days[chunk : chunk + 500]})
    return len(days)


# Built once (see `store.compiled`).
_DIRTY_DAYS = select(DIRTY_DAYS.c.day).where(DIRTY_DAYS.c.agent == bindparam("agent"))
_CLEAN_DAYS = delete(DIRTY_DAYS).where(
    and_(
        DIRTY_DAYS.c.agent == bindparam("agent"),
        DIRTY_DAYS.c.day.in_(bindparam("days", expanding=True)),
    )
)


_DAYS_LINES = (
    select(CORPUS_LINES.c.day, CORPUS_LINES.c.session_id, CORPUS_LINES.c.line, CORPUS_LINES.c.text)
    .where(
        and_(
            CORPUS_LINES.c.agent == bindparam("agent"),
            CORPUS_LINES.c.day.in_(bindparam("days", expanding=True)),
        )
    )
    .order_by(
        CORPUS_LINES.c.day,
        CORPUS_LINES.c.ts.asc().nulls_first(),
        CORPUS_LINES.c.session_id,
        CORPUS_LINES.c.line,
    )
)


def _by_day(rows: Iterable[Any]) -> Iterator[tuple[str, Iterator[tuple[str, int, str]]]]:
    """(day, its lines as (session, line, text)) of rows ordered by day."""
    for day, group in itertools.groupby(rows, key=lambda r: r[0]):
        yield day, ((r[1], r[2], r[3]) for r in group)


def lines_of(
    agent: str, sessions: Sequence[str], line_ids: Sequence[int] | None = None
) -> ColumnElement[bool]:
    """The stored lines of `sessions`, or only the lines `line_ids` (some lines of a
    session, as a purge of an edited transcript takes them)."""
    if line_ids is None:
        return and_(CORPUS_LINES.c.agent == agent, CORPUS_LINES.c.session_id.in_(sessions))
    return and_(CORPUS_LINES.c.agent == agent, CORPUS_LINES.c.id.in_(line_ids))


def forget_lines(
    conn: Connection,
    agent: str,
    sessions: Sequence[str],
    line_ids: Sequence[int] | None,
    days: Sequence[str],
) -> None:
    """A purge's part here: the lines leave the table, and the `days` they were on are
    marked dirty in the same transaction, so their files are rewritten without them."""
    conn.execute(delete(CORPUS_LINES).where(lines_of(agent, sessions, line_ids)))
    mark_dirty(conn, agent, days)


@dataclass(frozen=True, slots=True)
class StoredLine:
    id: int
    text: str
    day: str
    session_id: str
    line: int  # in the transcript file, 1-based


def stored_lines(
    conn: Connection, agent: str, sessions: Sequence[str], line_ids: Sequence[int] | None
) -> list[StoredLine]:
    """The stored lines of `sessions` (or only `line_ids`), as a purge plans with them."""
    c = CORPUS_LINES.c
    query = select(c.id, c.text, c.day, c.session_id, c.line)
    return [
        StoredLine(*row) for row in conn.execute(query.where(lines_of(agent, sessions, line_ids)))
    ]
