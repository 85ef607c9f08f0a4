"""Job definitions (`jobs/*.toml`): what to run, on which agents, when, and within what budget.

A job file:

    name = "nightly"
    phases = ["light", "rem", "deep"]
    agents = "*"                      # or a list of agent ids
    llm = "default"                   # an [llm.profiles] name; omit for the deterministic path
    dry_run = false
    [trigger]
    cron = "0 3 * * *"                # standard 5-field crontab (0 and 7 are Sunday; a day of
                                      # month and a weekday both given fire when either
                                      # matches), or: interval_minutes = 60
    timezone = "Europe/Berlin"        # IANA name; default: the machine's local zone
    [budget]
    max_usd = 0.50                    # per run; also max_tokens, max_calls
    daily_max_usd = 1.00              # per agent and day, shared by every job on that agent

A job without `[trigger]` runs only on demand (`dreaming jobs run NAME`).
"""

from __future__ import annotations

import tomllib
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dreaming.config import BudgetSettings, _format_error
from dreaming.errors import ConfigError

Phase = Literal["light", "rem", "deep"]
PHASE_ORDER: tuple[Phase, ...] = ("light", "rem", "deep")


class Trigger(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: str | None = None
    interval_minutes: float | None = Field(default=None, gt=0)
    timezone: str | None = None
    misfire_grace_minutes: float = Field(default=60.0, ge=0)

    @model_validator(mode="after")
    def _one_kind(self) -> Trigger:
        if (self.cron is None) == (self.interval_minutes is None):
            raise ValueError("give exactly one of `cron` or `interval_minutes`")
        if self.cron is not None and len(self.cron.split()) != 5:
            raise ValueError(
                f"cron {self.cron!r} must have 5 fields: minute hour day month weekday"
            )
        return self

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                zoneinfo.ZoneInfo(value)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"unknown timezone {value!r}") from None
        return value


class Job(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    phases: tuple[Phase, ...] = PHASE_ORDER
    agents: Literal["*"] | tuple[str, ...] = "*"
    trigger: Trigger | None = None
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    llm: str | None = None
    dry_run: bool = False
    description: str = ""

    @field_validator("phases")
    @classmethod
    def _ordered(cls, value: tuple[Phase, ...]) -> tuple[Phase, ...]:
        if not value:
            raise ValueError("a job needs at least one phase")
        if len(set(value)) != len(value):
            raise ValueError("a phase is listed twice")
        # Phases always run in their natural order, whatever order the file lists them in.
        return tuple(p for p in PHASE_ORDER if p in value)

    def agent_list(self, known: Sequence[str]) -> list[str]:
        return list(known) if self.agents == "*" else [a for a in self.agents]


@dataclass(frozen=True)
class JobFile:
    path: Path
    job: Job


def load_job(path: Path, profiles: Sequence[str] = ()) -> Job:
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"{path}: cannot read job file: {err.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    data.setdefault("name", path.stem)
    try:
        job = Job.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(path, err, Job)) from None
    if job.trigger is not None:
        # Values the field check cannot see ("61 * * * *") fail here, at load, not at fire.
        from dreaming._scheduler._triggers import build_trigger

        build_trigger(job.trigger, path)
    if job.llm is not None and job.llm not in profiles:
        raise ConfigError(f"{path}: key 'llm': no profile {job.llm!r} under [llm.profiles]")
    return job


def load_jobs(folder: Path, profiles: Sequence[str] = ()) -> list[JobFile]:
    """Every `*.toml` in `folder`, sorted by name; two files naming one job is an error."""
    if not folder.is_dir():
        return []
    out: list[JobFile] = []
    seen: dict[str, Path] = {}
    for path in sorted(folder.glob("*.toml")):
        job = load_job(path, profiles)
        if job.name in seen:
            raise ConfigError(f"{path}: job name {job.name!r} is also used by {seen[job.name]}")
        seen[job.name] = path
        out.append(JobFile(path, job))
    return out


def bundled_jobs_dir() -> Path:
    """The example jobs: `jobs/` in a source tree, or the copy packaged in the wheel."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "jobs", here / "_data" / "jobs"):
        if candidate.is_dir():
            return candidate
    return here.parent / "jobs"
