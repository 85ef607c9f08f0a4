"""Agent state: SQLModel tables, append-only migrations, engines and the per-agent lock."""

from dreaming.store.engine import agent_lock, open_engine, session
from dreaming.store.migrations import MIGRATIONS, migrate, schema_version

__all__ = ["MIGRATIONS", "agent_lock", "migrate", "open_engine", "schema_version", "session"]
