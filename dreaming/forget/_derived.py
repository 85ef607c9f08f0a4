"""What REM derived from the purged sessions without quoting them: diary entries, the themes
and diary text of run summaries, REM's LLM calls, and the report files that show any of it.

Whether REM read a session is decided from what it recorded: the window of each diary entry
(`diary_windows`) and each REM run's `read_sessions`. A REM run or diary entry from before
those were recorded is decided from days, conservatively: REM's window holds the candidates
last seen in its lookback before its day, but a candidate's evidence (and so its themes and
quotes) reaches back to the first day it was seen, so such an entry or run counts as having
read every session with a line on or before its day. The purge knows those days: they are
its corpus lines' (`Plan.days`), found before anything is deleted.

Nothing here asks a model: an entry whose window read a purged session is removed, not
rewritten (REM writes tonight's entry again from what remains on its next run).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, and_, select

from dreaming import runs
from dreaming.errors import WorkspaceFileError
from dreaming.memory import diary
from dreaming.paths import Paths
from dreaming.store.tables import LLM_CALLS

from ._scrub import MIN_SNIPPET_CHARS, needles_of, searcher


@dataclass
class Derived:
    """What a purge removes or redacts because REM's window read one of its sessions."""

    diary_days: list[str] = field(default_factory=list)  # DREAMS.md entries to remove
    window_days: list[str] = field(default_factory=list)  # their windows, and others naming it
    rem_runs: list[int] = field(default_factory=list)  # run summaries losing themes and diary
    rem_calls: list[int] = field(default_factory=list)  # REM's LLM calls in those runs


def find(
    conn: Connection, paths: Paths, agent: str, sessions: Collection[str], days: Sequence[str]
) -> Derived:
    purged = set(sessions)
    first = min(days) if days else None
    windows = diary.windows(conn, agent)
    out = Derived()
    for entry in _diary_entries(paths, agent):
        window = windows.get(entry.day)
        if _read(window, entry.day, purged, first):
            out.diary_days.append(entry.day)
    out.window_days = sorted(
        {d for d, w in windows.items() if w & purged} | set(out.diary_days) & set(windows)
    )
    touched: list[tuple[int, dict[str, Any]]] = []
    for run_id, rem in runs.rem_summaries(conn, agent):
        if rem.get("forgotten"):
            continue  # redacted by an earlier purge: nothing of it is left to take
        read = rem.get("read_sessions")
        day = rem.get("day")
        window = set(read) if isinstance(read, list) else None
        if (day is not None and _read(window, str(day), purged, first)) or (day in out.diary_days):
            touched.append((run_id, rem))
    out.rem_runs = [run_id for run_id, _ in touched]
    out.rem_calls = _rem_calls(conn, agent, touched)
    return out


def _read(window: set[str] | None, day: str, purged: set[str], first: str | None) -> bool:
    """Whether the night of `day` read a purged session: its recorded window names one, or,
    with no window recorded, a purged line was on or before that day."""
    if window is not None:
        return bool(window & purged)
    return first is not None and first <= day


def _diary_entries(paths: Paths, agent: str) -> list[diary.DiaryEntry]:
    try:
        return diary.entries(diary.read(paths.dreams_file(agent)))
    except WorkspaceFileError:
        return []  # not a file forget can rewrite exactly; `verify` names it


def _rem_calls(
    conn: Connection, agent: str, touched: Sequence[tuple[int, dict[str, Any]]]
) -> list[int]:
    """The LLM calls of the touched runs that REM made: a prompt naming one of its themes, or
    a reply carrying its diary text (the model's words, which quote nothing)."""
    if not touched:
        return []
    marks: set[str] = set()
    for _, rem in touched:
        for t in rem.get("themes") or []:
            if isinstance(t, dict) and t.get("concept"):
                marks.add('"concept": ' + json.dumps(t["concept"], ensure_ascii=False))
        for line in str(rem.get("diary_text") or "").splitlines():
            if len(line.strip()) >= MIN_SNIPPET_CHARS and not line.startswith("## "):
                marks.add(line.strip())
    needles = needles_of(marks)
    c = LLM_CALLS.c
    rows = conn.execute(
        select(c.id, c.request, c.response).where(
            and_(c.agent == agent, c.run_id.in_([run_id for run_id, _ in touched]))
        )
    )
    holds = searcher(needles)
    return [int(i) for i, req, resp in rows if holds(req) or holds(resp)]


def remove_entries(paths: Paths, agent: str, days: Collection[str]) -> list[str]:
    """Remove the diary entries of `days` from DREAMS.md (a purge's file step)."""
    if not days:
        return []
    try:
        return diary.remove_days(paths.dreams_file(agent), days)
    except WorkspaceFileError:
        return []
