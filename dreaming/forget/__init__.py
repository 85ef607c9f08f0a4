"""`dreaming forget`: purge everything derived from some sessions, and prove it.

Steps, each reported with counts (invariants 3, 4 and 5):

1. corpus       the sessions' corpus lines leave the table and the corpus files; their exact
                text is kept in memory as snippets for the steps below
2. entries      every entry with any origin in the purge set leaves MEMORY.md and the table
                (whole-entry deletion; mixed-lineage entries listed apart); any other whole
                line of a memory file (MEMORY.md, DREAMS.md, daily notes) quoting a snippet goes
3. index        search-index rows of removed entries
4. state        candidates, recalls, cursors; MEMORY.md backups and LLM call records that
                carry purged text; run summaries are redacted; what REM derived without
                quoting (`_derived`): the diary entries whose window read a purged session
                go, and the themes and diary text of the runs that read one are redacted,
                with REM's LLM calls in those runs; report files (`_reports`) that mention
                a purged session or its text are listed and removed
5. tombstones   origin rows deleted, one tombstone per session: nothing re-ingests it
6. writes       files the agent wrote during the sessions are reported, never edited

All database steps commit in one transaction together with a `purges` row whose `pending`
column lists the snippets still to scrub from files; each table's rows are deleted by the
module that owns the table (its `forget_*` function), in the order the purge calls them.
Files are rewritten next, and the row is then completed (snippets dropped). A purge
interrupted after the commit is completed by the next `forget` or run.

The parts are private modules of this package: ``_select`` (which sessions a selector
names), ``_purge`` (the plan, the counts and the transaction), ``_complete`` (files, the
completion and the vacuum), ``_scrub`` (finding purged text wherever it was copied),
``_derived`` (what REM read), ``_reports`` (report files) and ``_report`` (the frozen
`PurgeReport` drivers get);
everything outside the package imports from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreaming.lazy import lazy_names

if TYPE_CHECKING:
    from ._complete import complete_pending
    from ._purge import Purge, Scope
    from ._report import STEPS, PurgeReport, PurgeStep, SessionOutcome
    from ._reports import record_report, report_files
    from ._scrub import MIN_SNIPPET_CHARS, needles_of, scrub_text, snippets_of
    from ._select import Selector, Target, parse_since, resolve

__all__ = [
    "MIN_SNIPPET_CHARS",
    "STEPS",
    "Purge",
    "PurgeReport",
    "PurgeStep",
    "Scope",
    "Selector",
    "SessionOutcome",
    "Target",
    "complete_pending",
    "needles_of",
    "parse_since",
    "record_report",
    "report_files",
    "resolve",
    "scrub_text",
    "snippets_of",
]

# Each name loads its module when first used: every night checks for a purge cut short
# (`complete_pending`), and only a purge needs the rest (its plan, its report, scrubbing).
_LAZY = {
    name: f"{__name__}.{module}"
    for module, names in {
        "_complete": ("complete_pending",),
        "_purge": ("Purge", "Scope"),
        "_report": ("STEPS", "PurgeReport", "PurgeStep", "SessionOutcome"),
        "_reports": ("record_report", "report_files"),
        "_scrub": ("MIN_SNIPPET_CHARS", "needles_of", "scrub_text", "snippets_of"),
        "_select": ("Selector", "Target", "parse_since", "resolve"),
    }.items()
    for name in names
}

__getattr__ = lazy_names(__name__, _LAZY)
