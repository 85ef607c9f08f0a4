"""The statuses a candidate and an entry row can hold (`candidates.status`, `entries.status`).

They sit beside the models because several owners write and read them (candidates, lineage,
review, the gates, deep, light, forget, journal). StrEnum members equal their strings and bind
as them, so the stored values are the strings they always were. A session's status and a
line's origin class are `admission.Status` and `admission.OriginClass`; a proposal's status
is `review.ProposalStatus`.
"""

from __future__ import annotations

from enum import StrEnum


class CandidateStatus(StrEnum):
    PENDING = "pending"  # not yet decided, or reopened (new evidence, a purge, an undo)
    PROPOSED = "proposed"  # staged for a person (review mode), waiting on the decision
    PROMOTED = "promoted"  # added as an entry
    MERGED = "merged"  # folded into an entry (a merge, a supersede, or folded alongside)
    SKIPPED = "skipped"  # deep decided it does not belong in memory
    REJECTED = "rejected"  # a person rejected its proposal: back only with new evidence


class EntryStatus(StrEnum):
    """Where an entry stands. A superseded or merged-away entry is deleted, not marked."""

    LIVE = "live"  # in MEMORY.md: the agent loads it on every turn
    # Kept, with its lineage, in the archive beside MEMORY.md (`dreaming.memory.archive`):
    # it did not fit MEMORY.md's capacity budget. The agent's memory search finds it; it
    # comes back when it is said again or room frees up (`dreaming.memory.capacity`).
    ARCHIVED = "archived"


# The statuses of an entry the memory holds, loaded or archived: everything that reaches
# entries (lineage, forget, undo, review, verify, the report) reaches both.
HELD: tuple[EntryStatus, ...] = (EntryStatus.LIVE, EntryStatus.ARCHIVED)
