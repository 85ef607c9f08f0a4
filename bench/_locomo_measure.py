"""One agent's figures after its night, for the locomo bench (imported from bench/): what
MEMORY.md covers, and where each gold fact is lost."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import _labels
from _locomo_data import (
    EXAMPLES,
    MATCH_CONTAINMENT,
    RANDOM_DRAWS,
    SMALL_TALK_EXAMPLES,
    Conversation,
    Observation,
)
from _locomo_match import (
    Entry,
    Pick,
    containment,
    coverage,
    framing,
    framing_chars,
    random_baseline,
    ratio,
    small_talk,
    words,
)
from sqlalchemy import text as sql

from dreaming.app import App
from dreaming.ingest import claims as claims_mod
from dreaming.ingest.candidates import read_clock
from dreaming.memory import gates, lineage


def _gates(cand: dict[str, Any], settings: Any, clock: datetime | None) -> list[str]:
    """The deep gates a candidate fails, in `_select`'s order (empty: it passes them all)."""
    deep = settings.deep
    failed: list[str] = []
    if cand["sessions"] < deep.min_sessions and not cand["durable_cue"]:
        failed.append("gate: 1 session, no cue")
    if gates.row_clarity(cand) < deep.min_score:  # the statement's own value, as deep reads it
        failed.append("gate: score")
    max_age = getattr(deep, "max_age_days", None)  # None: no age limit
    if max_age is not None and clock is not None and cand["last_seen"] is not None:
        last = datetime.fromisoformat(str(cand["last_seen"]))
        last = last if last.tzinfo else last.replace(tzinfo=UTC)
        if last < clock - timedelta(days=max_age):
            failed.append("gate: age")
    if cand["owner_lines"] + cand["agent_lines"] == 0:
        failed.append("gate: origin")
    return failed


STAGES = (
    "matched",
    "entry, text differs",
    "not decided (cap/budget) or skipped",
    "recall of an entry",
    "gate: origin",
    "gate: age",
    "gate: score",
    "gate: 1 session, no cue",
    "no claim",
    "no corpus line",
)


@dataclass
class _Night:
    """What `measure` reads of one agent's store (one connection), keyed as it uses it."""

    entries: list[Entry]
    lines: dict[tuple[str, int], int]  # (session, line) -> corpus line id
    cands_of_line: dict[int, list[int]]  # corpus line id -> the candidates its claims fed
    cands: dict[int, dict[str, Any]]
    recalled: set[int]  # corpus line ids whose claim repeated a live entry
    clock: datetime | None
    llm_row: Any  # calls, input tokens, output tokens, cost
    line_texts: dict[int, str]
    cand_turns: dict[int, set[str]]  # every candidate, any status: its evidence's LoCoMo turns


def _rows(conn: Any, query: str, agent: str) -> Any:
    return conn.execute(sql(query), {"a": agent})


def _entries(conn: Any, conv: Conversation, names: Sequence[str]) -> list[Entry]:
    entries: list[Entry] = []
    for key, text in lineage.live_entries(conn, conv.agent):
        evidence = lineage.entry_lineage(conn, conv.agent, key).evidence
        turns = {conv.dia_of[(s, n)] for s, n in evidence if (s, n) in conv.dia_of}
        entries.append(Entry(key, text, turns, words(text, names)))
    return entries


