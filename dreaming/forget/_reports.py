"""Report files: `dreaming report --out FILE` writes a page that quotes evidence lines, entry
text and session ids, wherever the operator says (there is no default place). Each agent's
state records where a report about it was written (`record_report`); forget lists those
files, and the pages that look like reports in the places one is usually put (the state
folder, dreaming's own folder under it, the agent's workspace and its memory folder), and
removes the ones that mention a purged session or its text. A page is removed, not rewritten:
`dreaming report` writes it again from what remains.
"""

from __future__ import annotations

import html
import json
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from dreaming.paths import Paths
from dreaming.store import state
from dreaming.store.state import StateKey

from ._scrub import carries

# What only our report page says (its heading; see prompts/report.html.j2).
_MARK = "<h1>dreaming report</h1>"
_MAX_READ = 64 * 1024 * 1024  # a page bigger than this is no report of ours


def record_report(conn: Connection, agent: str, path: Path) -> None:
    """Note that a report about `agent` was written at `path` (absolute)."""
    known = _recorded(conn, agent)
    where = str(path.resolve())
    if where not in known:
        state.put(conn, agent, StateKey.REPORT_FILES, json.dumps([*known, where]))


def _recorded(conn: Connection, agent: str) -> list[str]:
    try:
        value = json.loads(state.get(conn, agent, StateKey.REPORT_FILES) or "[]")
    except ValueError:
        return []
    return [str(p) for p in value] if isinstance(value, list) else []


def keep_recorded(conn: Connection, agent: str, gone: Collection[str]) -> None:
    """Drop the report files that were removed (or are no longer there) from the record."""
    known = _recorded(conn, agent)
    kept = [p for p in known if p not in gone and Path(p).is_file()]
    if kept != known:
        state.put(conn, agent, StateKey.REPORT_FILES, json.dumps(kept))


def report_files(conn: Connection | None, paths: Paths, agent: str) -> list[Path]:
    """Every report file forget knows of for `agent`: those recorded, then the report pages
    found in the state folder, dreaming's folder, the workspace and its memory folder."""
    found: dict[str, Path] = {}
    if conn is not None:
        for p in _recorded(conn, agent):
            found.setdefault(p, Path(p))
    ws = paths.workspace(agent)
    pages = [
        *_html(paths.state_dir, deep=False),
        *_html(paths.home, deep=True),
        *_html(ws, deep=False),
        *_html(ws / "memory", deep=False),
    ]
    for page in pages:
        if _is_report(page):
            found.setdefault(str(page.resolve()), page)
    return [found[k] for k in sorted(found)]


def _html(folder: Path, *, deep: bool) -> list[Path]:
    if not folder.is_dir():
        return []
    try:
        return sorted(p for p in (folder.rglob if deep else folder.glob)("*.htm*") if p.is_file())
    except OSError:
        return []


def _read(path: Path) -> str | None:
    try:
        if path.stat().st_size > _MAX_READ:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _is_report(path: Path) -> bool:
    content = _read(path)
    return content is not None and _MARK in content


def mentions(
    content: str, sessions: Collection[str], needles: Sequence[str], entries: Collection[str]
) -> bool:
    """Whether a report page names a purged session, an entry the purge removes, or quotes
    purged text (the page escapes what it shows: it is read unescaped)."""
    plain = html.unescape(content)
    return (
        carries(plain, needles)
        or any(s and s in plain for s in sessions)
        or any(k and k in plain for k in entries)
    )


def plan_reports(
    conn: Connection | None,
    paths: Paths,
    agent: str,
    sessions: Collection[str],
    needles: Sequence[str],
    entries: Collection[str],
) -> list[dict[str, Any]]:
    """Each known report file and what the purge does with it: `remove` (it mentions what is
    purged), `keep` (it does not) or `missing` (recorded, no longer there)."""
    out: list[dict[str, Any]] = []
    for path in report_files(conn, paths, agent):
        content = _read(path) if path.is_file() else None
        if content is None:
            out.append({"path": str(path), "action": "missing"})
            continue
        action = "remove" if mentions(content, sessions, needles, entries) else "keep"
        out.append({"path": str(path), "action": action})
    return out


def unlink_reports(listing: Sequence[dict[str, Any]]) -> list[str]:
    """Remove the files `plan_reports` marked `remove`. Returns their paths."""
    removed: list[str] = []
    for item in listing:
        if item["action"] != "remove":
            continue
        Path(item["path"]).unlink(missing_ok=True)
        removed.append(item["path"])
    return removed
