"""Lineage: which sessions and transcript lines every entry came from. Code alone owns it.

_apply   carrying out validated decisions (add, merge, supersede, skip) with the union of
         origins and evidence, orphan pruning, and what a purge removes of entries
_read    reading lineage back: origins, evidence lines with their text, decisions,
         supersessions, the live entries
_restore entries taken back rather than decided: an undo's images put back, and the
         supersessions of the run undone dropped; `dreaming repair`'s adopted entries
"""

from dreaming.memory.lineage._apply import (
    Applied,
    Bookkeeping,
    apply_batch,
    forget_entries,
    forget_origins,
    prune_orphans,
    remove_entries,
    set_statuses,
)
from dreaming.memory.lineage._read import (
    DecisionRecord,
    EvidenceLine,
    Lineage,
    Origin,
    archived_entries,
    candidate_lineage,
    count_origins,
    decisions,
    entry_lineage,
    entry_statuses,
    evidence_lines,
    held_entries,
    keys_citing,
    keys_from_sessions,
    live_entries,
    live_entries_by_prefix,
    spoken_by,
    stated_at,
    successors,
    superseded_by,
    supersedes,
)
from dreaming.memory.lineage._restore import (
    ADOPTED,
    adopt_entries,
    drop_supersessions_of_run,
    restore_entries,
)

__all__ = [
    "ADOPTED",
    "Applied",
    "Bookkeeping",
    "DecisionRecord",
    "EvidenceLine",
    "Lineage",
    "Origin",
    "adopt_entries",
    "apply_batch",
    "archived_entries",
    "candidate_lineage",
    "count_origins",
    "decisions",
    "drop_supersessions_of_run",
    "entry_lineage",
    "entry_statuses",
    "evidence_lines",
    "forget_entries",
    "forget_origins",
    "held_entries",
    "keys_citing",
    "keys_from_sessions",
    "live_entries",
    "live_entries_by_prefix",
    "prune_orphans",
    "remove_entries",
    "restore_entries",
    "set_statuses",
    "spoken_by",
    "stated_at",
    "successors",
    "superseded_by",
    "supersedes",
]
