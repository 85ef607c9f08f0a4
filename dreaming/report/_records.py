"""The report's records: what the page shows of one agent, as frozen values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from dreaming.llm import BudgetSettings
from dreaming.memory.lineage import EvidenceLine
from dreaming.runs import RunRecord


@dataclass(frozen=True, slots=True)
class Call:
    """One LLM attempt, as the page shows it."""

    id: int
    run_id: int | None
    model: str
    outcome: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    duration_s: float
    created_at: datetime
    reply: str | None  # the reply (indented when it is JSON), or the server's error body
    error: str | None


@dataclass(frozen=True, slots=True)
class Change:
    """A merge or supersede target: the entry as it was before the decision."""

    key: str
    old_text: str | None  # None: no copy of its text is left (a purge took it)
    left: bool  # it left memory (False: the result kept its key and its text)


@dataclass(frozen=True, slots=True)
class Decision:
    id: int
    run_id: int | None
    action: str  # add | merge | supersede | skip
    path: str  # llm | deterministic
    reason: str | None
    created_at: datetime
    candidate_key: str
    candidate_text: str | None
    entry_key: str | None  # the resulting entry; None for a skip, or once purged
    text: str | None  # the resulting entry's text
    live: bool  # the resulting entry is in memory now
    changes: tuple[Change, ...]
    calls: tuple[Call, ...]  # the model's call(s) behind it; none on the deterministic path


@dataclass(frozen=True, slots=True)
class Retired:
    """An entry that left memory: merged or superseded into another, or deleted by a person."""

    key: str
    text: str | None
    how: str  # merged | superseded | removed by a person
    run_id: int | None
    into: str | None  # the entry that took it in
    into_live: bool
    path: str | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class Tonight:
    """The changes of the last run with a deep phase, or of every run since a date."""

    runs: tuple[RunRecord, ...]  # oldest first
    added: tuple[Decision, ...]
    merged: tuple[Decision, ...]
    superseded: tuple[Decision, ...]
    retired: tuple[Retired, ...]
    skipped: tuple[Decision, ...]
    edited_by_person: tuple[str, ...]  # entry keys a person edited: left alone
    # Entry keys the runs' writes moved to the archive (they did not fit MEMORY.md's
    # budget) or back into MEMORY.md, and why nothing fit (operator text alone over it).
    archived: tuple[str, ...] = ()
    restored: tuple[str, ...] = ()
    over_budget: str | None = None
    # The agent's last run with a deep phase, when it changed nothing (or was undone) and
    # `runs` is the last one before it that did.
    latest: RunRecord | None = None

    @property
    def changed(self) -> bool:
        return bool(self.added or self.merged or self.superseded or self.retired)


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str
    session_key: str | None
    kind: str
    status: str  # admitted | excluded | internal | forgotten
    reason: str | None
    channel: str | None
    chat_type: str | None
    external_source: str | None
    trust: str | None

    @property
    def label(self) -> str:
        return self.session_key or self.session_id


@dataclass(frozen=True, slots=True)
class Origin:
    session_id: str
    session_key: str | None
    origin_class: str
    observed_at: datetime | None
    session: Session | None  # None: the session record is gone


@dataclass(frozen=True, slots=True)
class Entry:
    key: str
    text: str
    origins: tuple[Origin, ...]
    evidence: tuple[EvidenceLine, ...]
    supersedes: tuple[Change, ...]
    decisions: tuple[Decision, ...]
    archived: bool = False  # in the archive the agent searches, not in MEMORY.md


@dataclass(frozen=True, slots=True)
class SessionGroup:
    reason: str
    meaning: str
    sessions: tuple[Session, ...]


@dataclass(frozen=True, slots=True)
class Held:
    """A candidate as a gate example."""

    key: str
    text: str
    score: float
    sessions: int
    said_by: str
    reason: str | None  # a skip decision's reason


@dataclass(frozen=True, slots=True)
class FunnelStep:
    gate: str
    meaning: str
    count: int
    examples: tuple[Held, ...]
    kept_out: bool  # False: the step is not a gate (in memory, or waiting for deep)


@dataclass(frozen=True, slots=True)
class KeptOut:
    admitted: int  # sessions admitted (unclassified ones included)
    sessions: tuple[SessionGroup, ...]
    candidates: int
    funnel: tuple[FunnelStep, ...]


@dataclass(frozen=True, slots=True)
class DaySpend:
    day: date
    usd: float
    tokens: int
    calls: int


@dataclass(frozen=True, slots=True)
class Spend:
    days: tuple[DaySpend, ...]  # every day of the window (UTC), quiet days included
    budget: BudgetSettings
    fleet_daily_max_usd: float | None
    # Today's spend against each daily cap that applies, as `status` shows it: the
    # settings' (run, promote) and each job's (`dreaming.status.spend_on`'s "caps").
    caps: tuple[Mapping[str, Any], ...] = ()
    caps_day: str | None = None
    jobs_error: str | None = None  # why the jobs' caps are missing (a job file that broke)

    @property
    def usd(self) -> float:
        return sum(d.usd for d in self.days)

    @property
    def tokens(self) -> int:
        return sum(d.tokens for d in self.days)

    @property
    def calls(self) -> int:
        return sum(d.calls for d in self.days)


@dataclass(frozen=True, slots=True)
class AgentReport:
    agent: str
    has_state: bool
    clock: str | None  # the agent's own clock: its newest admitted message
    tonight: Tonight
    entries: tuple[Entry, ...]
    kept_out: KeptOut
    spend: Spend
    runs: tuple[RunRecord, ...]  # newest first: the last RUNS_SHOWN, or all since the date
    run_count: int
    outcomes: Mapping[str, int]  # every run's outcome, counted
    # Where its MEMORY.md is (a Claude Code project's `memory/` names the project), None
    # when the path cannot be told (a link refused).
    memory_file: str | None = None


@dataclass(frozen=True, slots=True)
class Report:
    generated_at: datetime
    state_dir: str
    since: date | None
    fleet: bool
    agents: tuple[AgentReport, ...]
