"""The agent's stored lines folded again when `[deep] promote_agent_only` is turned on.

With it off, the agent's claims only corroborate candidates (`candidates._fold`): a claim the
agent alone made leaves its line in the corpus and no candidate. Turned on, the agent's words
alone may become memory, so the lines read while it was off are folded once more, now
creating; folding is idempotent (evidence and recalls are insert-or-ignore, a claim finds the
candidate its first fold made), so a crash half way just folds again. A state mark says the
agent's lines have been folded creating; turning the setting off clears it, so turning it on
again folds what came in meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, and_, select

from dreaming.config import Settings
from dreaming.ingest.admission import OriginClass
from dreaming.ingest.candidates import Folder
from dreaming.phases.light._commit import RESCORE_KEY
from dreaming.phases.light._summary import LightSummary
from dreaming.store import state
from dreaming.store.state import StateKey
from dreaming.store.tables import CORPUS_LINES

MARK = StateKey.AGENT_LINES
FOLDED = "created"  # the agent's stored lines were folded with promote_agent_only on
_BATCH = 2_000  # lines per fold (and per transaction)
_COLUMNS = ("session_id", "line", "ts", "day", "role", "origin_class", "text", "speaker")


def sync(
    engine: Engine,
    agent: str,
    settings: Settings,
    folded: Callable[[], Folder],
    summary: LightSummary,
) -> bool:
    """Fold the agent's stored lines creating, once after the setting was turned on; clear
    the mark while it is off. True when lines were folded (the candidates need rescoring).
    `folded` gives the folder, read only when there are lines to fold."""
    on = settings.deep.promote_agent_only
    with engine.connect() as conn:
        mark = state.get(conn, agent, MARK)
    if not on:
        if mark is not None:
            with engine.begin() as conn:
                state.clear(conn, agent, MARK)
        return False
    if mark == FOLDED:
        return False
    line = CORPUS_LINES.c
    query = (
        select(line.id, *(line[c] for c in _COLUMNS))
        .where(and_(line.agent == agent, line.origin_class == OriginClass.AGENT.value))
        .order_by(line.id)
    )
    with engine.connect() as conn:
        rows: list[tuple[int, dict[str, Any]]] = [
            (r[0], dict(zip(_COLUMNS, r[1:], strict=True))) for r in conn.execute(query)
        ]
    done = False
    for start in range(0, len(rows), _BATCH):
        folder = folded()  # read before the transaction opens: on the connection it uses
        with engine.begin() as conn:
            summary.add_fold(folder.fold(conn, rows[start : start + _BATCH]))
            state.put_if_absent(conn, agent, RESCORE_KEY, "1")
        done = True
    with engine.begin() as conn:
        state.put(conn, agent, MARK, FOLDED)
    return done
