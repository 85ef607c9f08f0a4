"""One SQLite dialect, and so one compiled-statement cache, for every agent database a
process opens.

SQLAlchemy keys a compiled statement by the dialect object that compiled it, and each
`create_engine` makes a dialect of its own: a fleet worker opening a thousand agents' files
compiled each agent's ~140 distinct statements a thousand times over (a tenth of an agent's
night). Engines opened here share the first one's dialect, already initialised against the
same sqlite3 library, and its statement cache; their pools, connections and events stay
their own.

The statements a night runs are built once, at module level, with bound parameters (lists
as expanding ones), not anew on every call: a statement object built per call, and the
cache key SQLAlchemy then works out for it, cost 85-125 us against 17-19 us for one built
once, several times what SQLite takes to run most of them (a twentieth of an agent's
night, when half its statements were built per call).
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Engine

_lock = threading.Lock()
_shared: tuple[Any, Any] | None = None  # (dialect, compiled cache) of the first engine


def share(engine: Engine) -> Engine:
    """Make `engine` (a SQLite file's, connected once so its dialect is initialised) use the
    process's shared dialect and statement cache; the first engine offered provides them."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = (engine.dialect, engine._compiled_cache)
            return engine
        dialect, cache = _shared
    if type(engine.dialect) is not type(dialect):
        return engine  # another driver: keep its own
    engine.dialect = dialect
    engine.pool._dialect = dialect
    engine._compiled_cache = cache
    return engine
