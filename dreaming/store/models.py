"""SQLModel tables of an agent's state. Every table carries `agent` so one PostgreSQL
database can hold a fleet; the per-agent SQLite file of the embedded default has one value.

The DDL lives in `migrations.py`; a test checks the two agree. Every datetime column is
typed `UTCDateTime` (`types.py`), so it reads back aware in UTC whatever the backend or the
SQLModel version (newer SQLModels infer a UTC type of their own, older ones a naive one).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger
from sqlmodel import Field, SQLModel

from dreaming.store.statuses import CandidateStatus, EntryStatus
from dreaming.store.types import UTCDateTime


class SessionRow(SQLModel, table=True):
    __tablename__ = "sessions"

    agent: str = Field(primary_key=True)
    session_id: str = Field(primary_key=True)
    path: str
    format: str | None = None
    session_key: str | None = None
    channel: str | None = None
    chat_type: str | None = None
    external_source: str | None = None
    participants: str = "[]"  # JSON list
    kind: str = "interactive"
    created_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    status: str = "admitted"  # admitted | excluded | internal | forgotten
    reason: str | None = None  # policy:<field>=<value> (<file>) | forgotten | internal:<kind>
    first_seen: datetime = Field(sa_type=UTCDateTime)
    last_read: datetime | None = Field(default=None, sa_type=UTCDateTime)
    classified_by: str | None = None  # index | source | record | transcript | operator
    trust: str | None = None  # owner | untrusted: what its user lines were derived as


class FileCursorRow(SQLModel, table=True):
    __tablename__ = "file_cursors"

    agent: str = Field(primary_key=True)
    path: str = Field(primary_key=True)
    session_id: str
    offset: int = Field(default=0, sa_type=BigInteger)  # byte offsets pass 2 GiB
    line: int = 0
    head: str = ""
    size: int = Field(default=0, sa_type=BigInteger)
    mtime_ns: int = Field(default=0, sa_type=BigInteger)  # nanoseconds overflow INTEGER
    updated_at: datetime = Field(sa_type=UTCDateTime)


class CorpusLineRow(SQLModel, table=True):
    __tablename__ = "corpus_lines"

    id: int | None = Field(default=None, primary_key=True)
    agent: str
    session_id: str
    line: int
    ts: datetime | None = Field(default=None, sa_type=UTCDateTime)
    day: str  # YYYY-MM-DD of the agent's clock; names the corpus file
    role: str
    origin_class: str  # owner | agent | untrusted | system
    text: str
    text_hash: str
    # Whom memory names as having said it (a sender of a session with several people);
    # NULL for the owner of a one-to-one chat, the agent, and where no transcript names one.
    speaker: str | None = None


class CandidateRow(SQLModel, table=True):
    __tablename__ = "candidates"

    id: int | None = Field(default=None, primary_key=True)
    agent: str
    key: str
    text: str
    tokens: str  # space-joined sorted content tokens, for near-duplicate folding
    first_seen: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_seen: datetime | None = Field(default=None, sa_type=UTCDateTime)
    sessions: int = 0
    days: int = 0
    owner_lines: int = 0
    agent_lines: int = 0
    untrusted_lines: int = 0
    system_lines: int = 0
    durable_cue: bool = False
    score: float = 0.0
    status: str = CandidateStatus.PENDING.value  # a CandidateStatus
    evidence_count: int = 0
    decided_evidence: int = 0  # evidence_count when last decided: new evidence reopens it
    rem_boost: float = 0.0
    updated_at: datetime = Field(sa_type=UTCDateTime)
    stale: bool = False  # evidence changed; signals not yet recomputed (see refresh_stale)
    salience: float | None = None  # what the text tells, in [0, 1]; None: not yet scored
    features: str | None = None  # space-joined names of the salience features that fired
    # Whose first-person claim it is ("I live in Leeds" said by Caroline): part of its
    # identity, so two people's "I" never fold into one; NULL for the owner's and the rest.
    speaker: str | None = None


class CandidateEvidenceRow(SQLModel, table=True):
    __tablename__ = "candidate_evidence"

    candidate_id: int = Field(primary_key=True)
    corpus_line_id: int = Field(primary_key=True)
    agent: str
    session_id: str
    day: str
    origin_class: str


class EntryRow(SQLModel, table=True):
    __tablename__ = "entries"

    agent: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    text: str
    status: str = EntryStatus.LIVE.value  # an EntryStatus
    created_at: datetime = Field(sa_type=UTCDateTime)
    updated_at: datetime = Field(sa_type=UTCDateTime)
    recall_count: int = 0
    last_recalled_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class RecallRow(SQLModel, table=True):
    __tablename__ = "recalls"

    agent: str = Field(primary_key=True)
    entry_key: str = Field(primary_key=True)
    corpus_line_id: int = Field(primary_key=True)
    session_id: str
    observed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class TombstoneRow(SQLModel, table=True):
    __tablename__ = "tombstones"

    agent: str = Field(primary_key=True)
    session_id: str = Field(primary_key=True)
    session_key: str | None = None
    reason: str = "forgotten"
    created_at: datetime = Field(sa_type=UTCDateTime)
    detail: str = "{}"  # JSON


class DiaryWindowRow(SQLModel, table=True):
    """(day, session): a session REM's window read for the diary entry of that day. Written
    before the entry, so every session an entry may draw on is listed; forget removes the
    entries whose window read a purged session (`dreaming.memory.diary`)."""

    __tablename__ = "diary_windows"

    agent: str = Field(primary_key=True)
    day: str = Field(primary_key=True)
    session_id: str = Field(primary_key=True)


class CorpusDirtyDayRow(SQLModel, table=True):
    """Days whose corpus file must be rewritten from the table (set in the same transaction
    as the lines, cleared after the file is written), so a crash in between is repaired."""

    __tablename__ = "corpus_dirty_days"

    agent: str = Field(primary_key=True)
    day: str = Field(primary_key=True)


class RunRow(SQLModel, table=True):
    __tablename__ = "runs"

    id: int | None = Field(default=None, primary_key=True)
    agent: str
    job: str | None = None
    phases: str  # comma-separated
    started_at: datetime = Field(sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # a runs.Outcome value (the store cannot import runs: it is below it)
    outcome: str = "running"
    summary: str = "{}"  # JSON
    worker: str | None = None  # host:pid of the process that ran it (fleets spread runs)


class StateRow(SQLModel, table=True):
    """Small key/value facts: the agent clock, last run of each phase."""

    __tablename__ = "agent_state"

    agent: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    value: str


class OriginRow(SQLModel, table=True):
    """(entry, session): the only link from a memory back to its sources."""

    __tablename__ = "origins"

    agent: str = Field(primary_key=True)
    entry_key: str = Field(primary_key=True)
    session_id: str = Field(primary_key=True)
    session_key: str | None = None
    origin_class: str
    observed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class EntryEvidenceRow(SQLModel, table=True):
    """The corpus lines an entry was built from, unioned by the same rules as origins."""

    __tablename__ = "entry_evidence"

    agent: str = Field(primary_key=True)
    entry_key: str = Field(primary_key=True)
    session_id: str = Field(primary_key=True)
    line: int = Field(primary_key=True)


class SupersessionRow(SQLModel, table=True):
    __tablename__ = "supersessions"

    agent: str = Field(primary_key=True)
    new_key: str = Field(primary_key=True)
    old_key: str = Field(primary_key=True)
    run_id: int | None = None
    created_at: datetime = Field(sa_type=UTCDateTime)


class DecisionRow(SQLModel, table=True):
    """Every decision deep applied (or, in a dry run, would apply), and which path made it."""

    __tablename__ = "decisions"

    id: int | None = Field(default=None, primary_key=True)
    agent: str
    run_id: int | None = None
    candidate_key: str
    action: str
    targets: str = "[]"  # JSON list of entry keys
    entry_key: str | None = None
    path: str  # llm | deterministic
    created_at: datetime = Field(sa_type=UTCDateTime)
    reason: str | None = None  # the model's reason, or why the deterministic path decided so


class LLMCallRow(SQLModel, table=True):
    __tablename__ = "llm_calls"

    id: int | None = Field(default=None, primary_key=True)
    agent: str
    run_id: int | None = None
    model: str
    request: str
    response: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    duration_s: float = 0.0
    attempt: int = 1
    outcome: str
    error: str | None = None
    status: int | None = None
    created_at: datetime = Field(sa_type=UTCDateTime)


class MemoryBackupRow(SQLModel, table=True):
    __tablename__ = "memory_backups"

    id: int | None = Field(default=None, primary_key=True)
    agent: str
    run_id: int | None = None
    content: str
    created_at: datetime = Field(sa_type=UTCDateTime)


class SpendRow(SQLModel, table=True):
    """What LLM calls cost per agent and UTC day: the daily cap reads it across runs."""

    __tablename__ = "spend"

    agent: str = Field(primary_key=True)
    day: str = Field(primary_key=True)
    usd: float = 0.0
    tokens: int = 0
    calls: int = 0


class JournalRow(SQLModel, table=True):
    """Before-images for `runs undo`: one row per entry key (`kind` entry) or candidate id
    (`kind` candidate) a run's decisions touched, as it was before the run first touched it
    (`before` JSON; NULL: it did not exist). `sessions` names every session whose text the
    image holds, so a purge can drop it; a `purged` row then says the run cannot be undone."""

    __tablename__ = "entry_journal"

    id: int | None = Field(default=None, primary_key=True)
    agent: str
    run_id: int = Field(sa_type=BigInteger)
    kind: str  # entry | candidate | purged
    ref: str
    before: str | None = None
    sessions: str = ""  # space-separated session ids
    created_at: datetime = Field(sa_type=UTCDateTime)


class ProposalRow(SQLModel, table=True):
    """A validated deep decision staged for a person (review mode), with what the preview
    shows (`detail` JSON: candidate text, evidence, target texts, diff)."""

    __tablename__ = "proposals"

    id: int | None = Field(default=None, primary_key=True)
    agent: str
    run_id: int | None = Field(default=None, sa_type=BigInteger)
    status: str  # a review.ProposalStatus
    candidate_id: int = Field(sa_type=BigInteger)
    candidate_key: str
    decision: str  # JSON: the Applied decision
    detail: str  # JSON
    sessions: str = ""  # space-separated session ids whose text the proposal holds
    created_at: datetime = Field(sa_type=UTCDateTime)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    decided_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    note: str | None = None  # a rejection's reason, or why it went stale


class PurgeRow(SQLModel, table=True):
    """The audit trail of `dreaming forget`: who was forgotten, when, and what was removed
    (counts and ids only: a purge record must not itself keep the purged text). `pending`
    holds the snippets still to be scrubbed from files while a purge is incomplete; it is
    emptied as soon as the files are done."""

    __tablename__ = "purges"

    id: int | None = Field(default=None, primary_key=True)
    agent: str
    selector: str  # JSON
    created_at: datetime = Field(sa_type=UTCDateTime)
    completed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    report: str = "{}"  # JSON
    pending: str = "[]"  # JSON list of snippets, emptied on completion


class BudgetLedgerRow(SQLModel, table=True):
    """A shared budget's day (`scope` is e.g. "fleet"): what is spent, and what calls in
    flight have reserved at their worst case. Every worker reserves here before a call."""

    __tablename__ = "budget_ledger"

    scope: str = Field(primary_key=True)
    day: str = Field(primary_key=True)
    usd_reserved: float = 0.0
    usd_spent: float = 0.0
    tokens_reserved: int = 0
    tokens_spent: int = 0
    calls_reserved: int = 0
    calls: int = 0


class RateWindowRow(SQLModel, table=True):
    """Requests sent per LLM profile in one fixed window (a minute), across all workers."""

    __tablename__ = "rate_windows"

    profile: str = Field(primary_key=True)
    window_start: int = Field(primary_key=True)  # unix seconds
    requests: int = 0


class FleetFireRow(SQLModel, table=True):
    """A scheduled fire claimed for one agent: the first scheduler to insert it enqueues."""

    __tablename__ = "fleet_fires"

    job: str = Field(primary_key=True)
    agent: str = Field(primary_key=True)
    fire: str = Field(primary_key=True)  # the scheduled instant, ISO 8601 in UTC
    queue_job_id: int | None = None
    created_at: datetime = Field(sa_type=UTCDateTime)
