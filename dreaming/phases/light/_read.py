"""Reading what is new in one session file: its speech, stripped of what dreaming must not
ingest and normalized, as corpus rows; the reader's skips are counted in the summary.

Who said a line (`speaker`): where several people talk in one session - a group chat, or a
chat whose transcript names more than one sender (two people talking, as LoCoMo's are) -
each user line names its sender, and memory says whose it is ("Caroline: I ..."). In any
other session the one person talking is the owner, who stays implicit (NULL), however the
transcript names them. Senders are told apart by id; OpenClaw's own clients (control UI,
TUI) are no sender. Whether several people talk is judged from this read and, when it reads
on from a cursor, the senders at the head of the file; lines stored before a second person
first spoke keep what they were read as (a rewrite of the file reads them again).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dreaming.config import Settings
from dreaming.ingest import corpus
from dreaming.ingest.admission import GROUP_CHATS, origin_class
from dreaming.ingest.claims import Claim
from dreaming.ingest.sessions import utc
from dreaming.ingest.tags import Scope, TagRegistry
from dreaming.ingest.transcripts import Cursor, TranscriptReader, head_senders
from dreaming.messages import Format, Kind, Message, SessionFile, Speaker
from dreaming.phases.light._summary import LightSummary
from dreaming.store.bulk import iso_time


@dataclass(frozen=True, slots=True)
class Read:
    """One completed read: the rows it found, the newest timestamp among them, the
    reader (where it stopped, where it started, whether it started again from the top) and
    the file's stat taken just before it (what its cursor records)."""

    reader: TranscriptReader
    rows: list[dict[str, Any]]
    newest: datetime | None
    st: os.stat_result
    # Each row's time as SQLite stores it (`iso_time`), made where the read is: in the
    # reading child, the light process's insert is spared formatting them.
    times: list[str | None]
    # Each row's claims (`claims.extract` of its text), where the reading child had time to
    # spare for them; None: light extracts them itself.
    claims: list[tuple[Claim, ...] | None] | None = None


def read_new_lines(
    sf: SessionFile,
    prev: dict[str, Any] | None,
    st: os.stat_result,
    settings: Settings,
    registry: TagRegistry,
    summary: LightSummary,
) -> Read | None:
    """Read `sf` from its cursor `prev` (None: from the start). None: the file could not be
    read to its end now, so nothing is concluded about its lines."""
    start: Cursor | None = None
    if prev is not None:
        start = Cursor(
            offset=prev["offset"], line=prev["line"], head=prev["head"], size=prev["size"]
        )
    before = Counter(summary.skips)
    reader = TranscriptReader(
        sf,
        start=start,
        skips=summary.skips,
        max_line_bytes=settings.corpus.max_transcript_line_bytes,
    )
    fallback_day = ""  # made when a line without a time first needs it (`_fallback_day`)
    max_chars = settings.corpus.max_line_chars
    rows: list[dict[str, Any]] = []
    senders: list[Speaker | None] = []
    newest: datetime | None = None
    for msg in reader:
        if msg.kind is not Kind.SPEECH:
            summary.dropped[msg.kind.value] += 1
            continue
        summary.messages += 1
        text = corpus.normalize(registry.strip(msg.text, Scope.DREAMING_INGESTION), max_chars)
        if not text:
            summary.dropped["empty-after-strip"] += 1
            continue
        ts = utc(msg.timestamp)
        if ts is None:
            fallback_day = fallback_day or _fallback_day(sf, reader, st)
        elif newest is None or ts > newest:
            newest = ts
        rows.append(_row(sf, msg, ts, text, fallback_day))
        senders.append(msg.speaker)
    summary.note_skips(sf, summary.skips - before)
    if not reader.completed:
        return None
    if any(senders) and _several_people(sf, senders, reader):
        for row, who in zip(rows, senders, strict=True):
            row["speaker"] = who.name if who is not None else None
    return Read(reader, rows, newest, st, [iso_time(r["ts"]) for r in rows])


def _fallback_day(sf: SessionFile, reader: TranscriptReader, st: os.stat_result) -> str:
    """The day of a line without a time of its own: the session's start (the header's, read
    by now with the file's head, when discovery left it unread), else the file's mtime."""
    started = reader.header_time if sf.start_unread else sf.created_at
    return (started or datetime.fromtimestamp(st.st_mtime, UTC)).date().isoformat()


def _several_people(
    sf: SessionFile, senders: list[Speaker | None], reader: TranscriptReader
) -> bool:
    """Whether more than one person talks in `sf` (see the module's docstring)."""
    if sf.chat_type is not None and sf.chat_type.casefold() in GROUP_CHATS:
        return True
    ids = {s.id for s in senders if s is not None}
    if len(ids) < 2 and reader.started_at and reader.format is Format.OPENCLAW:
        ids.update(s.id for s in head_senders(sf.path))
    return len(ids) > 1


def _row(
    sf: SessionFile, msg: Message, ts: datetime | None, text: str, fallback_day: str
) -> dict[str, Any]:
    return {
        "agent": sf.agent,
        "session_id": sf.session_id,
        "line": msg.line,
        "ts": ts,
        "day": corpus.day_of(ts, fallback_day),
        "role": msg.role.value,
        "origin_class": origin_class(sf, msg).value,
        "text": text,
        "text_hash": corpus.text_hash(text),
        "speaker": None,
    }
