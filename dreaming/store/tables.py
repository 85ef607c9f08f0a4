"""The state's tables as SQLAlchemy Core `Table` constants, generated from the SQLModel
classes in `models.py` by `python -m dreaming.store.codegen`: do not edit, regenerate.

Modules query and write through Core (`select(CANDIDATES)...`), never the ORM; importing these
instead of the models keeps SQLModel, the ORM and pydantic's model building out of start-up.
tests/test_store.py fails when this file and the models disagree.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Float, Integer, MetaData, String, Table

from dreaming.store.types import UTCDateTime

METADATA = MetaData()

SESSIONS = Table(
    "sessions",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("session_id", String(), primary_key=True, nullable=False),
    Column("path", String(), nullable=False),
    Column("format", String(), nullable=True),
    Column("session_key", String(), nullable=True),
    Column("channel", String(), nullable=True),
    Column("chat_type", String(), nullable=True),
    Column("external_source", String(), nullable=True),
    Column("participants", String(), nullable=False, default="[]"),
    Column("kind", String(), nullable=False, default="interactive"),
    Column("created_at", UTCDateTime(), nullable=True),
    Column("status", String(), nullable=False, default="admitted"),
    Column("reason", String(), nullable=True),
    Column("first_seen", UTCDateTime(), nullable=False),
    Column("last_read", UTCDateTime(), nullable=True),
    Column("classified_by", String(), nullable=True),
    Column("trust", String(), nullable=True),
)

FILE_CURSORS = Table(
    "file_cursors",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("path", String(), primary_key=True, nullable=False),
    Column("session_id", String(), nullable=False),
    Column("offset", BigInteger(), nullable=False, default=0),
    Column("line", Integer(), nullable=False, default=0),
    Column("head", String(), nullable=False, default=""),
    Column("size", BigInteger(), nullable=False, default=0),
    Column("mtime_ns", BigInteger(), nullable=False, default=0),
    Column("updated_at", UTCDateTime(), nullable=False),
)

CORPUS_LINES = Table(
    "corpus_lines",
    METADATA,
    Column("id", Integer(), primary_key=True, nullable=False),
    Column("agent", String(), nullable=False),
    Column("session_id", String(), nullable=False),
    Column("line", Integer(), nullable=False),
    Column("ts", UTCDateTime(), nullable=True),
    Column("day", String(), nullable=False),
    Column("role", String(), nullable=False),
    Column("origin_class", String(), nullable=False),
    Column("text", String(), nullable=False),
    Column("text_hash", String(), nullable=False),
    Column("speaker", String(), nullable=True),
)

DIRTY_DAYS = Table(
    "corpus_dirty_days",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("day", String(), primary_key=True, nullable=False),
)

CANDIDATES = Table(
    "candidates",
    METADATA,
    Column("id", Integer(), primary_key=True, nullable=False),
    Column("agent", String(), nullable=False),
    Column("key", String(), nullable=False),
    Column("text", String(), nullable=False),
    Column("tokens", String(), nullable=False),
    Column("first_seen", UTCDateTime(), nullable=True),
    Column("last_seen", UTCDateTime(), nullable=True),
    Column("sessions", Integer(), nullable=False, default=0),
    Column("days", Integer(), nullable=False, default=0),
    Column("owner_lines", Integer(), nullable=False, default=0),
    Column("agent_lines", Integer(), nullable=False, default=0),
    Column("untrusted_lines", Integer(), nullable=False, default=0),
    Column("system_lines", Integer(), nullable=False, default=0),
    Column("durable_cue", Boolean(), nullable=False, default=False),
    Column("score", Float(), nullable=False, default=0.0),
    Column("status", String(), nullable=False, default="pending"),
    Column("evidence_count", Integer(), nullable=False, default=0),
    Column("decided_evidence", Integer(), nullable=False, default=0),
    Column("rem_boost", Float(), nullable=False, default=0.0),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("stale", Boolean(), nullable=False, default=False),
    Column("salience", Float(), nullable=True),
    Column("features", String(), nullable=True),
    Column("speaker", String(), nullable=True),
)

CANDIDATE_EVIDENCE = Table(
    "candidate_evidence",
    METADATA,
    Column("candidate_id", Integer(), primary_key=True, nullable=False),
    Column("corpus_line_id", Integer(), primary_key=True, nullable=False),
    Column("agent", String(), nullable=False),
    Column("session_id", String(), nullable=False),
    Column("day", String(), nullable=False),
    Column("origin_class", String(), nullable=False),
)

RECALLS = Table(
    "recalls",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("entry_key", String(), primary_key=True, nullable=False),
    Column("corpus_line_id", Integer(), primary_key=True, nullable=False),
    Column("session_id", String(), nullable=False),
    Column("observed_at", UTCDateTime(), nullable=True),
)

ENTRIES = Table(
    "entries",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("key", String(), primary_key=True, nullable=False),
    Column("text", String(), nullable=False),
    Column("status", String(), nullable=False, default="live"),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("recall_count", Integer(), nullable=False, default=0),
    Column("last_recalled_at", UTCDateTime(), nullable=True),
)

ORIGINS = Table(
    "origins",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("entry_key", String(), primary_key=True, nullable=False),
    Column("session_id", String(), primary_key=True, nullable=False),
    Column("session_key", String(), nullable=True),
    Column("origin_class", String(), nullable=False),
    Column("observed_at", UTCDateTime(), nullable=True),
)

ENTRY_EVIDENCE = Table(
    "entry_evidence",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("entry_key", String(), primary_key=True, nullable=False),
    Column("session_id", String(), primary_key=True, nullable=False),
    Column("line", Integer(), primary_key=True, nullable=False),
)

SUPERSESSIONS = Table(
    "supersessions",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("new_key", String(), primary_key=True, nullable=False),
    Column("old_key", String(), primary_key=True, nullable=False),
    Column("run_id", Integer(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
)

DECISIONS = Table(
    "decisions",
    METADATA,
    Column("id", Integer(), primary_key=True, nullable=False),
    Column("agent", String(), nullable=False),
    Column("run_id", Integer(), nullable=True),
    Column("candidate_key", String(), nullable=False),
    Column("action", String(), nullable=False),
    Column("targets", String(), nullable=False, default="[]"),
    Column("entry_key", String(), nullable=True),
    Column("path", String(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("reason", String(), nullable=True),
)

JOURNAL = Table(
    "entry_journal",
    METADATA,
    Column("id", Integer(), primary_key=True, nullable=False),
    Column("agent", String(), nullable=False),
    Column("run_id", BigInteger(), nullable=False),
    Column("kind", String(), nullable=False),
    Column("ref", String(), nullable=False),
    Column("before", String(), nullable=True),
    Column("sessions", String(), nullable=False, default=""),
    Column("created_at", UTCDateTime(), nullable=False),
)

PROPOSALS = Table(
    "proposals",
    METADATA,
    Column("id", Integer(), primary_key=True, nullable=False),
    Column("agent", String(), nullable=False),
    Column("run_id", BigInteger(), nullable=True),
    Column("status", String(), nullable=False),
    Column("candidate_id", BigInteger(), nullable=False),
    Column("candidate_key", String(), nullable=False),
    Column("decision", String(), nullable=False),
    Column("detail", String(), nullable=False),
    Column("sessions", String(), nullable=False, default=""),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("expires_at", UTCDateTime(), nullable=True),
    Column("decided_at", UTCDateTime(), nullable=True),
    Column("note", String(), nullable=True),
)

TOMBSTONES = Table(
    "tombstones",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("session_id", String(), primary_key=True, nullable=False),
    Column("session_key", String(), nullable=True),
    Column("reason", String(), nullable=False, default="forgotten"),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("detail", String(), nullable=False, default="{}"),
)

DIARY_WINDOWS = Table(
    "diary_windows",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("day", String(), primary_key=True, nullable=False),
    Column("session_id", String(), primary_key=True, nullable=False),
)

PURGES = Table(
    "purges",
    METADATA,
    Column("id", Integer(), primary_key=True, nullable=False),
    Column("agent", String(), nullable=False),
    Column("selector", String(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("completed_at", UTCDateTime(), nullable=True),
    Column("report", String(), nullable=False, default="{}"),
    Column("pending", String(), nullable=False, default="[]"),
)

RUNS = Table(
    "runs",
    METADATA,
    Column("id", Integer(), primary_key=True, nullable=False),
    Column("agent", String(), nullable=False),
    Column("job", String(), nullable=True),
    Column("phases", String(), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("ended_at", UTCDateTime(), nullable=True),
    Column("outcome", String(), nullable=False, default="running"),
    Column("summary", String(), nullable=False, default="{}"),
    Column("worker", String(), nullable=True),
)

AGENT_STATE = Table(
    "agent_state",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("key", String(), primary_key=True, nullable=False),
    Column("value", String(), nullable=False),
)

LLM_CALLS = Table(
    "llm_calls",
    METADATA,
    Column("id", Integer(), primary_key=True, nullable=False),
    Column("agent", String(), nullable=False),
    Column("run_id", Integer(), nullable=True),
    Column("model", String(), nullable=False),
    Column("request", String(), nullable=False),
    Column("response", String(), nullable=True),
    Column("input_tokens", Integer(), nullable=False, default=0),
    Column("output_tokens", Integer(), nullable=False, default=0),
    Column("cost_usd", Float(), nullable=True),
    Column("duration_s", Float(), nullable=False, default=0.0),
    Column("attempt", Integer(), nullable=False, default=1),
    Column("outcome", String(), nullable=False),
    Column("error", String(), nullable=True),
    Column("status", Integer(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
)

SPEND = Table(
    "spend",
    METADATA,
    Column("agent", String(), primary_key=True, nullable=False),
    Column("day", String(), primary_key=True, nullable=False),
    Column("usd", Float(), nullable=False, default=0.0),
    Column("tokens", Integer(), nullable=False, default=0),
    Column("calls", Integer(), nullable=False, default=0),
)

MEMORY_BACKUPS = Table(
    "memory_backups",
    METADATA,
    Column("id", Integer(), primary_key=True, nullable=False),
    Column("agent", String(), nullable=False),
    Column("run_id", Integer(), nullable=True),
    Column("content", String(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
)

BUDGET_LEDGER = Table(
    "budget_ledger",
    METADATA,
    Column("scope", String(), primary_key=True, nullable=False),
    Column("day", String(), primary_key=True, nullable=False),
    Column("usd_reserved", Float(), nullable=False, default=0.0),
    Column("usd_spent", Float(), nullable=False, default=0.0),
    Column("tokens_reserved", Integer(), nullable=False, default=0),
    Column("tokens_spent", Integer(), nullable=False, default=0),
    Column("calls_reserved", Integer(), nullable=False, default=0),
    Column("calls", Integer(), nullable=False, default=0),
)

RATE_WINDOWS = Table(
    "rate_windows",
    METADATA,
    Column("profile", String(), primary_key=True, nullable=False),
    Column("window_start", Integer(), primary_key=True, nullable=False),
    Column("requests", Integer(), nullable=False, default=0),
)

FLEET_FIRES = Table(
    "fleet_fires",
    METADATA,
    Column("job", String(), primary_key=True, nullable=False),
    Column("agent", String(), primary_key=True, nullable=False),
    Column("fire", String(), primary_key=True, nullable=False),
    Column("queue_job_id", Integer(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
)