def _read(app: App, conv: Conversation, names: Sequence[str]) -> _Night:
    agent = conv.agent
    with app.engine(agent).connect() as conn:
        entries = _entries(conn, conv, names)
        lines = {
            (s, n): i
            for i, s, n in _rows(
                conn, "SELECT id, session_id, line FROM corpus_lines WHERE agent = :a", agent
            )
        }
        cands_of_line: dict[int, list[int]] = defaultdict(list)
        for cid, lid in _rows(
            conn,
            "SELECT candidate_id, corpus_line_id FROM candidate_evidence WHERE agent = :a",
            agent,
        ):
            cands_of_line[lid].append(cid)
        cands = {
            r["id"]: dict(r)
            for r in _rows(conn, "SELECT * FROM candidates WHERE agent = :a", agent).mappings()
        }
        recalled = {
            lid
            for (lid,) in _rows(conn, "SELECT corpus_line_id FROM recalls WHERE agent = :a", agent)
        }
        clock = read_clock(conn, agent)
        llm_row = _rows(
            conn,
            "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),"
            " coalesce(sum(cost_usd), 0) FROM llm_calls"
            " WHERE agent = :a AND outcome NOT IN ('over_budget', 'unreachable')",
            agent,
        ).one()
        line_texts: dict[int, str] = dict(
            _rows(conn, "SELECT id, text FROM corpus_lines WHERE agent = :a", agent).all()
        )
        cand_turns: dict[int, set[str]] = defaultdict(set)
        for cid, sid, n in _rows(
            conn,
            "SELECT ce.candidate_id, cl.session_id, cl.line FROM candidate_evidence ce"
            " JOIN corpus_lines cl ON cl.id = ce.corpus_line_id"
            " WHERE ce.agent = :a AND cl.agent = :a",
            agent,
        ):
            if (sid, n) in conv.dia_of:
                cand_turns[cid].add(conv.dia_of[(sid, n)])
    return _Night(
        entries, lines, cands_of_line, cands, recalled, clock, llm_row, line_texts, cand_turns
    )


def _qa_by_category(conv: Conversation, covered: set[str]) -> dict[str, list[int]]:
    by_cat: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for q in conv.questions:
        c = by_cat[q.category]
        c[0] += 1
        c[1] += bool(covered & set(q.evidence))
        c[2] += set(q.evidence) <= covered
    return {str(k): v for k, v in sorted(by_cat.items())}


def _lost_before_an_entry(
    ob: Observation,
    conv: Conversation,
    night: _Night,
    settings: Any,
    fact: frozenset[str],
    names: Sequence[str],
    detail: dict[str, Any],
) -> str:
    """Where a fact no entry's evidence holds was lost (filling `detail` on the way)."""
    cs = settings.candidates
    stage = "no corpus line"
    # The fact's claim: of the candidates its turns fed, the one whose text holds most
    # of the fact's words (ties: the one that got furthest). A turn also feeds
    # candidates for its other sentences ("Wow, that's awesome!"); they do not count.
    rank = STAGES.index
    options: list[tuple[float, int, str, dict[str, Any], list[str]]] = []
    for d in ob.dia_ids:
        lid = night.lines.get(conv.line_of[d])
        if lid is None:
            continue
        # Unless one of its candidates says more, below. A claim that repeats a live
        # entry is a recall of that entry (not a candidate, not entry evidence).
        if lid in night.recalled:
            stage = "recall of an entry"
        elif stage != "recall of an entry":
            stage = "no claim"
        turn = conv.turn(d)
        found = claims_mod.extract(
            night.line_texts[lid], min_words=cs.min_claim_words, max_words=cs.max_claim_words
        )
        detail.setdefault("said", turn.text if turn else None)
        detail.setdefault("claims", [c.text for c in found])
        for cid in night.cands_of_line.get(lid, []):
            cand = night.cands[cid]
            failed = _gates(cand, settings, night.clock) if cand["status"] == "pending" else []
            here = failed[0] if failed else "not decided (cap/budget) or skipped"
            near = containment(fact, words(cand["text"], names))
            options.append((near, -rank(here), here, cand, failed))
    if options:
        near, _, stage, cand, failed = max(options, key=lambda o: o[:2])
        detail["gates_failed"] = failed
        shown = ("text", "sessions", "days", "score", "durable_cue", "status")
        detail["candidate"] = {k: cand[k] for k in shown} | {"containment": round(near, 2)}
    return stage


@dataclass
class _Funnel:
    """Gold facts: recall, and where each one is lost."""

    stages: Counter[str] = field(default_factory=Counter)
    gates_failed: Counter[str] = field(default_factory=Counter)  # every gate a lost fact fails
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    recall: int = 0
    recall_ev: int = 0
    useful: set[str] = field(default_factory=set)  # entries that match at least one gold fact


