"""Column types of the state's tables beyond what SQLModel infers.

`UTCDateTime`: every moment dreaming stores is UTC. SQLite's DATETIME and PostgreSQL's
TIMESTAMP (without time zone, as the migrations create them) both hand back naive
datetimes, which readers then had to repair one by one. This type does it once: written as
naive UTC (so the DDL and the stored values stay what they were), read back aware in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import DateTime, Dialect
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None or value.tzinfo is None:
            return value  # naive: already UTC by the package's convention
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
