"""The locomo bench's totals and text report (imported from bench/)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import _labels
from _locomo_data import (
    MATCH_CONTAINMENT,
    RANDOM_MEANS,
)
from _locomo_match import (
    ratio,
)
from _locomo_measure import STAGES
from _report import table

SUMMED = (
    "sessions",
    "turns",
    "transcript_chars",
    "qa",
    "qa_unresolvable",
    "qa_any",
    "qa_all",
    "gold",
    "recall",
    "recall_evidence",
    "entries",
    "entries_gold_turn",
    "entries_matching",
    "entries_small_talk",
    "turns_in_entries",
    "memory_chars",
    "framing_chars",
    "candidates",
    "candidates_pending",
    "llm_calls",
    "input_tokens",
    "output_tokens",
    "cost_usd",
)


def labelled_overall(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The conversations' label matches summed, and the share of small talk among them."""
    out = {k: sum(p[k] for p in parts) for k in ("matched", "unmatched", "small_talk")}
    out["share"] = round(out["small_talk"] / out["matched"], 4) if out["matched"] else None
    return out


def overall(per: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: sum(d[k] for d in per.values()) for k in SUMMED}
    out["cost_usd"] = round(out["cost_usd"], 6)
    rands = [d["random"] for d in per.values()]
    out["random"] = {
        "seed": rands[0]["seed"] if rands else None,
        "draws": rands[0]["draws"] if rands else None,
        "budget": sum(r["budget"] for r in rands),
        "candidates": sum(r["candidates"] for r in rands),
        **{k: round(sum(r[k] for r in rands), 3) for k in RANDOM_MEANS},
    }
    out["qa_any_vs_random"] = ratio(out["qa_any"], out["random"]["qa_any"])
    n = out["entries"]
    out["small_talk"] = round(out["entries_small_talk"] / n, 4) if n else None
    out["labelled"] = labelled_overall([d["labelled"] for d in per.values()])
    out["framing"] = round(out["framing_chars"] / n, 2) if n else None
    funnel: Counter[str] = Counter()
    gates: Counter[str] = Counter()
    cats: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    times: Counter[str] = Counter()
    for d in per.values():
        funnel.update(d["funnel"])
        gates.update(d["gates_failed"])
        times.update(d["times"])
        for k, v in d["qa_by_category"].items():
            cats[k] = [a + b for a, b in zip(cats[k], v, strict=True)]
    out["funnel"] = {s: funnel[s] for s in STAGES if funnel[s]}
    out["gates_failed"] = dict(sorted(gates.items()))
    out["qa_by_category"] = dict(sorted(cats.items()))
    out["times"] = {k: round(v, 3) for k, v in times.items()}
    out["purge"] = {
        "leaks": sum(d["purge"]["leaks"] for d in per.values()),
        "leaks_raw_bytes": sum(d["purge"]["leaks_raw_bytes"] for d in per.values()),
        "verify_ok": all(d["purge"]["verify_ok"] for d in per.values()),
        "needles": sum(d["purge"]["needles"] for d in per.values()),
        "needles_found_before": sum(d["purge"]["needles_found_before"] for d in per.values()),
        "entries_removed": sum(d["purge"]["entries_removed"] for d in per.values()),
    }
    return out


# -- report ---------------------------------------------------------------------------------


def _pct(a: float, b: float) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def _row(d: dict[str, Any]) -> dict[str, str]:
    p = d["purge"]
    return {
        "sess": str(d["sessions"]),
        "turns": str(d["turns"]),
        "QA": str(d["qa"]),
        "QA any": _pct(d["qa_any"], d["qa"]),
        "QA all": _pct(d["qa_all"], d["qa"]),
        "QA any (random)": _pct(d["random"]["qa_any"], d["qa"]),
        "vs random": f"{v:.2f}x" if (v := d["qa_any_vs_random"]) is not None else "-",
        "recall(ev) (random)": _pct(d["random"]["recall_evidence"], d["gold"]),
        "gold": str(d["gold"]),
        "recall": _pct(d["recall"], d["gold"]),
        "recall(ev)": _pct(d["recall_evidence"], d["gold"]),
        "entries": str(d["entries"]),
        "match a fact": _pct(d["entries_matching"], d["entries"]),
        "small talk": _pct(d["entries_small_talk"], d["entries"]),
        "small talk (labelled)": _pct(d["labelled"]["small_talk"], d["labelled"]["matched"]),
        "labelled: matched/unmatched": f"{d['labelled']['matched']}/{d['labelled']['unmatched']}",
        "MEMORY chars": f"{d['memory_chars']:,}",
        "of transcript": _pct(d["memory_chars"], d["transcript_chars"]),
        "framing/entry": f"{v:.1f}" if (v := d["framing"]) is not None else "-",
        "LLM calls": str(d["llm_calls"]),
        "tokens in/out": f"{d['input_tokens']:,}/{d['output_tokens']:,}",
        "light s": f"{d['times']['light']:.2f}",
        "rem s": f"{d['times']['rem']:.2f}",
        "deep s": f"{d['times']['deep']:.2f}",
        "forget s": f"{d['times']['forget']:.2f}",
        "needles seen before": f"{p['needles_found_before']}/{p['needles']}",
        "left: files, dump": str(p["leaks"]),
        "left: raw db bytes": str(p["leaks_raw_bytes"]),
        "verify": "ok" if p["verify_ok"] else "FAILED",
    }