def _funnel(conv: Conversation, night: _Night, settings: Any, names: Sequence[str]) -> _Funnel:
    out = _Funnel()
    for ob in conv.observations:
        fact = words(ob.text, names)
        ids = set(ob.dia_ids)
        from_turn = [e for e in night.entries if e.turns & ids]
        best = max((containment(fact, e.words) for e in from_turn), default=0.0)
        stage: str
        detail: dict[str, Any] = {"fact": ob.text, "turns": list(ob.dia_ids)}
        for e in from_turn:
            if containment(fact, e.words) >= MATCH_CONTAINMENT:
                out.useful.add(e.key)
        if from_turn:
            out.recall_ev += 1
            detail["entry"] = max(from_turn, key=lambda e: containment(fact, e.words)).text
            detail["containment"] = round(best, 2)
            if best >= MATCH_CONTAINMENT:
                out.recall += 1
                stage = "matched"
            else:
                stage = "entry, text differs"
        else:
            stage = _lost_before_an_entry(ob, conv, night, settings, fact, names, detail)
        out.stages[stage] += 1
        if stage.startswith("gate"):
            out.gates_failed.update(detail["gates_failed"])
        if len(out.examples[stage]) < EXAMPLES:
            out.examples[stage].append(detail)
    return out


def measure(
    app: App,
    conv: Conversation,
    seed: int = 0,
    draws: int = RANDOM_DRAWS,
    labels: Sequence[_labels.Label] = (),
) -> dict[str, Any]:
    """Coverage, recall, funnel, compression and cost of one agent after its night, a random
    selection of its candidates at the same budget, and its small talk (by evidence turns,
    and by the hand `labels` of the entries whose statement they label)."""
    agent = conv.agent
    names = [n for sp in conv.speakers for n in sp.split()]
    night = _read(app, conv, names)
    entries, cands = night.entries, night.cands
    picks = [Pick(cid, c["text"], frozenset(night.cand_turns[cid])) for cid, c in cands.items()]
    covered: set[str] = set().union(*(e.turns for e in entries))
    gold_turns = {d for ob in conv.observations for d in ob.dia_ids}
    real = coverage(covered, conv)  # QA evidence coverage
    funnel = _funnel(conv, night, app.settings, names)
    memory = app.paths.memory_file(agent)
    memory_chars = len(memory.read_text(encoding="utf-8")) if memory.exists() else 0
    overhead = framing(memory_chars, [e.text for e in entries])
    rand = random_baseline(conv, picks, memory_chars, overhead, seed, draws)
    chatter = small_talk(((e.text, e.turns) for e in entries), set(conv.qa_turns) | gold_turns)
    labelled = _labels.rescore(((agent, e.text) for e in entries), labels)
    assert real["recall_evidence"] == funnel.recall_ev  # one definition, real and random
    return {
        "sessions": len(conv.sessions),
        "turns": conv.turns,
        "transcript_chars": conv.transcript_chars,
        "qa": len(conv.questions),
        "qa_unresolvable": conv.qa_unresolvable,
        "qa_any": real["qa_any"],
        "qa_all": real["qa_all"],
        "qa_by_category": _qa_by_category(conv, covered),
        "gold": len(conv.observations),
        "recall": funnel.recall,
        "recall_evidence": funnel.recall_ev,
        "entries": len(entries),
        "entries_gold_turn": sum(1 for e in entries if e.turns & gold_turns),
        "entries_matching": len(funnel.useful),
        "entries_small_talk": len(chatter),
        "small_talk": round(len(chatter) / len(entries), 4) if entries else None,
        "small_talk_examples": chatter[:SMALL_TALK_EXAMPLES],
        "labelled": labelled,
        "turns_in_entries": len(covered),
        "memory_chars": memory_chars,
        "framing_chars": framing_chars(memory_chars, [e.text for e in entries]),
        "framing": round(overhead, 2) if entries else None,
        "random": rand,
        "qa_any_vs_random": ratio(real["qa_any"], rand["qa_any"]),
        **_cost(night),
        "funnel": {s: funnel.stages[s] for s in STAGES if funnel.stages[s]},
        "gates_failed": dict(sorted(funnel.gates_failed.items())),
        "funnel_examples": {s: funnel.examples[s] for s in STAGES if funnel.examples[s]},
        "entry_examples": [e.text for e in entries[:EXAMPLES]],
    }


def _cost(night: _Night) -> dict[str, Any]:
    return {
        "candidates": len(night.cands),
        "candidates_pending": sum(1 for c in night.cands.values() if c["status"] == "pending"),
        "llm_calls": int(night.llm_row[0]),
        "input_tokens": int(night.llm_row[1]),
        "output_tokens": int(night.llm_row[2]),
        "cost_usd": round(float(night.llm_row[3]), 6),
    }
