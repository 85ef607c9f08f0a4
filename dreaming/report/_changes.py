"""Memory's changes and lineage for the report: tonight's decisions with the texts before
and after, and every entry the memory holds (in MEMORY.md or archived) from its origins to
the LLM calls behind it."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import Connection, Engine, and_, select

from dreaming.llm.call_log import LoggedCall, list_calls
from dreaming.memory import lineage, memory_file
from dreaming.oversight import undone_by
from dreaming.report._records import (
    Call,
    Change,
    Decision,
    Entry,
    Origin,
    Retired,
    Session,
    Tonight,
)
from dreaming.runs import Outcome, RunRecord
from dreaming.store.tables import CANDIDATES, MEMORY_BACKUPS, ORIGINS

# Runs that changed no memory: another run held the agent, or a preview (dry run).
NOT_APPLIED = (Outcome.SKIPPED, Outcome.PREVIEW)
CHANGING = ("add", "merge", "supersede")  # decisions that change what memory holds
_IN_CHUNK = 500  # keys per IN (...) list


def since(runs: Iterable[RunRecord], day: date) -> list[RunRecord]:
    """The runs started on `day` (UTC) or later."""
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return [r for r in runs if r.started_at >= start]


def tonight_runs(
    runs: Sequence[RunRecord],
    after: date | None,
    every: Sequence[lineage.DecisionRecord] = (),
) -> tuple[list[RunRecord], RunRecord | None]:
    """Every run with a deep phase since the day `after`, else the last such run that
    changed memory (an undone one did not), oldest first; and the last run with a deep
    phase when that is not the one shown (a quiet night: "tonight" is not the latest run
    when that changed nothing)."""
    deep = [r for r in runs if "deep" in r.phases and r.outcome not in NOT_APPLIED]
    if after is not None:
        return sorted(since(deep, after), key=lambda r: r.id), None
    undone = undone_by(runs)
    changing = {d.run_id for d in every if d.action in CHANGING}
    changed = [
        r
        for r in deep
        if (r.agent, r.id) not in undone
        and (
            r.id in changing
            or any(_summary_memory(r, k) for k in ("removed_by_person", "archived_now", "restored"))
        )
    ]
    shown = changed[:1] or deep[:1]
    latest = deep[0] if deep and shown and deep[0] is not shown[0] else None
    return shown, latest


def _known_texts(
    conn: Connection, agent: str, runs: Sequence[RunRecord], live: Mapping[str, str]
) -> dict[str, str]:
    """Entry key -> its text, for every key whose text is still held somewhere: the live
    entries, the MEMORY.md backups (the file before each run changed it) and the decisions
    recorded in run summaries. A key is the hash of its text, so a text that hashes to its
    key is that entry's whatever copy it came from; anything else (a person's edit, a
    purge's redaction) is no copy of it."""
    texts = dict(live)

    def keep(key: str, text: str) -> None:
        if key not in texts and memory_file.entry_key(text) == key:
            texts[key] = text

    for (content,) in conn.execute(
        select(MEMORY_BACKUPS.c.content)
        .where(MEMORY_BACKUPS.c.agent == agent)
        .order_by(MEMORY_BACKUPS.c.id.desc())
    ):
        for block in memory_file.parse(content).blocks:
            keep(block.key, block.text)
    for run in runs:
        for d in _summary_decisions(run):
            if isinstance(d.get("entry"), str) and isinstance(d.get("text"), str):
                keep(d["entry"], d["text"])
    return texts


def _summary_decisions(run: RunRecord) -> list[dict[str, Any]]:
    deep = (run.summary.get("phases") or {}).get("deep") or {}
    found = deep.get("decisions") if isinstance(deep, dict) else None
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def _summary_memory(run: RunRecord, field: str) -> list[str]:
    deep = (run.summary.get("phases") or {}).get("deep") or {}
    memory = deep.get("memory") if isinstance(deep, dict) else None
    keys = memory.get(field) if isinstance(memory, dict) else None
    return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), _IN_CHUNK):
        yield items[i : i + _IN_CHUNK]


