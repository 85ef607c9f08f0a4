"""Lineage: which sessions and transcript lines every entry came from. Code alone owns it.

_apply   carrying out validated decisions (add, merge, supersede, skip) with the union of
         origins and evidence, orphan pruning, and what a purge removes of entries
_read    reading lineage back: origins, evidence lines with their text, decisions,
         supersessions, the live entries
"""

from dreaming.memory.lineage._apply import (
    Applied,
    Bookkeeping,
    apply,
    forget_entries,
    forget_origins,
    prune_orphans,
    remove_entries,
)
from dreaming.memory.lineage._read import (
    DecisionRecord,
    EvidenceLine,
    Lineage,
    Origin,
    candidate_lineage,
    count_origins,
    decisions,
    entry_lineage,
    evidence_lines,
    keys_citing,
    keys_from_sessions,
    live_entries,
    live_entries_by_prefix,
    supersedes,
)

__all__ = [
    "Applied",
    "Bookkeeping",
    "DecisionRecord",
    "EvidenceLine",
    "Lineage",
    "Origin",
    "apply",
    "candidate_lineage",
    "count_origins",
    "decisions",
    "entry_lineage",
    "evidence_lines",
    "forget_entries",
    "forget_origins",
    "keys_citing",
    "keys_from_sessions",
    "live_entries",
    "live_entries_by_prefix",
    "prune_orphans",
    "remove_entries",
    "supersedes",
]
