"""The forget bench's live entries (imported from bench/): owner candidates added over a few
recorded deep runs, with LLM call records and MEMORY.md backups, without running deep."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from _forget_data import (
    AGENT,
    BATCH,
)
from sqlalchemy import and_, func, select

from dreaming.app import App
from dreaming.llm import CallOutcome, CallRecord
from dreaming.llm.calls import record_calls
from dreaming.memory import lineage, memory_file, memory_sync
from dreaming.memory.decisions import Action, PromptCandidate, PromptEntry, render_prompt
from dreaming.memory.sanitize import sanitize_entry_text
from dreaming.phases.deep import DeepPhase, DeepSummary
from dreaming.runs import Outcome, finish_run, start_run
from dreaming.store.tables import CANDIDATES

# -- the entries ----------------------------------------------------------------------------


def _attributed(cand_text: str, owner_lines: int, agent_lines: int) -> str:
    """The deterministic consolidator's entry text (as `phases.deep._attributed`)."""
    speaker = "The user" if owner_lines >= agent_lines else "The agent"
    body = cand_text.strip().strip('"')
    if body and body[-1] not in ".!?。！？":
        body += "."
    return f'{speaker} said: "{body}"'


def _choose(app: App, n_entries: int) -> tuple[int, int, list[tuple[Any, ...]]]:
    """The owner candidates, most sessions first, whose entry text is new: (candidates,
    owner candidates, chosen as (id, key, text, sessions, days, entry text))."""
    engine = app.engine(AGENT)
    registry = app.registry
    max_chars = app.settings.deep.max_entry_chars
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                CANDIDATES.c.id,
                CANDIDATES.c.key,
                CANDIDATES.c.text,
                CANDIDATES.c.sessions,
                CANDIDATES.c.days,
                CANDIDATES.c.owner_lines,
                CANDIDATES.c.agent_lines,
            )
            .where(and_(CANDIDATES.c.agent == AGENT, CANDIDATES.c.owner_lines > 0))
            .order_by(CANDIDATES.c.sessions.desc(), CANDIDATES.c.score.desc(), CANDIDATES.c.id)
        ).all()
        total_candidates = conn.execute(
            select(func.count()).select_from(CANDIDATES).where(CANDIDATES.c.agent == AGENT)
        ).scalar_one()
    chosen: list[tuple[Any, ...]] = []
    seen_keys: set[str] = set()
    for cid, ckey, ctext, sessions, days, own, agt in rows:
        body = sanitize_entry_text(
            _attributed(ctext, own, agt), max_chars=max_chars, registry=registry
        )
        key = memory_file.entry_key(body) if body else None
        if key is None or key in seen_keys:
            continue
        seen_keys.add(key)
        chosen.append((cid, ckey, ctext, sessions, days, body))
        if len(chosen) == n_entries:
            break
    return total_candidates, len(rows), chosen


def _add_batch(conn: Any, batch: list[tuple[Any, ...]], run_id: str, summary: DeepSummary) -> None:
    """Add the batch's entries as the deterministic path would, and say so in `summary`."""
    decisions = [
        lineage.Applied(cid, ckey, Action.ADD, (), body, "deterministic")
        for cid, ckey, _ctext, _s, _d, body in batch
    ]
    keys = lineage.apply_batch(conn, AGENT, decisions, run_id, prune=False)
    for (_cid, ckey, _ctext, _s, _d, body), key in zip(batch, keys, strict=True):
        summary.actions["add"] += 1
        summary.paths["deterministic"] += 1
        summary.decisions.append(
            {
                "candidate": ckey,
                "action": "add",
                "targets": [],
                "entry": key,
                "text": body,
                "path": "deterministic",
            }
        )


