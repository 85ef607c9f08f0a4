"""Statements and helpers the candidate modules share: ids in chunks, the stale and cue
marks, the evidence rows joined with their corpus lines."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    bindparam,
    update,
)

from dreaming.store.tables import (
    CANDIDATE_EVIDENCE,
    CANDIDATES,
    CORPUS_LINES,
)

T = TypeVar("T")


def utc_now() -> datetime:
    return datetime.now(UTC)


def set_where_ids(conn: Connection, stmt: Any, ids: Iterable[int]) -> None:
    for chunk in chunks(sorted(set(ids))):
        conn.execute(stmt, {"ids": chunk})


IDS = CANDIDATES.c.id.in_(bindparam("ids", expanding=True))


MARK_STALE = update(CANDIDATES).where(IDS).values(stale=True)


MARK_CUE = update(CANDIDATES).where(IDS).values(durable_cue=True)


def mark_stale(conn: Connection, ids: Iterable[int]) -> None:
    set_where_ids(conn, MARK_STALE, ids)


def chunks(items: Sequence[T], size: int = 500) -> Iterable[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def joined_evidence() -> Any:
    return CANDIDATE_EVIDENCE.join(
        CORPUS_LINES, CORPUS_LINES.c.id == CANDIDATE_EVIDENCE.c.corpus_line_id
    )
