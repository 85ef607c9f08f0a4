"""The deep bench's text report (imported from bench/)."""

from __future__ import annotations

import json
from typing import Any

from _report import table

# -- output ---------------------------------------------------------------------------------


SWEEP_COLUMNS = [
    ("path", "path"),
    ("batch", "batch_size"),
    ("cands", "candidates"),
    ("batches", "batches"),
    ("calls", "llm_calls"),
    ("expected", "expected_batches"),
    ("in tok", "input_tokens"),
    ("out tok", "output_tokens"),
    ("in/promo", "input_tokens_per_promoted"),
    ("out/promo", "output_tokens_per_promoted"),
    ("wall s", "wall_s"),
    ("ex-srv s", "wall_ex_server_s"),
    ("ms/cand", "ms_per_candidate"),
    ("cand/s", "candidates_per_s"),
    ("agree", "counters_agree"),
]


def _llm_table(m: dict[str, Any]) -> str:
    return table(
        ["metric", "value"],
        [
            ["candidates", m["candidates"]],
            ["batches", m["batches"]],
            ["decisions (applied)", json.dumps(m["actions"])],
            ["decisions (model said)", json.dumps(m["model_said"])],
            ["fallbacks / deferred", f"{m['fallbacks']} / {json.dumps(m['deferred'])}"],
            [
                "LLM calls (summary / fake)",
                f"{m['llm_calls']} / {m['fake']['completions_served']}",
            ],
            [
                "input tokens (summary / fake)",
                f"{m['input_tokens']:,} / {m['fake']['prompt_tokens']:,}",
            ],
            [
                "output tokens (summary / fake)",
                f"{m['output_tokens']:,} / {m['fake']['completion_tokens']:,}",
            ],
            ["counters agree", m["counters_agree"]],
            ["cost (fake prices)", f"${m['cost_usd']:.4f}"],
            ["promoted (add+merge+supersede)", m["promoted"]],
            ["calls per promoted", m["calls_per_promoted"]],
            ["input tokens per promoted", m["input_tokens_per_promoted"]],
            ["output tokens per promoted", m["output_tokens_per_promoted"]],
            ["input tokens per call", m["input_tokens_per_call"]],
            ["wall time, raw (s)", m["wall_s"]],
            ["server reply time (s, subtracted)", m["server_reply_s"]],
            ["wall time ex-server (s)", m["wall_ex_server_s"]],
            ["server handler time (s, info)", m["server_handler_s"]],
            ["ms per candidate (ex-server)", m["ms_per_candidate"]],
            [
                "candidates/s (ex-server / raw)",
                f"{m['candidates_per_s']} / {m['candidates_per_s_raw']}",
            ],
            [
                "entries after / MEMORY.md chars",
                f"{m['entries_after']} / {m['memory_chars']:,}",
            ],
        ],
    )


def _profile_lines(profiles: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for prof in profiles:
        out += ["", f"cProfile of the {prof['run']} run ({prof['wall_s']} s under the profiler):"]
        for view in prof["views"]:
            out.append(f"  by {view['view']}:")
            out.append(
                table(
                    ["ncalls", "own s", "cum s", "function"],
                    [
                        [r["ncalls"], r["tottime_s"], r["cumtime_s"], r["function"]]
                        for r in view["rows"]
                    ],
                )
            )
    return out


def render(doc: dict[str, Any]) -> str:
    d, m, det = doc["data"], doc["llm"], doc["deterministic"]
    out = [
        f"deep-phase benchmark ({doc['params']['candidates']} candidates, seed "
        f"{doc['params']['seed']})",
        "",
        f"data: {d['facts']} facts {d['fact_kinds']}, {d['sessions']} sessions, "
        f"{d['transcript_lines']:,} lines, {d['transcript_bytes'] / 1e6:.2f} MB; "
        f"MEMORY.md seeded with {d['seed_entries']} entries; "
        f"eligible {d['eligible']} of {d['pending']} pending "
        f"({'ok' if d['eligible_ok'] else 'NOT {}-{}'.format(*d['eligible_expected'])}); "
        f"built in {d['build_s']} s",
        "",
        f"LLM path, batch size {m['batch_size']}:",
        _llm_table(m),
        "",
        "batch-size sweep (LLM path), and the deterministic path on the same data; "
        "expected calls = ceil(candidates / batch size):",
        table(
            [header for header, _ in SWEEP_COLUMNS],
            [[r.get(key) for _, key in SWEEP_COLUMNS] for r in [*doc["sweep"], det]],
        ),
        "",
        f"LLM path (batch size {m['batch_size']}) ex-server vs deterministic: "
        f"{m['wall_ex_server_s'] / det['wall_s']:.2f}x the time",
    ]
    out += _profile_lines(doc.get("profiles", []))
    if doc["problems"]:
        out += ["", "PROBLEMS:", *(f"  - {p}" for p in doc["problems"])]
    return "\n".join(out)