def _call_record(
    conn: Any, deep: DeepPhase, chosen: list[tuple[Any, ...]], call_no: int, max_chars: int
) -> CallRecord:
    """The record of LLM call `call_no`: a real deep prompt over `BATCH` chosen candidates
    (and five entries shown), answered by adding them all."""
    start = (call_no * BATCH) % len(chosen)
    group = [chosen[(start + j) % len(chosen)] for j in range(BATCH)]
    shown = [chosen[(start - 1 - j) % len(chosen)] for j in range(5)]
    cands = [
        PromptCandidate(f"c{j}", c[2], c[3], c[4], deep._snippets(conn, c[0]))
        for j, c in enumerate(group, 1)
    ]
    entries = [PromptEntry(f"e{j}", c[5]) for j, c in enumerate(shown, 1)]
    system, user = render_prompt(cands, entries, max_chars=max_chars)
    request = json.dumps(
        [{"role": "system", "content": system}, {"role": "user", "content": user}],
        ensure_ascii=False,
    )
    reply = json.dumps(
        {
            "decisions": [
                {"candidate": f"c{j}", "action": "add", "targets": [], "text": c[5]}
                for j, c in enumerate(group, 1)
            ]
        },
        ensure_ascii=False,
    )
    return CallRecord(
        model="bench-model",
        mode="json_schema",
        attempt=1,
        outcome=CallOutcome.OK,
        request=request,
        response=reply,
        input_tokens=len(request) // 4,
        output_tokens=len(reply) // 4,
        usage_estimated=False,
        cost_usd=len(request) * 4e-8,
        duration_s=1.5,
        started_at=datetime.now(UTC),
        http_status=200,
    )


def _night(
    app: App,
    deep: DeepPhase,
    chosen: list[tuple[Any, ...]],
    batch: list[tuple[Any, ...]],
    calls_wanted: range,
    files: memory_sync.Files,
) -> None:
    """One recorded deep run: the batch's entries, the call records `calls_wanted`, MEMORY.md
    written, the run finished."""
    engine = app.engine(AGENT)
    max_chars = app.settings.deep.max_entry_chars
    run_id = start_run(engine, AGENT, ["deep"], "bench-forget")
    summary = DeepSummary(agent=AGENT)
    summary.selected = len(batch)
    summary.batches = math.ceil(len(batch) / BATCH)
    with engine.begin() as conn:
        _add_batch(conn, batch, run_id, summary)
        lineage.prune_orphans(conn, AGENT)
        memory_sync.mark_dirty(conn, AGENT)
        calls = [_call_record(conn, deep, chosen, n, max_chars) for n in calls_wanted]
        record_calls(conn, AGENT, run_id, calls)
        summary.llm_calls = len(calls)
        summary.input_tokens = sum(c.input_tokens for c in calls)
        summary.output_tokens = sum(c.output_tokens for c in calls)
    report = memory_sync.write(engine, AGENT, files, run_id)
    summary.memory_written = report.written
    with engine.connect() as conn:
        summary.entries = len(lineage.live_entries(conn, AGENT))
    result: dict[str, Any] = {
        "agent": AGENT,
        "job": "bench-forget",
        "phases": {"deep": summary.to_dict()},
        "run_id": run_id,
        "outcome": "ok",
    }
    finish_run(engine, run_id, Outcome.OK, result)


def build_entries(
    app: App, n_entries: int, nights: int, n_calls: int, log: Callable[[str], None]
) -> dict[str, Any]:
    deep = DeepPhase(app.engine(AGENT), app.paths, app.registry)  # for its evidence snippets
    total_candidates, owner_candidates, chosen = _choose(app, n_entries)
    info: dict[str, Any] = {
        "candidates": total_candidates,
        "owner_candidates": owner_candidates,
        "entries_wanted": n_entries,
        "entries_from_candidates": len(chosen),
        "multi_session_entries": sum(1 for c in chosen if c[3] >= 2),
    }
    if len(chosen) < n_entries:
        log(f"  only {len(chosen)} owner candidates for {n_entries} entries: raise FACTS_PER_ENTRY")
    files = memory_sync.Files.of(app.paths, AGENT)
    per_night = math.ceil(len(chosen) / nights)
    calls_per_night = math.ceil(n_calls / nights)
    call_no = 0
    info["night_s"] = []
    for night in range(nights):
        batch = chosen[night * per_night : (night + 1) * per_night]
        if not batch:
            break
        t_night = time.perf_counter()
        done_before = night * per_night
        wanted = range(call_no, call_no + max(0, min(calls_per_night, n_calls - call_no)))
        _night(app, deep, chosen, batch, wanted, files)
        call_no = wanted.stop
        info["night_s"].append(round(time.perf_counter() - t_night, 2))
        log(
            f"  night {night + 1}/{nights}: {done_before + len(batch)} entries, "
            f"{call_no} LLM call records, {info['night_s'][-1]} s"
        )
    return info