QUALITY = [
    "sess",
    "turns",
    "QA",
    "QA any",
    "QA any (random)",
    "vs random",
    "QA all",
    "gold",
    "recall",
    "recall(ev)",
    "recall(ev) (random)",
]
SIZE = [
    "entries",
    "match a fact",
    "small talk",
    "small talk (labelled)",
    "labelled: matched/unmatched",
    "MEMORY chars",
    "of transcript",
    "framing/entry",
    "LLM calls",
    "tokens in/out",
]
TIMING = [
    "light s",
    "rem s",
    "deep s",
    "forget s",
    "needles seen before",
    "left: files, dump",
    "left: raw db bytes",
    "verify",
]


def render(doc: dict[str, Any]) -> str:
    runs = doc["runs"]
    parts: list[str] = []
    ds = doc["data"]
    parts.append(
        f"LoCoMo: {ds['conversations']} conversations, {ds['sessions']} sessions, "
        f"{ds['turns']:,} turns, {ds['transcript_chars']:,} transcript chars; roles "
        f"{doc['roles']}; schedule {doc['schedule']}\nQA categories 1-4; gold fact matched: an "
        f"entry's evidence has the fact's turn and >= {MATCH_CONTAINMENT:.0%} of its content words"
        f"\nrandom: the agent's candidates shuffled (seeds {doc['seed']}.."
        f"{doc['seed'] + doc['random_draws'] - 1}, mean of {doc['random_draws']}), taken until "
        "MEMORY.md's size; small talk: entries with no QA (any category) or gold-fact turn"
        f"\nsmall talk (labelled): of the entries whose statement is one of the "
        f"{doc['labels']} hand-labelled ones ({_labels.LABELS.name}), the share labelled small talk"
    )
    agents = list(runs[0]["conversations"])
    tables = ((QUALITY, "quality"), (SIZE, "size and cost"), (TIMING, "time; purge of session 1"))
    for cols, title in tables:
        headers = ["conversation", *(["run"] if len(runs) > 1 else []), *cols]
        rows: list[list[str]] = []
        for agent in [*agents, "overall"]:
            for run in runs:
                d = run["overall"] if agent == "overall" else run["conversations"][agent]
                row = _row(d)
                rows.append(
                    [agent, *([run["label"]] if len(runs) > 1 else []), *(row[c] for c in cols)]
                )
        parts.append(f"\n{title}\n" + table(headers, rows, label_column=True))
    many = len(runs) > 1
    stage_rows: list[list[str]] = []
    for st in STAGES:
        if any(r["overall"]["funnel"].get(st) for r in runs):
            cells = [st]
            for r in runs:
                o = r["overall"]
                n = o["funnel"].get(st, 0)
                cells += [str(n), _pct(n, o["gold"])]
            stage_rows.append(cells)
    for gate in sorted({g for r in runs for g in r["overall"]["gates_failed"]}):
        cells = [f"  of those lost at a gate, failing {gate.removeprefix('gate: ')}"]
        for r in runs:
            o = r["overall"]
            lost = sum(n for st, n in o["funnel"].items() if st.startswith("gate"))
            n = o["gates_failed"].get(gate, 0)
            cells += [str(n), _pct(n, lost)]
        stage_rows.append(cells)
    labels = [r["label"] for r in runs]
    parts.append(
        "\nwhere gold facts end up (lost at a gate: the stage of the fact's own claim)\n"
        + table(
            ["stage", *(h for lb in labels for h in (f"{lb} facts" if many else "facts", "share"))],
            stage_rows,
            label_column=True,
        )
    )
    cat_rows: list[list[str]] = []
    for k, v in runs[0]["overall"]["qa_by_category"].items():
        cells = [k, str(v[0])]
        for r in runs:
            w = r["overall"]["qa_by_category"][k]
            cells += [_pct(w[1], w[0]), _pct(w[2], w[0])]
        cat_rows.append(cells)
    parts.append(
        "\nQA evidence coverage by category\n"
        + table(
            [
                "category",
                "questions",
                *(h for lb in labels for h in ((f"{lb} any", "all") if many else ("any", "all"))),
            ],
            cat_rows,
            label_column=True,
        )
    )
    return "\n".join(parts)


# -- main -----------------------------------------------------------------------------------