def _candidate_texts(
    conn: Connection, agent: str, keys: set[str], runs: Sequence[RunRecord]
) -> dict[str, str]:
    """Candidate key -> what was said, from the candidates table, else the run summaries."""
    out: dict[str, str] = {}
    for chunk in _chunks(sorted(keys)):
        out.update(
            (k, t)
            for k, t in conn.execute(
                select(CANDIDATES.c.key, CANDIDATES.c.text).where(
                    and_(CANDIDATES.c.agent == agent, CANDIDATES.c.key.in_(list(chunk)))
                )
            )
        )
    for run in runs:
        for d in _summary_decisions(run):
            key, text = d.get("candidate"), d.get("candidate_text")
            if isinstance(key, str) and isinstance(text, str) and key in keys:
                out.setdefault(key, text)
    return out


def _reply(call: LoggedCall) -> str | None:
    if call.response is None:
        return None
    try:
        return json.dumps(json.loads(call.response), indent=2, ensure_ascii=False)
    except ValueError:
        return call.response


def _calls(
    engine: Engine, agent: str, run_ids: set[int]
) -> tuple[dict[int, list[Call]], dict[int, str]]:
    """Run id -> its LLM attempts, oldest first; and call id -> the request it sent."""
    out: dict[int, list[Call]] = {}
    prompts: dict[int, str] = {}
    for run_id in sorted(run_ids):
        logged = list(reversed(list_calls(engine, [agent], run_id=run_id)))
        prompts.update((c.id, c.request) for c in logged)
        out[run_id] = [
            Call(
                id=c.id,
                run_id=c.run_id,
                model=c.model,
                outcome=c.outcome,
                input_tokens=c.input_tokens,
                output_tokens=c.output_tokens,
                cost_usd=c.cost_usd,
                duration_s=c.duration_s,
                created_at=c.created_at,
                reply=_reply(c),
                error=c.error,
            )
            for c in logged
        ]
    return out, prompts


def _escaped(text: str, times: int) -> str:
    """`text` as it stands inside a JSON string `times` deep."""
    for _ in range(times):
        text = json.dumps(text, ensure_ascii=False)[1:-1]
    return text


@dataclass(frozen=True)
class DecisionView:
    """What turns a decision log row into the page's Decision: the entry texts still held,
    what each candidate said, the LLM calls of the runs that asked the model."""

    live: Mapping[str, str]  # every entry the memory holds, in MEMORY.md or archived
    texts: Mapping[str, str]
    said: Mapping[str, str]
    calls: Mapping[int, Sequence[Call]]
    prompts: Mapping[int, str]  # call id -> its request (the chat messages as JSON)

    @classmethod
    def load(
        cls,
        engine: Engine,
        conn: Connection,
        agent: str,
        runs: Sequence[RunRecord],
        every: Sequence[lineage.DecisionRecord],
    ) -> DecisionView:
        live = dict(lineage.held_entries(conn, agent))
        asked = {d.run_id for d in every if d.path == "llm" and d.run_id is not None}
        calls, prompts = _calls(engine, agent, asked)
        return cls(
            live=live,
            texts=_known_texts(conn, agent, runs, live),
            said=_candidate_texts(conn, agent, {d.candidate_key for d in every}, runs),
            calls=calls,
            prompts=prompts,
        )

    def of(self, d: lineage.DecisionRecord) -> Decision:
        text = self.texts.get(d.entry_key) if d.entry_key else None
        changes = tuple(Change(t, self.texts.get(t), t != d.entry_key) for t in d.targets)
        return Decision(
            id=d.id,
            run_id=d.run_id,
            action=d.action,
            path=d.path,
            reason=d.reason,
            created_at=d.created_at,
            candidate_key=d.candidate_key,
            candidate_text=self.said.get(d.candidate_key),
            entry_key=d.entry_key,
            text=text,
            live=d.entry_key in self.live if d.entry_key else False,
            changes=changes,
            calls=self._behind(d, text) if d.path == "llm" else (),
        )

    def _behind(self, d: lineage.DecisionRecord, text: str | None) -> tuple[Call, ...]:
        """The run's deep calls that decided this. A call log row does not name the
        decisions it produced: the answered calls whose prompt shows the candidate's text
        or whose reply writes the entry's, else (a purge redacted them, the prompt showed a
        cleaned-up text) every answered deep call of the run."""
        if d.run_id is None:
            return ()
        answered = [
            c
            for c in self.calls.get(d.run_id, ())
            if c.outcome == "ok" and c.reply is not None and '"decisions"' in c.reply
        ]
        said = self.said.get(d.candidate_key)
        # The reply is JSON text; the prompt is JSON (the candidates) inside the JSON of the
        # chat messages.
        in_reply = _escaped(text, 1) if text else None
        in_prompt = _escaped(said, 2) if said else None
        matched = [
            c
            for c in answered
            if (in_reply and in_reply in (c.reply or ""))
            or (in_prompt and in_prompt in self.prompts.get(c.id, ""))
        ]
        return tuple(matched or answered)


