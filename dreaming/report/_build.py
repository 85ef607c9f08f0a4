"""Gathering the report: one AgentReport per agent, from its state. Read only."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, and_, select

from dreaming.config import DeepSettings
from dreaming.errors import WorkspaceFileError
from dreaming.llm import BudgetSettings
from dreaming.memory import lineage
from dreaming.report import _changes, _kept_out
from dreaming.report._records import AgentReport, DaySpend, KeptOut, Report, Spend, Tonight
from dreaming.runs import list_runs
from dreaming.scheduler import Job
from dreaming.status import daily_caps, every_job, spend_on
from dreaming.store import state
from dreaming.store.state import StateKey
from dreaming.store.tables import SPEND

if TYPE_CHECKING:
    from dreaming.app import App

SPEND_DAYS = 14  # the spend chart's window without --since
RUNS_SHOWN = 20  # runs listed without --since


def build_report(app: App, agents: Sequence[str] = (), since: date | None = None) -> Report:
    """The report of `agents` (default: every agent with state). A named agent that is known
    (it has transcripts) but has never been run gets an empty section; an unknown name is
    the StateError other commands give."""
    now = datetime.now(UTC)
    names = app.agents(agents) if agents else app.agents_with_state()
    jobs, jobs_error = every_job(app.paths, list(app.settings.llm.profiles))
    sections = []
    for agent in names:
        if not app.has_state(agent):
            section = _no_state(agent, app, since, now.date())
        else:
            section = agent_report(
                app.engine(agent, create=False),
                agent,
                deep=app.settings.deep,
                budget=app.settings.budget,
                fleet_daily_max_usd=app.settings.fleet.daily_max_usd if app.fleet else None,
                since=since,
                today=now.date(),
                jobs=jobs,
                jobs_error=jobs_error,
            )
        try:
            where: str | None = str(app.paths.memory_file(agent))
        except WorkspaceFileError:
            where = None
        sections.append(dataclasses.replace(section, memory_file=where))
    return Report(now, str(app.paths.state_dir), since, app.fleet, tuple(sections))


def agent_report(
    engine: Engine,
    agent: str,
    *,
    deep: DeepSettings,
    budget: BudgetSettings,
    since: date | None = None,
    today: date | None = None,
    fleet_daily_max_usd: float | None = None,
    jobs: Sequence[Job] = (),
    jobs_error: str | None = None,
) -> AgentReport:
    """One agent's section: `since` a day (UTC) for every run since then, else tonight's
    (the last run with a deep phase that changed memory). Spend is shown against every
    daily cap that applies, the settings' and each of `jobs`' on the agent, as `status`
    shows them."""
    today = today or datetime.now(UTC).date()
    runs = list_runs(engine, agent)  # newest first
    with engine.connect() as conn:
        every = lineage.decisions(conn, agent)
        view = _changes.DecisionView.load(engine, conn, agent, runs, every)
        sessions = _kept_out.sessions(conn, agent)
        shown, latest = _changes.tonight_runs(runs, since, every)
        tonight = _changes.tonight(shown, every, view, latest)
        entries = _changes.entries(conn, agent, every, sessions, view)
        kept_out = _kept_out.kept_out(conn, agent, deep, sessions, every)
        spend = _spend(conn, agent, since or today - timedelta(days=SPEND_DAYS - 1), today)
        clock = state.get(conn, agent, StateKey.CLOCK)
        caps = spend_on(conn, agent, today.isoformat(), daily_caps(agent, budget, jobs))
    shown = _changes.since(runs, since) if since is not None else runs[:RUNS_SHOWN]
    return AgentReport(
        agent=agent,
        has_state=True,
        clock=clock,
        tonight=tonight,
        entries=entries,
        kept_out=kept_out,
        spend=Spend(
            spend,
            budget,
            fleet_daily_max_usd,
            caps=tuple(caps["caps"]),
            caps_day=caps["day"],
            jobs_error=jobs_error,
        ),
        runs=tuple(shown),
        run_count=len(runs),
        outcomes=dict(Counter(r.outcome for r in runs).most_common()),
    )


def _no_state(agent: str, app: App, since: date | None, today: date) -> AgentReport:
    start = since or today - timedelta(days=SPEND_DAYS - 1)
    return AgentReport(
        agent=agent,
        has_state=False,
        clock=None,
        tonight=Tonight((), (), (), (), (), (), ()),
        entries=(),
        kept_out=KeptOut(0, (), 0, ()),
        spend=Spend(_window(start, today, {}), app.settings.budget, None),
        runs=(),
        run_count=0,
        outcomes={},
    )


def _window(start: date, end: date, rows: Mapping[str, DaySpend]) -> tuple[DaySpend, ...]:
    days = []
    day = start
    while day <= end:
        days.append(rows.get(day.isoformat(), DaySpend(day, 0.0, 0, 0)))
        day += timedelta(days=1)
    return tuple(days)


def _spend(conn: Connection, agent: str, start: date, end: date) -> tuple[DaySpend, ...]:
    """What the agent's LLM calls cost per UTC day (the `spend` table the daily caps read),
    every day from `start` to `end`."""
    rows = {
        day: DaySpend(date.fromisoformat(day), float(usd), int(tokens), int(calls))
        for day, usd, tokens, calls in conn.execute(
            select(SPEND.c.day, SPEND.c.usd, SPEND.c.tokens, SPEND.c.calls).where(
                and_(
                    SPEND.c.agent == agent,
                    SPEND.c.day >= start.isoformat(),
                    SPEND.c.day <= end.isoformat(),
                )
            )
        )
    }
    return _window(start, end, rows)
