"""Writes `tables.py`, the SQLAlchemy Core tables every query runs against, from the SQLModel
classes in `models.py`. Run after changing a model (tests/test_store.py fails until you do):

    .venv/bin/python -m dreaming.store.codegen

Why generated: the models stay the one declaration of the schema, but building them takes
SQLModel, the ORM and a pydantic model per table, about 0.2 s of every process's start-up
(a light run over a few sessions is mostly start-up). The code only ever needs the `Table`
behind each model, so those are written out once, as plain Core.
"""

from __future__ import annotations

import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Any

from sqlalchemy import Column, Table
from sqlmodel import SQLModel

from dreaming.store import models

# The constant each model's table is known by, in the order they are declared.
NAMES: dict[str, type[SQLModel]] = {
    "SESSIONS": models.SessionRow,
    "FILE_CURSORS": models.FileCursorRow,
    "CORPUS_LINES": models.CorpusLineRow,
    "DIRTY_DAYS": models.CorpusDirtyDayRow,
    "CANDIDATES": models.CandidateRow,
    "CANDIDATE_EVIDENCE": models.CandidateEvidenceRow,
    "RECALLS": models.RecallRow,
    "ENTRIES": models.EntryRow,
    "ORIGINS": models.OriginRow,
    "ENTRY_EVIDENCE": models.EntryEvidenceRow,
    "SUPERSESSIONS": models.SupersessionRow,
    "DECISIONS": models.DecisionRow,
    "JOURNAL": models.JournalRow,
    "PROPOSALS": models.ProposalRow,
    "TOMBSTONES": models.TombstoneRow,
    "DIARY_WINDOWS": models.DiaryWindowRow,
    "PURGES": models.PurgeRow,
    "RUNS": models.RunRow,
    "AGENT_STATE": models.StateRow,
    "LLM_CALLS": models.LLMCallRow,
    "SPEND": models.SpendRow,
    "MEMORY_BACKUPS": models.MemoryBackupRow,
    "BUDGET_LEDGER": models.BudgetLedgerRow,
    "RATE_WINDOWS": models.RateWindowRow,
    "FLEET_FIRES": models.FleetFireRow,
}

# SQLModel's column types and what they are written as. AutoString is a String whose
# length only MySQL needs; on SQLite and PostgreSQL it compiles and binds as String.
_TYPES: dict[str, str] = {
    "AutoString": "String()",
    "Integer": "Integer()",
    "BigInteger": "BigInteger()",
    "Float": "Float()",
    "Boolean": "Boolean()",
    "UTCDateTime": "UTCDateTime()",
}

HEADER = '''"""The state's tables as SQLAlchemy Core `Table` constants, generated from the SQLModel
classes in `models.py` by `python -m dreaming.store.codegen`: do not edit, regenerate.

Modules query and write through Core (`select(CANDIDATES)...`), never the ORM; importing these
instead of the models keeps SQLModel, the ORM and pydantic's model building out of start-up.
tests/test_store.py fails when this file and the models disagree.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Float, Integer, MetaData, String, Table

from dreaming.store.types import UTCDateTime

METADATA = MetaData()
'''


def model_table(model: type[SQLModel]) -> Table:
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table


def _literal(value: Any) -> str:
    if isinstance(value, Enum):
        value = value.value  # a status default: stored as its string either way
    if not isinstance(value, bool | int | float | str):
        raise TypeError(f"cannot write default {value!r} as a literal")
    return repr(value)


def _column(column: Column[Any]) -> str:
    kind = type(column.type).__name__
    if kind not in _TYPES:
        raise TypeError(f"{column.table.name}.{column.name}: no Core spelling for {kind}")
    args = [repr(column.name), _TYPES[kind]]
    if column.primary_key:
        args.append("primary_key=True")
    args.append(f"nullable={column.nullable}")
    if column.default is not None:
        args.append(f"default={_literal(column.default.arg)}")  # type: ignore[attr-defined]
    if column.autoincrement != "auto":
        args.append(f"autoincrement={column.autoincrement!r}")
    if column.index:
        args.append("index=True")
    if column.unique:
        args.append("unique=True")
    return f"    Column({', '.join(args)}),"


def render() -> str:
    parts = [HEADER]
    for name, model in NAMES.items():
        table = model_table(model)
        if table.indexes or len(table.constraints) > 1 or table.foreign_keys:
            raise TypeError(f"{table.name}: indexes and constraints live in migrations.py")
        cols = "\n".join(_column(c) for c in table.columns)
        parts.append(f"\n{name} = Table(\n    {table.name!r},\n    METADATA,\n{cols}\n)\n")
    return "".join(parts)


def main() -> None:
    target = Path(__file__).with_name("tables.py")
    target.write_text(render(), encoding="utf-8")
    # One spelling for the generated file and the hand-written ones (quotes, wrapping).
    subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(target)], check=False)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
