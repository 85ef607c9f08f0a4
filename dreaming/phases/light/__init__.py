"""The light phase: transcripts -> admitted, stripped corpus lines -> folded candidates.

Per session file, everything a read produces - corpus lines, candidate evidence, recalls,
the file's cursor and the session's admission record - commits in one transaction, so the
cursor (the watermark) never runs ahead of the work it covers. Corpus files are written from
the table afterwards; see `dreaming.ingest.corpus`. Each table is written through its
owner: `dreaming.ingest.corpus`, `dreaming.ingest.sessions`, `dreaming.store.cursors`.

The parts, each private:

- ``_phase``: `LightPhase`, the run: admission, re-derivation, the read loop, the rescore
- ``_rederive``: purging what a changed admission or an edited transcript no longer supports
- ``_read``: reading what is new in one file into corpus rows
- ``_commit``: what one read commits, in one transaction
- ``_summary``: `LightSummary`
- ``_plan``: what light will read of an agent's files (known sessions, admission, what is new)
- ``_ahead``: reading ahead in a forked child, for one agent or on across a run's agents
"""

from dreaming.phases.light._ahead import NightReads
from dreaming.phases.light._phase import LightPhase
from dreaming.phases.light._plan import planner as light_planner
from dreaming.phases.light._summary import LightSummary

__all__ = ["LightPhase", "LightSummary", "NightReads", "light_planner"]
