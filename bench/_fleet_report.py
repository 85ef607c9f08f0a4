"""The fleet bench's report (imported as `_fleet_report` from bench/): the text printed
without --json. The fleet, the machine, the library and the pilot; one table row per
measurement (workers, executor, wall time, rates, peak RSS, CPU, speed-up); notes on
sampling, on what each night did and on the queue; the profile's hot spots."""

from __future__ import annotations

from typing import Any

from _common import human
from _report import table

MB = 1e6


def render(report: dict[str, Any]) -> str:
    lines = _context(report)
    lines += ["", table(TABLE_HEAD, [_table_row(r) for r in report["runs"]]), ""]
    lines += _legend(report)
    for r in report["runs"]:
        lines += _run_notes(r)
    if report.get("profile"):
        lines += ["", *render_profile(report["profile"])]
    return "\n".join(lines)


def _context(report: dict[str, Any]) -> list[str]:
    """What was measured where: the fleet, the machine, the library, pilot and server."""
    f = report["fleet"]
    m = report["machine"]
    lines = [
        f"fleet: {f['agents']:,} agents x {f['sessions_per_agent']} sessions = "
        f"{f['sessions']:,} sessions, {human(f['bytes'])}, {f['lines']:,} lines "
        f"({f['avg_session_bytes'] / 1000:.1f} KB per session; "
        + (f"generated in {f['generate_s']:.1f} s" if f["generated"] else "reused")
        + f") at {f['root']}",
        f"machine: {m['cores']} CPU cores -> a speed-up of about {m['cores']}x at best, "
        f"whatever --workers says; {m['memory_total_bytes'] / 1e9:.1f} GB RAM; "
        f"load average at start {m['loadavg_start']}",
    ]
    lib = report["library"]
    lines.append(
        f"library: {lib['path']}"
        + (
            f" (git {lib['commit']}"
            + (", with uncommitted changes" if lib.get("uncommitted_changes") else "")
            + (", pinned with --pin" if lib.get("pinned") else "")
            + ")"
            if lib.get("commit")
            else ""
        )
    )
    if report.get("pilot"):
        p = report["pilot"]
        lines.append(
            f"pilot: {p['s_per_agent']:.2f} s per agent at 1 worker plus {p['fixed_s']:.1f} s "
            f"fixed per run (1 worker on {p['agents'][0]} and on {p['agents'][1]} agents); "
            f"limit {report['max_minutes']:g} min per run"
        )
    if report.get("postgres"):
        pq = report["postgres"]
        lines.append(
            f"postgres: {pq['kind']} (PostgreSQL {pq['server_version']}) at {pq['dsn']}; "
            "one fresh database per procrastinate run"
        )
    return lines


TABLE_HEAD = ["workers", "executor", "agents", "wall s", "agents/min", "sessions/s", "lines/s"]
TABLE_HEAD += ["MB/s", "peak RSS MB", "procs", "CPU s", "others' cores", "speed-up", "ok"]


def _table_row(r: dict[str, Any]) -> list[str]:
    return [
        str(r["workers"]),
        r.get("executor", "in-process"),
        f"{r['agents']:,}" + ("*" if r["sample_every"] > 1 else ""),
        f"{r['wall_s']:.1f}",
        f"{r['agents_per_min']:.1f}",
        f"{r['sessions_per_s']:.1f}",
        f"{r['corpus_lines_per_s']:.0f}",
        f"{r['mb_per_s']:.2f}",
        f"{r['peak_rss_bytes'] / MB:.0f}",
        str(r["peak_processes"]),
        f"{r['cpu_s']:.0f}",
        f"{r['others_cores']:.2f}",
        f"{r['speedup']:.2f}x" if r.get("speedup") is not None else "-",
        "ok" if r["ok"] else "FAIL",
    ]


def _legend(report: dict[str, Any]) -> list[str]:
    """What the columns mean, and which rows measured a sample."""
    baseline = report.get("speedup_baseline") or "the 1-worker row"
    lines = [
        "lines/s: corpus lines written per second; MB/s: transcript bytes read per second; "
        "peak RSS: the process tree's summed RSS (shared pages counted once per process); "
        "procs: most processes seen at once; CPU s: user+sys of the whole tree; others' "
        "cores: CPU the rest of the machine used meanwhile (other jobs competing for the "
        f"{report['machine']['cores']} cores); speed-up: agents/min against the {baseline} row."
    ]
    if any(r.get("executor") == "procrastinate" for r in report["runs"]):
        lines.append(
            "procrastinate rows: wall s from the enqueue command's start until every task "
            "succeeded or failed (the workers were started and registered before, not timed); "
            "peak RSS, procs and CPU s cover the worker processes plus the enqueueing CLI, "
            "not the PostgreSQL server (its own figures are in the notes below, and its CPU "
            "is not counted in others' cores)."
        )
    for r in report["runs"]:
        if r["sample_every"] > 1:
            est = r.get("estimated_full_wall_s")
            lines.append(
                f"* {r.get('executor', 'in-process')}, {r['workers']} worker(s): measured on "
                f"every {r['sample_every']}th agent "
                f"({r['agents']} of {report['fleet']['agents']:,})"
                + (f"; the pilot estimated the full run at {est / 60:.1f} min" if est else "")
                + "; its rates stand in for the full fleet."
            )
    return lines


