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
    LIVE = "live"  # the only status written: a superseded or merged-away entry is deleted
