"""Candidates: folding claims from new corpus lines, their stored signals, and scores.

A candidate's signals are always recomputed from its evidence rows (never incremented in
place), so re-reading a rewritten file or purging a session leaves exact counts behind.

    _fold     claims of new corpus lines joined to candidates, with evidence and recalls
    _signals  counts refreshed from evidence, salience, scores, the clock
    _decided  what becomes of a candidate after light: outcomes, proposals, undo, boosts
    _forget   a purge's part: evidence and recalls of a scope, and what they supported
    _common   statements the parts share
"""

from dreaming.ingest.candidates._common import mark_stale
from dreaming.ingest.candidates._decided import (
    mark_proposed,
    restore,
    set_boosts,
    set_outcomes,
    settle_proposed,
)
from dreaming.ingest.candidates._fold import Folder, FoldStats
from dreaming.ingest.candidates._forget import (
    candidates_of,
    count_evidence,
    count_recalls,
    evidence_of,
    forget_lines,
    recalls_of,
)
from dreaming.ingest.candidates._signals import (
    advance_clock,
    assess_new,
    read_clock,
    refresh_candidates,
    refresh_stale,
    rescore,
)

__all__ = [
    "FoldStats",
    "Folder",
    "advance_clock",
    "assess_new",
    "candidates_of",
    "count_evidence",
    "count_recalls",
    "evidence_of",
    "forget_lines",
    "mark_proposed",
    "mark_stale",
    "read_clock",
    "recalls_of",
    "refresh_candidates",
    "refresh_stale",
    "rescore",
    "restore",
    "set_boosts",
    "set_outcomes",
    "settle_proposed",
]
