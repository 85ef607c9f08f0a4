"""The forget bench's text report (imported from bench/)."""

from __future__ import annotations

from typing import Any

from _common import (
    human,
)
from _report import table

# -- output -----------------------------------------------------------------------------------


PURGE_COLUMNS = [
    ("session", "session"),
    ("supports", "supports_entries"),
    ("dry s", "dry_s"),
    ("real s", "real_s"),
    ("entries", "entries_removed"),
    ("mixed", "mixed_lineage"),
    ("lines", "corpus_lines"),
    ("cands", "candidates"),
    ("evid", "candidate_evidence"),
    ("origins", "origins"),
    ("calls", "llm_calls"),
    ("backups", "memory_backups"),
    ("runs", "run_summaries"),
    ("file lines", "file_lines_removed"),
    ("dry=real", "dry_matches_real"),
]


def _state_table(doc: dict[str, Any]) -> str:
    d, s = doc["data"], doc["state"]
    return table(
        ["state", "value"],
        [
            ["sessions (files / rows)", f"{d['sessions']:,} / {s['sessions']:,}"],
            ["transcripts", f"{d['transcript_lines']:,} lines, {human(d['transcript_bytes'])}"],
            ["facts (mentions)", f"{d['facts']:,} ({d['fact_mentions']:,})"],
            ["corpus lines", s["corpus_lines"]],
            [
                "candidates (evidence rows)",
                f"{s['candidates']:,} ({s['candidate_evidence']:,})",
            ],
            ["entries (MEMORY.md blocks)", f"{s['entries']:,} ({s['memory_md_blocks']:,})"],
            ["  from multi-session candidates", doc["entries"]["multi_session_entries"]],
            ["origins / entry evidence", f"{s['origins']:,} / {s['entry_evidence']:,}"],
            ["llm_calls", f"{s['llm_calls']:,} ({human(s['llm_calls_bytes'])})"],
            ["memory backups", f"{s['memory_backups']:,} ({human(s['backups_bytes'])})"],
            ["MEMORY.md", human(s["memory_md_bytes"])],
            ["database (+WAL)", human(s["db_bytes"])],
        ],
    )


def _profile_lines(prof: dict[str, Any]) -> list[str]:
    out: list[str] = [
        "",
        f"profiled purge of {prof['session']} ({prof['entries_removed']} entries): "
        f"{prof['wall_s_under_profiler']} s under cProfile; SQL "
        f"{prof['sql_total_s']} s in {prof['sql_statements']:,} statements",
    ]
    for view in prof["functions"]:
        out.append(f"  by {view['view']}:")
        out.append(
            table(
                ["ncalls", "own s", "cum s", "function"],
                [
                    [x["ncalls"], x["tottime_s"], x["cumtime_s"], x["function"]]
                    for x in view["rows"]
                ],
            )
        )
    out.append("  SQL by total time (wall time inside cursor.execute):")
    out.append(
        table(
            ["calls", "rows", "total s", "statement"],
            [[x["calls"], x["rows_bound"], x["total_s"], x["sql"]] for x in prof["sql"]],
        )
    )
    return out


def render(doc: dict[str, Any]) -> str:
    p, d, r = doc["params"], doc["data"], doc["result"]
    out = [
        f"forget benchmark: {p['sessions']:,} sessions, {p['entries']:,} entries "
        f"(seed {p['seed']}; tree {p['tree']}, Python {p['python']})",
        "",
        _state_table(doc),
        "",
        table(
            ["phase", "seconds"],
            [
                ["write transcripts (untimed setup)", d["write_s"]],
                ["FULL LIGHT PASS (fresh state)", r["light_s"]],
                [
                    "build entries, calls, backups (untimed setup; per night: "
                    + ", ".join(str(x) for x in doc["entries"]["night_s"])
                    + ")",
                    doc["entries"]["build_s"],
                ],
            ],
        ),
        "",
        "purges (one session each, in order; dry run first, then the real purge):",
        table(
            [h for h, _ in PURGE_COLUMNS],
            [
                [row["session"][:8], *(row.get(k) for _, k in PURGE_COLUMNS[1:])]
                for row in doc["purges"]
            ],
        ),
        "",
        table(
            ["result", "min", "median"],
            [
                ["dry run, s", r["dry_min_s"], r["dry_median_s"]],
                ["real purge, s", r["real_min_s"], r["real_median_s"]],
                ["real purge / light pass", f"{r['ratio_min']:.2%}", f"{r['ratio_median']:.2%}"],
            ],
        ),
        f"(for scale: one App.discover() over the {p['sessions']:,} files takes "
        f"{r['discover_s']} s)",
        f"light pass {r['light_s']} s; purge median {r['real_median_s']} s "
        f"= {r['ratio_median']:.2%} of it"
        + ("  -> SLOW (> 10% of light or > 5 s)" if r["slow"] else ""),
    ]
    after = doc["state_after"]
    out.append(
        f"after the purges: {after['entries']:,} entries, {after['llm_calls']:,} llm_calls, "
        f"{after['memory_backups']} backups, database {human(after['db_bytes'])}"
    )
    prof = doc.get("profile")
    if prof:
        out += _profile_lines(prof)
    if doc["problems"]:
        out += ["", "PROBLEMS:", *(f"  - {x}" for x in doc["problems"])]
    return "\n".join(out)
