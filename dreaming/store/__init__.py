"""Agent state: SQLModel tables, append-only migrations, engines and the per-agent lock."""

from dreaming.store.engine import (
    advisory_lock,
    agent_lock,
    open_engine,
    open_shared_engine,
    redact,
    session,
)
from dreaming.store.migrations import MIGRATIONS, migrate, schema_version

__all__ = [
    "MIGRATIONS",
    "advisory_lock",
    "agent_lock",
    "migrate",
    "open_engine",
    "open_shared_engine",
    "redact",
    "schema_version",
    "session",
]
