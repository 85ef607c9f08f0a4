"""Carrying out deep's decisions: applied through `dreaming.memory.lineage`, or (review mode)
staged as proposals for a person; each recorded in the run's summary; MEMORY.md and its
archive written from the database afterwards. Nothing is held back for MEMORY.md's size:
the write places entries under its budget, and what does not fit is archived
(`dreaming.memory.capacity`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, and_, select

from dreaming.memory import lineage, memory_file, memory_sync, review
from dreaming.memory.decisions import Action
from dreaming.phases.deep._selection import snippets
from dreaming.phases.deep._summary import DeepSummary
from dreaming.store.tables import ENTRIES


def decided(d: lineage.Applied, entry: str | None, texts: Mapping[int, str]) -> dict[str, Any]:
    """A decision as the run's summary (and so the preview) shows it."""
    return {
        "candidate": d.candidate_key,
        "candidate_text": texts.get(d.candidate_id),
        "action": d.action.value,
        "targets": list(d.targets),
        "entry": entry,
        "text": d.text,
        "path": d.path,
        "reason": d.reason,
        "also": [k for _, k in d.also],
    }


# -- applying ------------------------------------------------------------------------------


def apply_all(
    conn: Connection,
    agent: str,
    decisions: Sequence[lineage.Applied],
    summary: DeepSummary,
    *,
    run_id: int | None,
    texts: Mapping[int, str],
) -> None:
    """Apply `decisions` in `conn`'s transaction and mark the agent's memory for writing."""
    bookkeeping = lineage.Bookkeeping.empty()
    keys = lineage.apply_batch(conn, agent, decisions, run_id, prune=False, bookkeeping=bookkeeping)
    for d, key in zip(decisions, keys, strict=True):
        summary.actions[d.action.value] += 1
        summary.decisions.append(decided(d, key, texts))
    bookkeeping.flush(conn)
    lineage.prune_orphans(conn, agent)
    memory_sync.mark_dirty(conn, agent)


def write_memory(
    engine: Engine,
    agent: str,
    files: memory_sync.Files,
    run_id: int | None,
    summary: DeepSummary,
) -> None:
    """MEMORY.md and its archive rewritten from the database after a batch."""
    # One backup per run: the file as it was before this run changed it.
    report = memory_sync.write(engine, agent, files, run_id, backup=not summary.memory_written)
    summary.memory_written |= report.written
    summary.wrote(report)


def entry_texts(conn: Connection, agent: str, keys: Collection[str]) -> dict[str, str]:
    """The text of each of the agent's entries among `keys`, whatever its status."""
    return dict(
        conn.execute(
            select(ENTRIES.c.key, ENTRIES.c.text).where(
                and_(ENTRIES.c.agent == agent, ENTRIES.c.key.in_(keys))
            )
        ).all()
    )


# -- staging for review --------------------------------------------------------------------


def stage(
    conn: Connection,
    agent: str,
    decisions: Sequence[lineage.Applied],
    summary: DeepSummary,
    *,
    run_id: int | None,
    expire_days: float,
    texts: Mapping[int, str],
) -> list[lineage.Applied]:
    """Review mode: stage every decision that would change memory as a proposal, with
    what a person needs to judge it; return the rest (skips) to apply now."""
    now_apply: list[lineage.Applied] = []
    for d in decisions:
        if d.action is Action.SKIP:
            now_apply.append(d)
            continue
        detail, sessions = _proposal_detail(conn, agent, d, texts)
        pid = review.stage(conn, agent, run_id, d, detail, sessions, expire_days=expire_days)
        summary.proposed += 1
        summary.decisions.append(decided(d, None, texts) | {"proposal": pid})
    return now_apply


def _proposal_detail(
    conn: Connection, agent: str, d: lineage.Applied, texts: Mapping[int, str]
) -> tuple[dict[str, Any], set[str]]:
    """What a person sees of a proposal (the candidate, its evidence, the entries it
    retires, the change to MEMORY.md), and the sessions it draws on."""
    targets = entry_texts(conn, agent, d.targets)
    sessions: set[str] = set()
    for cid in (d.candidate_id, *(i for i, _ in d.also)):
        sessions |= {o.session_id for o in lineage.candidate_lineage(conn, agent, cid).origins}
    for key in targets:
        sessions |= {o.session_id for o in lineage.entry_lineage(conn, agent, key).origins}
    diff = [f"-{memory_file.render_line(memory_file.shortest(k), t)}" for k, t in targets.items()]
    if d.text is not None:
        new = memory_file.shortest(memory_file.entry_key(d.text))
        diff.append(f"+{memory_file.render_line(new, d.text)}")
    detail = {
        "candidate_text": texts.get(d.candidate_id),
        "evidence": snippets(conn, d.candidate_id),
        "targets": targets,
        "diff": "\n".join(line.rstrip("\n") for line in diff),
    }
    return detail, sessions
