"""`dreaming verify`: check the invariants any operator can check, for one agent.

Each check returns violations (strings naming the ids involved); a clean agent has none.
Person-edited MEMORY.md blocks are reported as notes, not violations: they are allowed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, and_, func, select, text

from dreaming.errors import WorkspaceFileError
from dreaming.ingest import claims as claims_mod
from dreaming.ingest import corpus, sources
from dreaming.ingest.admission import Status, admit
from dreaming.ingest.tombstones import file_tombstones
from dreaming.ingest.transcripts import Cursor, cursor_is_valid
from dreaming.memory import archive, capacity, diary, memory_file, memory_sync
from dreaming.memory.lineage import ADOPTED, archived_entries, live_entries
from dreaming.paths import Paths
from dreaming.repair import strays
from dreaming.runs import FORGOTTEN, Outcome, rem_summaries
from dreaming.store import state
from dreaming.store.migrations import MIGRATIONS, applied
from dreaming.store.state import StateKey
from dreaming.store.tables import (
    CANDIDATE_EVIDENCE,
    CANDIDATES,
    CORPUS_LINES,
    ENTRY_EVIDENCE,
    FILE_CURSORS,
    ORIGINS,
    PURGES,
    RECALLS,
    RUNS,
    SESSIONS,
    TOMBSTONES,
)


@dataclass
class Verdict:
    agent: str
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: dict[str, int] = field(default_factory=dict)  # check -> violations found

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "ok": self.ok,
            "violations": self.violations,
            "notes": self.notes,
            "checks": self.checks,
        }


def _check(verdict: Verdict, name: str, problems: list[str]) -> None:
    verdict.checks[name] = len(problems)
    verdict.violations.extend(f"{name}: {p}" for p in problems)


def verify(engine: Engine, paths: Paths, agent: str) -> Verdict:
    v = Verdict(agent)
    with engine.connect() as conn:
        _check(v, "schema", _schema(conn))
        live = dict(live_entries(conn, agent))
        archived = dict(archived_entries(conn, agent))
        held = live | archived
        stopped = _stopped_run(conn, agent)
        files = memory_sync.Files.of(paths, agent)
        memory = _memory_file(conn, paths, agent, live, archived, v)
        shelf = _archive_file(files, archived)
        budget = _budget(files, live, v)
        if state.get(conn, agent, StateKey.MEMORY_DIRTY) == "1":
            why = stopped or "a run or a purge stopped before it wrote MEMORY.md"
            memory = [f"{p}; {why}: run again to write it" for p in memory]
            shelf = [f"{p}; {why}: run again to write it" for p in shelf]
        _check(v, "memory_file", memory)
        _check(v, "archive_file", shelf)
        _check(v, "memory_budget", budget)
        _check(v, "orphan_origins", _orphans(conn, agent, held))
        _check(v, "entries_without_origins", _unsourced(conn, agent, held))
        _check(v, "text_from_unlisted_sessions", _text_sources(conn, paths, agent, held))
        _adopted(conn, agent, v)
        _check(v, "tombstoned_sessions", _tombstoned(conn, paths, agent))
        _check(v, "diary_from_forgotten_sessions", _diary_derived(conn, paths, agent))
        _check(v, "admission", _admission(conn, paths, agent))
        _check(v, "transcripts_unchanged", _transcripts(conn, agent))
        corpus_files = _corpus_files(conn, paths, agent)
        if stopped:
            corpus_files = [f"{p}; {stopped}: run again to write it" for p in corpus_files]
        _check(v, "corpus_files", corpus_files)
        _check(v, "search_index", _index(conn, agent, held))
        pending = conn.execute(
            select(PURGES.c.id).where(
                and_(PURGES.c.agent == agent, PURGES.c.completed_at.is_(None))
            )
        ).all()
        _check(
            v,
            "incomplete_purges",
            [
                f"purge #{r[0]} has not finished (it was interrupted: `dreaming forget` or the"
                " next run completes it)"
                for r in pending
            ],
        )
    return v


# How a run that did not finish ended, as verify's hints name it.
_STOPPED = {
    Outcome.INTERRUPTED: "was interrupted",
    Outcome.FAILED: "failed",
    Outcome.ABANDONED: "died",
    Outcome.RUNNING: "has not finished (its process died, or it is still running)",
}


def _stopped_run(conn: Connection, agent: str) -> str | None:
    """ "run #N was interrupted" (failed, died...) when the agent's last run did not finish,
    else None: what a file left behind by it is explained with."""
    row = conn.execute(
        select(RUNS.c.id, RUNS.c.outcome)
        .where(RUNS.c.agent == agent)
        .order_by(RUNS.c.id.desc())
        .limit(1)
    ).first()
    if row is None or row.outcome not in _STOPPED:
        return None
    return f"run #{row.id} {_STOPPED[Outcome(row.outcome)]}"


def _schema(conn: Connection) -> list[str]:
    have = applied(conn)
    want = [name for name, _ in MIGRATIONS]
    return [] if have == want else [f"migrations applied {have} != expected {want}"]


def _memory_file(
    conn: Connection,
    paths: Paths,
    agent: str,
    live: dict[str, str],
    archived: dict[str, str],
    v: Verdict,
) -> list[str]:
    path = paths.memory_file(agent)
    try:
        content = memory_file.load_text(path)
    except WorkspaceFileError as err:
        return [str(err)]
    doc = memory_file.parse(content or "")
    problems = []
    edited = doc.edited_keys(live)
    for key in sorted(edited):
        v.notes.append(f"MEMORY.md block {key} was edited by a person")
    for key in _repeated(b.key for b in doc.blocks):
        problems.append(f"block {key} appears more than once")
    found = strays(conn, agent, content)
    if found.unrecorded:
        problems.append(unrecorded_problem(path, agent, len(found.unrecorded)))
    for key in found.retired:
        problems.append(
            f"block {key} has no live entry: the database retired it and MEMORY.md lags"
            " (an interrupted run; run again to rewrite it)"
        )
    for key in sorted(set(live) - doc.holds(live)):
        problems.append(f"live entry {key} has no block in MEMORY.md")
    for key in sorted(set(archived) & {b.key for b in doc.live_blocks()}):
        problems.append(f"block {key} is an archived entry: MEMORY.md should not show it")
    return problems


def _repeated(keys: Iterable[str]) -> list[str]:
    """The keys that occur more than once, sorted (counted once: a file of 20,000 lines)."""
    return sorted(k for k, n in Counter(keys).items() if n > 1)


def _archive_file(files: memory_sync.Files, archived: dict[str, str]) -> list[str]:
    """The archive holds exactly the archived entries, as dreaming writes it."""
    try:
        content = archive.read(files.archive)
    except WorkspaceFileError as err:
        return [str(err)]
    want = archive.render(list(archived.items()), files.group_of)
    if (content or "") == want:
        return []
    doc = memory_file.parse(content or "")
    problems = []
    for block in doc.edited_blocks():
        problems.append(f"archive line {block.key} does not match its key (edited?)")
    shown = [b.key for b in doc.blocks]
    for key in _repeated(shown):
        problems.append(f"archive line {key} appears more than once")
    for key in sorted(set(shown) - set(archived)):
        problems.append(f"archive line {key} is not an archived entry")
    for key in sorted(set(archived) - set(shown)):
        problems.append(f"archived entry {key} has no line in {files.archive}")
    for block in doc.live_blocks():
        if block.key in archived and block.text != memory_file.one_line(archived[block.key]):
            problems.append(f"archive line {block.key} differs from its entry")
    if not problems:
        problems.append(f"{files.archive} differs from what the database says (header, order)")
    return problems


def _budget(files: memory_sync.Files, live: dict[str, str], v: Verdict) -> list[str]:
    """MEMORY.md is within its budget, unless the operator's text alone is over it (a note:
    that text is never cut)."""
    cap = files.capacity
    if cap.max_chars is None and cap.max_lines is None:
        return []
    try:
        content = memory_file.load_text(files.memory) or ""
    except WorkspaceFileError:
        return []  # named by the memory_file check
    chars, lines = capacity.measure(content, crlf=memory_sync.is_crlf(files.memory), unit=cap.unit)
    over = []
    if cap.max_chars is not None and chars > cap.max_chars:
        counted = "bytes" if cap.unit == "bytes" else "characters"
        over.append(f"{chars:,} {counted}, over its budget of {cap.max_chars:,}")
    if cap.max_lines is not None and lines > cap.max_lines:
        over.append(f"{lines:,} lines, over its budget of {cap.max_lines:,}")
    if not over:
        return []
    if not any(b.key in live for b in memory_file.parse(content).live_blocks()):
        v.notes.append(f"MEMORY.md's operator text alone is {' and '.join(over)}: never cut")
        return []
    return [f"MEMORY.md is {' and '.join(over)} (run again to archive what does not fit)"]


def unrecorded_problem(path: Path, agent: str, count: int) -> str:
    """What verify says of managed lines no database record stands behind."""
    return (
        f"{path} has {count} managed line(s) the database has no record of (was it deleted"
        f" or rolled back?): `dreaming repair --agent {agent}` adopts them (so does the next"
        " run); until then a write of MEMORY.md from the database would drop them"
    )


def verify_without_state(paths: Paths, agent: str) -> Verdict:
    """An agent with no database: fine unless its MEMORY.md shows managed lines (the
    database was deleted), which nothing stands behind."""
    v = Verdict(agent)
    path = paths.memory_file(agent)
    try:
        doc = memory_file.read(path)
    except WorkspaceFileError as err:
        _check(v, "memory_file", [str(err)])
        return v
    count = len({b.key for b in doc.live_blocks()})
    _check(v, "memory_file", [unrecorded_problem(path, agent, count)] if count else [])
    return v


def _orphans(conn: Connection, agent: str, live: dict[str, str]) -> list[str]:
    problems = []
    for table, label in ((ORIGINS, "origin"), (ENTRY_EVIDENCE, "evidence")):
        for (key,) in conn.execute(
            select(table.c.entry_key).where(table.c.agent == agent).distinct()
        ):
            if key not in live:
                problems.append(f"{label} rows for {key}, which is not an entry memory holds")
    return problems


def _adopted(conn: Connection, agent: str, v: Verdict) -> None:
    count = conn.execute(
        select(func.count()).where(and_(ORIGINS.c.agent == agent, ORIGINS.c.session_id == ADOPTED))
    ).scalar_one()
    if count:
        v.notes.append(
            f"{count} entries were adopted from MEMORY.md (by `dreaming repair` or a run, after"
            " the database was lost): their sources are unknown"
        )


def _unsourced(conn: Connection, agent: str, live: dict[str, str]) -> list[str]:
    sourced = {
        k for (k,) in conn.execute(select(ORIGINS.c.entry_key).where(ORIGINS.c.agent == agent))
    }
    return [f"entry {k} has no origin" for k in sorted(set(live) - sourced)]


def _text_sources(conn: Connection, paths: Paths, agent: str, live: dict[str, str]) -> list[str]:
    """An entry whose words are a candidate's claim must list a session that candidate was
    said in among its origins: else a purge of that session would leave its text in memory
    (a merge applied without its target's lineage did that). Entries the model reworded
    match no claim and are not judged here; adopted ones have no known sources."""
    settings = paths.settings.candidates
    claims_of: dict[str, set[str]] = {}
    for key, body in live.items():
        # The date and speaker framing holds no content word: the claims are the statement's.
        found = claims_mod.extract(
            body,
            min_words=settings.min_claim_words,
            max_words=settings.max_claim_words,
        )
        claims_of[key] = {c.key for c in found}
    wanted = sorted({k for keys in claims_of.values() for k in keys})
    said_in: dict[str, set[str]] = defaultdict(set)
    ev, cand = CANDIDATE_EVIDENCE.c, CANDIDATES.c
    for chunk in (wanted[i : i + 500] for i in range(0, len(wanted), 500)):
        for claim, session in conn.execute(
            select(cand.key, ev.session_id)
            .select_from(CANDIDATES.join(CANDIDATE_EVIDENCE, ev.candidate_id == cand.id))
            .where(and_(cand.agent == agent, cand.key.in_(chunk)))
            .distinct()
        ):
            said_in[claim].add(session)
    origins: dict[str, set[str]] = defaultdict(set)
    for key, session in conn.execute(
        select(ORIGINS.c.entry_key, ORIGINS.c.session_id).where(ORIGINS.c.agent == agent)
    ):
        origins[key].add(session)
    problems = []
    for key, claims in sorted(claims_of.items()):
        if ADOPTED in origins[key]:
            continue
        for claim in sorted(claims):
            sessions = said_in.get(claim)
            if sessions and not sessions & origins[key]:
                problems.append(
                    f"entry {key} states what session(s) {', '.join(sorted(sessions))} said,"
                    " but none of them is among its origins (a purge of them would leave it):"
                    " `dreaming forget --session` each, or `runs undo` the run that wrote it"
                )
                break
    return problems


def _tombstoned(conn: Connection, paths: Paths, agent: str) -> list[str]:
    gone = set(file_tombstones(paths, agent)) | {
        s
        for (s,) in conn.execute(select(TOMBSTONES.c.session_id).where(TOMBSTONES.c.agent == agent))
    }
    if not gone:
        return []
    problems = []
    for table, label in (
        (CORPUS_LINES, "corpus lines"),
        (CANDIDATE_EVIDENCE, "candidate evidence"),
        (ORIGINS, "entry origins"),
        (ENTRY_EVIDENCE, "entry evidence"),
        (RECALLS, "recalls"),
    ):
        rows = conn.execute(
            select(table.c.session_id)
            .where(and_(table.c.agent == agent, table.c.session_id.in_(sorted(gone))))
            .distinct()
        ).all()
        problems += [f"{label} from forgotten session {r[0]}" for r in rows]
    return problems


def _diary_derived(conn: Connection, paths: Paths, agent: str) -> list[str]:
    """A diary entry whose recorded window read a forgotten session, or a REM run summary
    that still names the themes or diary text of a night that read one: what REM derived
    from it without quoting it, which a purge removes (invariant 4)."""
    gone = set(file_tombstones(paths, agent)) | {
        s
        for (s,) in conn.execute(select(TOMBSTONES.c.session_id).where(TOMBSTONES.c.agent == agent))
    }
    if not gone:
        return []
    problems = []
    windows = diary.windows(conn, agent)
    try:
        written = diary.entries(diary.read(paths.dreams_file(agent)))
    except WorkspaceFileError:
        written = []  # the memory_file check names a file it cannot read
    for entry in written:
        read = sorted(windows.get(entry.day, set()) & gone)
        if read:
            problems.append(
                f"DREAMS.md entry {entry.day} was written from forgotten session(s)"
                f" {', '.join(read)}: `dreaming forget --session {read[0]}` removes it"
            )
    for run_id, rem in rem_summaries(conn, agent):
        read = sorted(set(rem.get("read_sessions") or ()) & gone)
        said = rem.get("diary_text") or any(
            isinstance(t, dict) and t.get("concept") != FORGOTTEN for t in rem.get("themes") or ()
        )
        if read and said and not rem.get("forgotten"):
            problems.append(
                f"run {run_id}'s REM summary keeps themes or diary text from forgotten"
                f" session(s) {', '.join(read)}"
            )
    return problems


def _corpus_files(conn: Connection, paths: Paths, agent: str) -> list[str]:
    by_day: dict[str, list[tuple[str, int, str]]] = defaultdict(list)
    for day, sid, line, body in conn.execute(
        text(
            "SELECT day, session_id, line, text FROM corpus_lines WHERE agent = :a "
            "ORDER BY day, ts NULLS FIRST, session_id, line"
        ),
        {"a": agent},
    ):
        by_day[day].append((sid, line, body))
    folder = paths.corpus_dir(agent)
    files = {p.stem: p for p in folder.glob("*.txt")} if folder.is_dir() else {}
    problems = []
    for day in sorted(set(by_day) | set(files)):
        want = corpus.render_day(agent, by_day.get(day, []))
        path = files.get(day)
        # Bytes, not text: a file whose bytes were damaged differs, it does not crash.
        have = path.read_bytes() if path is not None else b""
        if have != want.encode("utf-8"):
            problems.append(f"corpus file {day}.txt differs from the corpus table")
    return problems


def _index(conn: Connection, agent: str, live: dict[str, str]) -> list[str]:
    indexed: dict[str, str] = dict(
        conn.execute(text("SELECT key, text FROM entries_fts WHERE agent = :a"), {"a": agent}).all()
    )
    problems = [
        f"index row for {k}, which is not an entry memory holds"
        for k in sorted(set(indexed) - set(live))
    ]
    problems += [f"entry {k} is not in the search index" for k in sorted(set(live) - set(indexed))]
    return problems


_CONTRIBUTORS = (
    (CORPUS_LINES, "corpus lines"),
    (CANDIDATE_EVIDENCE, "candidate evidence"),
    (ORIGINS, "entry origins"),
    (ENTRY_EVIDENCE, "entry evidence"),
    (RECALLS, "recalls"),
)


def _admission(conn: Connection, paths: Paths, agent: str) -> list[str]:
    """Every session that contributes anything is admitted under its classification *now*
    (index, record, transcript metadata, settings), and its lines were derived as that."""
    contributing: dict[str, set[str]] = defaultdict(set)
    for table, label in _CONTRIBUTORS:
        for (sid,) in conn.execute(
            select(table.c.session_id).where(table.c.agent == agent).distinct()
        ):
            contributing[sid].add(label)
    contributing.pop(ADOPTED, None)  # no session: its sources are unknown, and said so
    if not contributing:
        return []
    records = {
        r["session_id"]: dict(r)
        for r in conn.execute(select(SESSIONS).where(SESSIONS.c.agent == agent)).mappings()
    }
    tombstoned = set(file_tombstones(paths, agent)) | {
        sid
        for (sid,) in conn.execute(
            select(TOMBSTONES.c.session_id).where(TOMBSTONES.c.agent == agent)
        )
    }
    on_disk = {sf.session_id: sf for sf in sources.discover(paths, [agent]).get(agent, [])}
    settings = paths.settings
    problems = []
    for sid in sorted(contributing):
        what = ", ".join(sorted(contributing[sid]))
        record = records.get(sid)
        if record is None:
            problems.append(f"session {sid} has {what} but no admission record")
            continue
        sf = on_disk.get(sid)
        if sf is None:  # the transcript is gone: its last recorded admission stands
            status, trust = record["status"], record["trust"]
        else:
            _, decision, trust = admit(sf, record, settings, tombstoned=sid in tombstoned)
            status = decision.status.value
        if status != Status.ADMITTED.value:
            problems.append(f"session {sid} is {status} now but has {what}")
        elif trust != record["trust"]:
            problems.append(
                f"session {sid} was derived as {record['trust']} but is {trust} now ({what})"
            )
        if trust is not None:
            wrong = conn.execute(
                select(CORPUS_LINES.c.line).where(
                    and_(
                        CORPUS_LINES.c.agent == agent,
                        CORPUS_LINES.c.session_id == sid,
                        CORPUS_LINES.c.role == "user",
                        CORPUS_LINES.c.origin_class != trust,
                    )
                )
            ).first()
            if wrong is not None:
                problems.append(f"session {sid}: user line {wrong[0]} is not classed {trust}")
    return problems


def _transcripts(conn: Connection, agent: str) -> list[str]:
    """Evidence still matches its line: every transcript still holds, byte for byte, what
    its cursor says was read (an edit before the cursor is re-derived by the next night)."""
    problems = []
    for r in conn.execute(select(FILE_CURSORS).where(FILE_CURSORS.c.agent == agent)).mappings():
        path = Path(r["path"])
        if not path.exists():
            continue  # a deleted transcript changes nothing that was derived from it
        cursor = Cursor(offset=r["offset"], line=r["line"], head=r["head"], size=r["size"])
        if not cursor_is_valid(path, cursor):
            problems.append(
                f"session {r['session_id']}: {path.name} changed before what was read "
                "(a night re-derives it)"
            )
    return problems
