"""The deep phase: promote candidates into long-term memory.

Selection is deterministic (gates, highest score first). Each batch is decided by the LLM
when a profile is configured and budget remains, else - and whenever the LLM fails, runs out
of budget or returns decisions that do not validate - by the deterministic consolidator.
Decisions are applied by code (`dreaming.memory.lineage`) one transaction per batch, and MEMORY.md
is rewritten from the database after each batch (`dreaming.memory.memory_sync`).

The parts, each private:

- ``_phase``: `DeepPhase`, the run and its batch loop
- ``_selection``: which candidates, their related entries and evidence snippets
- ``_model``: the model as decider (prompt under opaque ids, re-ask, validation)
- ``_deterministic``: the deterministic consolidator, with ``_wording`` (how its entries
  read) and ``_likeness`` (its near-duplicate test)
- ``_apply``: applying or staging decisions, MEMORY.md's size budget and write
- ``_summary``: `DeepSummary` and the dry run's preview
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreaming.lazy import lazy_names
from dreaming.phases.deep._summary import DeepSummary

if TYPE_CHECKING:
    from dreaming.phases.deep._phase import DeepPhase
    from dreaming.phases.deep._selection import PROMOTABLE_CLASSES

# The phase itself (its model client, prompt templates and reply schema) loads when first
# named: every run reports a DeepSummary, but a light-only run never decides anything.
_LAZY = {
    "DeepPhase": "dreaming.phases.deep._phase",
    "PROMOTABLE_CLASSES": "dreaming.phases.deep._selection",
}

__getattr__ = lazy_names(__name__, _LAZY)


__all__ = ["PROMOTABLE_CLASSES", "DeepPhase", "DeepSummary"]
