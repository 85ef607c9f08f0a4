"""Capacity benchmark: a synthetic year of nights for one agent under MEMORY.md's budget.

    .venv/bin/python bench/capacity.py                  # 365 nights, a 12,000-character budget
    .venv/bin/python bench/capacity.py --quick          # 60 nights under 4,000 characters
    .venv/bin/python bench/capacity.py --nights 90 --max-chars 6000 --json

Every night the owner has one short conversation: a few facts (relatives and where they
live, colleagues, services, trips, birthdays), now and then a standing instruction ("always
run the tests before pushing to ...") or a constraint ("I'm allergic to ..."), small talk
("thanks, that means a lot"), and with some chance a fact said before, verbatim. Then the
night runs (light, REM, deep; deterministic, no LLM) and the bench measures what the agent
will load: MEMORY.md's size as OpenClaw counts it (it must never pass the budget: the bench
fails if it does), the archive's size, the time the night took, the entries loaded and
archived, and the share of standing instructions and constraints on each side (they are the
last to be archived). Prints a line per 30 nights and a summary; `--json` prints the summary
as JSON. Deterministic: the same seed gives the same transcripts and the same memory.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import HelpFormatter, log, repo_on_path

repo_on_path()

from dreaming import runner  # noqa: E402
from dreaming.app import App  # noqa: E402
from dreaming.memory import capacity, lineage  # noqa: E402
from tests.openclaw_builder import FakeOpenClaw  # noqa: E402

AGENT = "main"
START = datetime(2025, 1, 6, 19, 0, tzinfo=UTC)
OPERATOR = (
    "# MEMORY.md\n\nNotes from the operator: this agent helps with home and work."
    " Ask before sending anything on my behalf.\n"
)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


NAMES = _words(
    "Anna Tomas Maria Luis Priya Kenji Olga Farid Ines Mateo Sofia Ravi Lena Omar Zoe Hugo"
    " Nadia Pavel Elena Diego Amara Jonas Leila Marco Yuki Tariq Greta Nils Rosa Ivan Chloe"
    " Felix Mira Samir Clara Theo Ada Bruno Ingrid Kofi"
)
SURNAMES = _words(
    "Silva Novak Berg Okafor Tanaka Moreau Costa Weber Kowalski Haddad Lindqvist Rossi"
    " Petrov Nakamura Dubois Jansen Moreno Fischer Horvat Sato Keller Quinn Ortega Varga"
    " Holm Mendes Ivanova Laurent Becker Rahman Sousa Kaya Duarte Nilsen Abbas Ferrari"
    " Kovacs Morales Yilmaz Brandt"
)
RELATIONS = _words("sister brother cousin aunt uncle niece nephew friend neighbour godson")
CITIES = _words(
    "Lisbon Porto Leeds Bristol Osaka Lyon Graz Turin Gdansk Bergen Valencia Cork Ghent"
    " Malmo Tartu Split Bilbao Basel Utrecht Aarhus"
)
JOBS = _words("architect nurse teacher chemist pilot baker lawyer carpenter dentist editor")
SERVICES = _words("billing search ledger atlas harbor comet quartz orbit falcon meadow")
TOOLS = _words("Postgres Redis Kafka Nginx Elastic Terraform Grafana RabbitMQ")
REGIONS = _words("Frankfurt Dublin Virginia Tokyo Sydney Stockholm")
MONTHS = _words(
    "January February March April May June July August September October November December"
)
FOODS = _words("peanuts shellfish gluten sesame lactose kiwi mustard soy")
SMALL_TALK = (
    "thanks, that means a lot",
    "wow, awesome",
    "hey, good morning",
    "ok cool, thanks!",
    "haha nice",
    "great, talk later",
)
REPLIES = ("Noted, thanks.", "Got it.", "Let me check that for you.", "Sure, will do.")


def fact(rng: random.Random, used: set[str]) -> str:
    """A new fact: a new holder each time, so no two facts share a slot by chance."""
    for _ in range(1000):
        name = rng.choice(NAMES) + " " + rng.choice(SURNAMES)
        if name in used:
            continue
        used.add(name)
        kind = rng.randrange(5)
        if kind == 0:
            rel, city, job = rng.choice(RELATIONS), rng.choice(CITIES), rng.choice(JOBS)
            return f"My {rel} {name} lives in {city} and works as a {job}."
        if kind == 1:
            return f"{name} from the {rng.choice(SERVICES)} team owns the on-call rota."
        if kind == 2:
            service, tool, region = rng.choice(SERVICES), rng.choice(TOOLS), rng.choice(REGIONS)
            return f"{name} says the {service} service runs on {tool} in {region}."
        if kind == 3:
            day, month = rng.randint(1, 28), rng.choice(MONTHS)
            return f"My friend {name}'s birthday is on {month} {day}."
        city, month = rng.choice(CITIES), rng.choice(MONTHS)
        return f"I'm meeting {name} in {city} in {month} for the conference."
    raise RuntimeError("ran out of names")


def standing(rng: random.Random, n: int) -> str:
    """A standing instruction or a constraint (numbered so each is its own)."""
    if rng.random() < 0.5:
        food = rng.choice(FOODS)
        return f"I'm allergic to {food}, please remember that (note {n})."
    service = rng.choice(SERVICES)
    return f"Always run the tests before pushing to the {service}-{n} repository."


def write_year(root: Path, nights: int, seed: int) -> None:
    """One session per night, `nights` nights from START."""
    rng = random.Random(seed)
    oc = FakeOpenClaw(root)
    used: set[str] = set()
    said: list[str] = []
    for night in range(nights):
        turns: list[tuple[str, str]] = [("user", rng.choice(SMALL_TALK))]
        statements = [fact(rng, used) for _ in range(rng.randint(2, 4))]
        if rng.random() < 0.12:
            statements.append(standing(rng, night))
        if said and rng.random() < 0.3:
            statements.append(rng.choice(said))  # said again, verbatim
        said += statements
        for line in statements:
            turns += [("user", line), ("assistant", rng.choice(REPLIES))]
        turns.append(("user", rng.choice(SMALL_TALK)))
        sid = f"night-{night:03d}"
        oc.session(
            AGENT,
            sid,
            turns,
            key=f"agent:{AGENT}:telegram:direct:{sid}",
            start=START + timedelta(days=night),
            chatType="direct",
        )


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    source = work / "transcripts"
    log(f"writing {args.nights} nights of transcripts in {source}")
    write_year(source, args.nights, args.seed)
    state = work / "state"
    (state / "workspace").mkdir(parents=True)
    (state / "workspace" / "MEMORY.md").write_text(OPERATOR)
    (state / "dreaming.toml").write_text(
        f"[memory]\nmax_chars = {args.max_chars}\nhalf_life_days = {args.half_life}\n"
    )
    memory = state / "workspace" / "MEMORY.md"
    shelf = state / "workspace" / "memory" / "dreaming-archive.md"
    sessions = sorted((source / "agents" / AGENT / "sessions").glob("night-*.jsonl"))
    folder = state / "agents" / AGENT / "sessions"
    folder.mkdir(parents=True)
    index = json.loads((source / "agents" / AGENT / "sessions" / "sessions.json").read_text())
    shown: dict[str, Any] = {}
    nights: list[dict[str, Any]] = []
    app = App.open(state, state / "dreaming.toml", env={})
    try:
        for n, path in enumerate(sessions):
            # Tonight's conversation appears: the session file and its index entry.
            (folder / path.name).write_bytes(path.read_bytes())
            key = next(k for k, v in index.items() if v["sessionId"] == path.stem)
            shown[key] = index[key]
            (folder / "sessions.json").write_text(json.dumps(shown))
            t0 = time.perf_counter()
            result = runner.run(app, ["light", "rem", "deep"], [AGENT])[0]
            took = time.perf_counter() - t0
            deep = result.deep
            chars, lines = capacity.measure(memory.read_text())
            row = {
                "night": n + 1,
                "seconds": round(took, 3),
                "memory_chars": chars,
                "memory_lines": lines,
                "archive_bytes": shelf.stat().st_size if shelf.exists() else 0,
                "live": deep.entries if deep else None,
                "archived": deep.archived if deep else None,
                "archived_now": len(deep.archived_now) if deep else 0,
                "restored": len(deep.restored) if deep else 0,
            }
            nights.append(row)
            if chars > args.max_chars:
                raise SystemExit(f"night {n + 1}: MEMORY.md is {chars} chars, over the budget")
            if (n + 1) % 30 == 0 or n + 1 == len(sessions):
                log(
                    f"night {n + 1:>3}: MEMORY.md {chars:,} / {args.max_chars:,} chars,"
                    f" {row['live']} live, {row['archived']} archived"
                    f" (archive {row['archive_bytes']:,} B), {took:.2f} s"
                )
        split = _split(app)
    finally:
        app.close()
    times = [r["seconds"] for r in nights]
    return {
        "nights": len(nights),
        "max_chars": args.max_chars,
        "half_life_days": args.half_life,
        "memory_chars_max": max(r["memory_chars"] for r in nights),
        "memory_chars_last": nights[-1]["memory_chars"],
        "memory_lines_last": nights[-1]["memory_lines"],
        "over_budget_nights": sum(r["memory_chars"] > args.max_chars for r in nights),
        "first_archiving_night": next((r["night"] for r in nights if r["archived"]), None),
        "archive_bytes_last": nights[-1]["archive_bytes"],
        "restored_total": sum(r["restored"] for r in nights),
        "archived_total_moves": sum(r["archived_now"] for r in nights),
        "seconds_per_night": {
            "median": round(statistics.median(times), 3),
            "p95": round(sorted(times)[int(0.95 * (len(times) - 1))], 3),
            "max": round(max(times), 3),
            "last_30_median": round(statistics.median(times[-30:]), 3),
        },
        **split,
    }


def _split(app: App) -> dict[str, Any]:
    """What MEMORY.md holds against the archive: entries, standing share, mean age."""
    engine = app.engine(AGENT)
    with engine.connect() as conn:
        worths = {w.key: w for w in capacity.worth(conn, AGENT, 180.0)}
        statuses = lineage.entry_statuses(conn, AGENT)
        said = lineage.stated_at(conn, AGENT, list(worths))
        clock = max(said.values()) if said else None
    out: dict[str, Any] = {}
    for side in ("live", "archived"):
        keys = [k for k, s in statuses.items() if s == side]
        ages = [(clock - said[k]).days for k in keys if clock and k in said]
        out[side] = {
            "entries": len(keys),
            "standing_share": round(sum(worths[k].standing for k in keys) / len(keys), 3)
            if keys
            else None,
            "median_age_days": statistics.median(ages) if ages else None,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter
    )
    parser.add_argument("--nights", type=int, default=365, help="nights to run")
    parser.add_argument("--max-chars", type=int, default=12_000, help="[memory] max_chars")
    parser.add_argument("--half-life", type=float, default=180.0, help="[memory] half_life_days")
    parser.add_argument("--seed", type=int, default=22, help="the transcripts' seed")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 60 nights under 4,000 characters"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--work-dir", type=Path, help="keep the state here (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.quick:
        args.nights, args.max_chars = 60, 4000
    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True)
        summary = run(args, args.work_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="dreaming-bench-capacity-") as tmp:
            summary = run(args, Path(tmp))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(_report(summary))
    return 0 if summary["over_budget_nights"] == 0 else 1


def _report(s: dict[str, Any]) -> str:
    t = s["seconds_per_night"]
    live, shelved = s["live"], s["archived"]

    def share(side: dict[str, Any]) -> str:
        v = side["standing_share"]
        return "-" if v is None else f"{100 * v:.1f}%"

    return "\n".join(
        [
            f"capacity: {s['nights']} nights under a {s['max_chars']:,}-character budget",
            f"  MEMORY.md: at most {s['memory_chars_max']:,} chars (last night"
            f" {s['memory_chars_last']:,} chars, {s['memory_lines_last']} lines);"
            f" {s['over_budget_nights']} nights over the budget",
            f"  archive: {s['archive_bytes_last']:,} bytes; archiving from night"
            f" {s['first_archiving_night']}; {s['archived_total_moves']} moves to it,"
            f" {s['restored_total']} back",
            f"  loaded:   {live['entries']} entries, {share(live)} instructions/constraints,"
            f" median age {live['median_age_days']} days",
            f"  archived: {shelved['entries']} entries, {share(shelved)}"
            f" instructions/constraints, median age {shelved['median_age_days']} days",
            f"  time per night: median {t['median']} s, p95 {t['p95']} s, max {t['max']} s"
            f" (last 30 nights: median {t['last_30_median']} s)",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
