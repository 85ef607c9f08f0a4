"""Candidates: folding claims from new corpus lines, their stored signals, and scores.

A candidate's signals are always recomputed from its evidence rows (never incremented in
place), so re-reading a rewritten file or purging a session leaves exact counts behind.

    _fold     claims of new corpus lines joined to candidates, with evidence and recalls
    _signals  counts refreshed from evidence, salience, scores, the clock
    _decided  what becomes of a candidate after light: outcomes, proposals, undo, boosts
    _forget   a purge's part: evidence and recalls of a scope, and what they supported
    _common   statements the parts share
"""

from dreaming.ingest.candidates._decided import (
    mark_proposed,
    reject_proposed,
    reopen_proposed,
    set_boosts,
    set_outcomes,
)
from dreaming.ingest.candidates._fold import Folder, FoldStats
from dreaming.ingest.candidates._forget import (
    candidates_of,
    count_evidence,
    count_recalls,
    forget_lines,
)
from dreaming.ingest.candidates._signals import (
    advance_clock,
    read_clock,
    refresh_candidates,
    refresh_stale,
    rescore,
    scores_current,
)

__all__ = [
    "FoldStats",
    "Folder",
    "advance_clock",
    "candidates_of",
    "count_evidence",
    "count_recalls",
    "forget_lines",
    "mark_proposed",
    "read_clock",
    "refresh_candidates",
    "refresh_stale",
    "reject_proposed",
    "reopen_proposed",
    "rescore",
    "scores_current",
    "set_boosts",
    "set_outcomes",
]
