"""The SQLModel classes as typed SQLAlchemy `Table` constants: the one place models become tables.

Modules query and write through Core (`select(CANDIDATES)...`), not the ORM, so they need the
`Table` behind each model. SQLModel does not type `__table__`, hence one `type: ignore` here
instead of one per alias across the package.
"""

from __future__ import annotations

from sqlalchemy import Table
from sqlmodel import SQLModel

from dreaming.store import models


def _table(model: type[SQLModel]) -> Table:
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table


SESSIONS = _table(models.SessionRow)
FILE_CURSORS = _table(models.FileCursorRow)
CORPUS_LINES = _table(models.CorpusLineRow)
DIRTY_DAYS = _table(models.CorpusDirtyDayRow)
CANDIDATES = _table(models.CandidateRow)
CANDIDATE_EVIDENCE = _table(models.CandidateEvidenceRow)
RECALLS = _table(models.RecallRow)
ENTRIES = _table(models.EntryRow)
ORIGINS = _table(models.OriginRow)
ENTRY_EVIDENCE = _table(models.EntryEvidenceRow)
SUPERSESSIONS = _table(models.SupersessionRow)
DECISIONS = _table(models.DecisionRow)
JOURNAL = _table(models.JournalRow)
PROPOSALS = _table(models.ProposalRow)
TOMBSTONES = _table(models.TombstoneRow)
DIARY_WINDOWS = _table(models.DiaryWindowRow)
PURGES = _table(models.PurgeRow)
RUNS = _table(models.RunRow)
AGENT_STATE = _table(models.StateRow)
LLM_CALLS = _table(models.LLMCallRow)
SPEND = _table(models.SpendRow)
MEMORY_BACKUPS = _table(models.MemoryBackupRow)
BUDGET_LEDGER = _table(models.BudgetLedgerRow)
RATE_WINDOWS = _table(models.RateWindowRow)
FLEET_FIRES = _table(models.FleetFireRow)