def tonight(
    runs: Sequence[RunRecord],
    every: Sequence[lineage.DecisionRecord],
    view: DecisionView,
    latest: RunRecord | None = None,
) -> Tonight:
    """What `runs` changed: their decisions by action, and the entries that left memory
    (merge and supersede targets, lines a person deleted)."""
    ids = {r.id for r in runs}
    made = [view.of(d) for d in every if d.run_id in ids]
    retired: list[Retired] = []
    for d in made:
        if d.action not in ("merge", "supersede"):
            continue
        how = "merged" if d.action == "merge" else "superseded"
        into_live = d.live
        retired.extend(
            Retired(c.key, c.old_text, how, d.run_id, d.entry_key, into_live, d.path, d.reason)
            for c in d.changes
            if c.left
        )
    edited: list[str] = []
    archived: list[str] = []
    restored: list[str] = []
    over: str | None = None
    for run in runs:
        for key in _summary_memory(run, "archived_now"):
            (restored.remove if key in restored else archived.append)(key)
        for key in _summary_memory(run, "restored"):
            (archived.remove if key in archived else restored.append)(key)
        over = _summary_over(run)
        by_hand = _summary_memory(run, "removed_by_person")
        retired.extend(
            Retired(k, view.texts.get(k), "removed by a person", run.id, None, False, None, None)
            for k in by_hand
        )
        edited.extend(k for k in _summary_memory(run, "edited_by_person") if k not in edited)
    return Tonight(
        runs=tuple(runs),
        added=tuple(d for d in made if d.action == "add"),
        merged=tuple(d for d in made if d.action == "merge"),
        superseded=tuple(d for d in made if d.action == "supersede"),
        retired=tuple(retired),
        skipped=tuple(d for d in made if d.action == "skip"),
        edited_by_person=tuple(edited),
        archived=tuple(archived),
        restored=tuple(restored),
        over_budget=over,
        latest=latest,
    )


def _summary_over(run: RunRecord) -> str | None:
    deep = (run.summary.get("phases") or {}).get("deep") or {}
    memory = deep.get("memory") if isinstance(deep, dict) else None
    over = memory.get("over_budget") if isinstance(memory, dict) else None
    return over if isinstance(over, str) else None


def _origins(conn: Connection, agent: str) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for key, *rest in conn.execute(
        select(
            ORIGINS.c.entry_key,
            ORIGINS.c.session_id,
            ORIGINS.c.session_key,
            ORIGINS.c.origin_class,
            ORIGINS.c.observed_at,
        )
        .where(ORIGINS.c.agent == agent)
        .order_by(ORIGINS.c.entry_key, ORIGINS.c.session_id)
    ):
        out[key].append(tuple(rest))
    return out


def entries(
    conn: Connection,
    agent: str,
    every: Sequence[lineage.DecisionRecord],
    sessions: Mapping[str, Session],
    view: DecisionView,
) -> tuple[Entry, ...]:
    """Every entry the memory holds, in MEMORY.md's order (archived ones marked), with its
    lineage."""
    shelved = {k for k, _ in lineage.archived_entries(conn, agent)}
    origins = _origins(conn, agent)
    evidence = lineage.evidence_lines(conn, agent)
    replaced = lineage.supersedes(conn, agent)
    touching: dict[str, list[lineage.DecisionRecord]] = defaultdict(list)
    for d in every:
        for key in dict.fromkeys((d.entry_key, *d.targets)):
            if key is not None and key in view.live:
                touching[key].append(d)
    return tuple(
        Entry(
            key=key,
            text=text,
            origins=tuple(
                Origin(sid, skey, cls, seen, sessions.get(sid))
                for sid, skey, cls, seen in origins.get(key, [])
            ),
            evidence=tuple(evidence.get(key, [])),
            supersedes=tuple(Change(k, view.texts.get(k), True) for k in replaced.get(key, [])),
            decisions=tuple(view.of(d) for d in touching.get(key, [])),
            archived=key in shelved,
        )
        for key, text in view.live.items()
    )
