"""Carrying out deep's decisions: applied through `dreaming.memory.lineage` under MEMORY.md's size
budget, or (review mode) staged as proposals for a person; each recorded in the run's
summary; MEMORY.md written from the database afterwards."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, and_, select

from dreaming.ingest import salience
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
    memory_path: Path,
    max_memory_chars: int,
    texts: Mapping[int, str],
) -> None:
    """Apply `decisions` in `conn`'s transaction, each as it fits MEMORY.md's size budget,
    and mark the agent's memory for writing."""
    rendered = memory_sync.render(conn, agent, memory_path)[1]
    size = len(rendered)
    groups = {h.group for h in memory_file.parse(rendered).headings}
    bookkeeping = lineage.Bookkeeping.empty()
    for one in decisions:
        fitted = fit(conn, agent, one, size, groups, max_memory_chars)
        if fitted is None:
            # Deterministic policy at the size budget: no new entries; the
            # candidate stays pending; merges and supersessions still apply.
            summary.deferred["memory_budget"] += 1
            continue
        d, size = fitted
        key = lineage.apply(conn, agent, d, run_id, prune=False, bookkeeping=bookkeeping)
        summary.actions[d.action.value] += 1
        summary.decisions.append(decided(d, key, texts))
    bookkeeping.flush(conn)
    lineage.prune_orphans(conn, agent)
    memory_sync.mark_dirty(conn, agent)


def fit(
    conn: Connection,
    agent: str,
    d: lineage.Applied,
    size: int,
    groups: set[str],
    limit: int,
) -> tuple[lineage.Applied, int] | None:
    """`d` as it fits MEMORY.md's size budget (`size` characters now, `groups` headed),
    and the size after it; None when it is a new entry that does not fit. A merge whose
    text would grow the file past the budget keeps the entry's text: the lineage still
    grows, the file does not."""
    if d.action is Action.MERGE and d.targets:
        old = entry_texts(conn, agent, d.targets)
        if len(old) < len(set(d.targets)):
            # Its target was itself deferred in this batch: this is a new entry now,
            # under the same budget as any other.
            d = replace(d, action=Action.ADD, targets=())
        elif d.text is not None and len(d.targets) == 1:
            return _fit_merge(d, d.text, old[d.targets[0]], size, limit)
    if d.action is Action.ADD and d.text is not None:
        return _fit_add(d, d.text, size, groups, limit)
    return d, size


def _fit_merge(
    d: lineage.Applied, text: str, before: str, size: int, limit: int
) -> tuple[lineage.Applied, int]:
    grow = len(memory_file.one_line(text)) - len(memory_file.one_line(before))
    if size + grow > limit:
        return replace(d, text=before), size
    return d, size + grow


def _fit_add(
    d: lineage.Applied, text: str, size: int, groups: set[str], limit: int
) -> tuple[lineage.Applied, int] | None:
    grow = len(memory_file.render_line(memory_file.shortest(memory_file.entry_key(text)), text))
    group = salience.group_of(text)
    if group not in groups:  # its heading comes with it, after a blank line
        grow += len(memory_file.render_heading(group)) + 1
    if size + grow > limit:
        return None
    groups.add(group)
    return d, size + grow


def write_memory(
    engine: Engine, agent: str, memory_path: Path, run_id: int | None, summary: DeepSummary
) -> None:
    """MEMORY.md rewritten from the database after a batch."""
    # One backup per run: the file as it was before this run changed it.
    report = memory_sync.write(
        engine, agent, memory_path, run_id, backup=not summary.memory_written
    )
    summary.memory_written |= report.written
    for key in report.duplicates_removed:
        if key not in summary.duplicates_removed:
            summary.duplicates_removed.append(key)


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