def _run_notes(r: dict[str, Any]) -> list[str]:
    """What one measurement's night did, its queue figures, failures and warnings."""
    lines = [
        f"{r.get('executor', 'in-process')}, {r['workers']} worker(s): "
        f"{r['sessions_read']:,} sessions read, "
        f"{r['corpus_lines']:,} corpus lines, {r['candidates_new']:,} candidates, "
        f"{r['entries_added']:,} entries added (deep actions {r['deep_actions']}), "
        f"outcomes {r['outcomes']}, verify {'ok' if r['verify']['ok'] else 'FAILED'} on "
        f"{', '.join(r['verify']['agents'])}; largest process "
        f"{r['peak_single_rss_bytes'] / MB:.0f} MB; tree RSS by quarter of the run "
        f"{'/'.join(f'{b / MB:.0f}' for b in r['rss_by_quarter_bytes'])} MB; phase "
        f"seconds summed over agents {r['phase_s_sum']}"
    ]
    if r.get("executor") == "procrastinate":
        lines.append("  " + _queue_notes(r))
    for fail in r["failures"]:
        lines.append(f"  failure: {fail}")
    for warning in r.get("worker_log_warnings") or ():
        lines.append(f"  worker log: {warning[-200:]}")
    if r.get("stderr_tail"):
        lines.append("  stderr: " + r["stderr_tail"].strip().replace("\n", "\n  "))
    return lines


def _queue_notes(r: dict[str, Any]) -> str:
    """One procrastinate row's queue figures, for the notes under the table."""

    def secs(key: str) -> str:
        return f"{r[key]:.1f} s" if r.get(key) is not None else "-"

    enqueue = r.get("enqueue") or {}
    db = (
        f"PostgreSQL server peak PSS {r['db_peak_pss_bytes'] / MB:.0f} MB, CPU "
        f"{r['db_cpu_s']:.1f} s"
        if r.get("db_peak_pss_bytes") is not None
        else "PostgreSQL server not measured (--database-url)"
    )
    return (
        f"queue: workers registered after {secs('workers_ready_s')} (not timed); enqueue "
        f"command {enqueue.get('s', 0):.1f} s ({enqueue.get('outcomes')}); first run started "
        f"at {secs('first_run_started_s')}, last run ended at {secs('last_run_ended_s')}; "
        f"runs by {r['distinct_workers']} distinct worker(s) "
        f"{sorted(r['runs_by_worker'].values(), reverse=True)}; tasks at the end "
        f"{r['queue_states']}; worker CPU {r['worker_cpu_s']:.0f} s, enqueue CPU "
        f"{r['enqueue_cpu_s']:.1f} s; {db}; worker exit statuses {r['worker_exit_statuses']}"
    )


def render_profile(p: dict[str, Any], top: int = 15) -> list[str]:
    out = [
        f"profile of one agent's night ({p['agent']}, {p['sessions_read']} sessions): "
        f"{p['plain_wall_s']:.3f} s wall, {p['plain_cpu_s']:.3f} s CPU unprofiled; "
        f"{p['profiled_wall_s']:.3f} s under cProfile; phases {p['phase_s']}",
    ]
    total = sum(p["own_time_by_group"].values()) or 1.0
    out.append(
        "  own time by group: "
        + ", ".join(f"{g} {t:.3f} s ({t / total:.0%})" for g, t in p["own_time_by_group"].items())
    )
    for title, key in (("own time", "by_own_time"), ("cumulative time", "by_cumulative_time")):
        out += ["", f"  top functions by {title}:", "    ncalls   tottime   cumtime  function"]
        for row in p[key][:top]:
            out.append(
                f"  {row['ncalls']:>8}  {row['tottime_s']:8.3f}  {row['cumtime_s']:8.3f}  "
                f"{row['function'][-110:]}"
            )
    return out
