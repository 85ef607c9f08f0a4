"""Job definitions (`jobs/*.toml`): what to run, on which agents, when, and within what budget.

A job file:

    name = "nightly"                  # default: the file name without .toml
    description = "..."
    phases = ["light", "rem", "deep"]  # any of them; they always run in this order
    agents = "*"                      # or a list of agent ids
    llm = "default"                   # an [llm.profiles] name; omit: the settings' [deep] llm
    dry_run = false                   # true: deep decides, nothing is written
    enabled = true                    # false: neither runs nor is scheduled
    [trigger]
    cron = "0 3 * * *"                # standard 5-field crontab (0 and 7 are Sunday; a day of
                                      # month and a weekday both given fire when either
                                      # matches), or: interval_minutes = 60
    timezone = "Europe/Berlin"        # IANA name; default: the machine's local zone
    misfire_grace_minutes = 60        # a fire missed by up to this much still runs, once
    [budget]
    max_usd = 0.50                    # per run; also max_tokens, max_calls
    daily_max_usd = 1.00              # per agent and day, shared by every job on that agent
                                      # (and daily_max_tokens); the settings' cap, if
                                      # stricter, still applies

A job without `[trigger]` runs only on demand (`dreaming jobs run NAME`); one with
`enabled = false` neither runs nor is scheduled (how a bundled example is switched off).

Where jobs come from (`JobCatalog`): every file in the jobs folder, over the examples
bundled with the package. A file whose job has a bundled job's name replaces that job;
the other bundled jobs stay available, so adding one file never hides the rest.
"""

from __future__ import annotations

import shutil
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dreaming.config_errors import format_error as _format_error
from dreaming.errors import ConfigError, NoSuchError, StateError
from dreaming.llm import BudgetSettings
from dreaming.phases import PHASES, Phase

from ._triggers import Trigger, build_trigger


class Job(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    phases: tuple[Phase, ...] = PHASES
    agents: Literal["*"] | tuple[str, ...] = "*"
    trigger: Trigger | None = None
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    llm: str | None = None
    dry_run: bool = False
    description: str = ""
    enabled: bool = True

    @field_validator("phases")
    @classmethod
    def _ordered(cls, value: tuple[Phase, ...]) -> tuple[Phase, ...]:
        if not value:
            raise ValueError("a job needs at least one phase")
        if len(set(value)) != len(value):
            raise ValueError("a phase is listed twice")
        # Phases always run in their natural order, whatever order the file lists them in.
        return tuple(p for p in PHASES if p in value)

    def agent_list(self, known: Sequence[str]) -> list[str]:
        return list(known) if self.agents == "*" else [a for a in self.agents]


class JobSource(StrEnum):
    FOLDER = "folder"  # the jobs folder: `jobs_dir` in the settings or <state>/dreaming/jobs
    BUNDLED = "bundled"  # an example shipped with the package


@dataclass(frozen=True)
class JobFile:
    path: Path
    job: Job
    source: JobSource = JobSource.FOLDER
    overrides: Path | None = None  # the bundled file this one replaces, by job name


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
        build_trigger(job.trigger, path)
    if job.llm is not None and job.llm not in profiles:
        raise ConfigError(f"{path}: key 'llm': no profile {job.llm!r} under [llm.profiles]")
    return job


def effective_budget(settings: BudgetSettings, job: BudgetSettings) -> BudgetSettings:
    """A job's per-run limits replace the settings' defaults; the daily caps are per agent
    and shared by every job, so the stricter of the two applies."""
    update: dict[str, Any] = {
        key: getattr(job, key)
        for key in ("max_usd", "max_tokens", "max_calls")
        if getattr(job, key) is not None
    }
    for key in ("daily_max_usd", "daily_max_tokens"):
        caps = [v for v in (getattr(settings, key), getattr(job, key)) if v is not None]
        if caps:
            update[key] = min(caps)
    return settings.model_copy(update=update)


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
    package = Path(__file__).resolve().parent.parent  # dreaming/, above this package
    for candidate in (package.parent / "jobs", package / "_data" / "jobs"):
        if candidate.is_dir():
            return candidate
    return package.parent / "jobs"


def _scan(folder: Path, profiles: Sequence[str]) -> tuple[dict[str, JobFile], list[str]]:
    """The jobs in `folder` by name (the first file wins) and the errors of files that did
    not load: what looking one job up needs, where one bad file must not stop the others."""
    found: dict[str, JobFile] = {}
    broken: list[str] = []
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        try:
            job = load_job(path, profiles)
        except ConfigError as err:
            broken.append(str(err))
            continue
        found.setdefault(job.name, JobFile(path, job))
    return found, broken


@dataclass(frozen=True)
class JobCatalog:
    """The jobs there are: every job file in `folder`, over the examples in `bundled`
    (None: the folder alone). A folder job named like a bundled one replaces it whole (keys
    are not merged, so what the file says is what runs); the other examples stay."""

    folder: Path
    bundled: Path | None = None

    @classmethod
    def over_bundled(cls, folder: Path) -> JobCatalog:
        bundled = bundled_jobs_dir()
        # Pointed at the bundled folder itself (a source checkout's jobs/): one layer.
        return cls(folder, None if folder.resolve() == bundled.resolve() else bundled)

    def _bundled(self, profiles: Sequence[str]) -> dict[str, JobFile]:
        if self.bundled is None:
            return {}
        return {
            jf.job.name: replace(jf, source=JobSource.BUNDLED)
            for jf in load_jobs(self.bundled, profiles)
        }

    def load(self, profiles: Sequence[str] = ()) -> list[JobFile]:
        """Every job, switched off or not, sorted by name. A file that does not load is an
        error: the scheduler keeps its schedule rather than drop a job it cannot read."""
        own = {jf.job.name: jf for jf in load_jobs(self.folder, profiles)}
        jobs = dict(own)
        for name, example in self._bundled(profiles).items():
            mine = own.get(name)
            jobs[name] = example if mine is None else replace(mine, overrides=example.path)
        return [jobs[name] for name in sorted(jobs)]

    def scheduled(self, profiles: Sequence[str] = ()) -> list[JobFile]:
        """The jobs the scheduler keeps: the folder's own once it has any (the bundled
        examples stay runnable by name, but nobody's jobs folder starts firing a job it never
        listed, LLM spend included), else the examples, as on a fresh install."""
        jobs = self.load(profiles)
        own = [jf for jf in jobs if jf.source is JobSource.FOLDER]
        return own if own else jobs

    def find(self, name: str, profiles: Sequence[str] = ()) -> JobFile:
        """The job called `name`, to run now. Folder files that do not load do not stop it,
        unless it would be a bundled example: one of those files may be the replacement,
        and running the example in its place would do what the user said not to."""
        own, broken = _scan(self.folder, profiles)
        examples = self._bundled(profiles)
        found = own.get(name)
        if found is not None and name in examples:
            found = replace(found, overrides=examples[name].path)
        elif found is None and name in examples:
            if broken:
                raise ConfigError(
                    f"job {name!r} would be the bundled example, but files in {self.folder} "
                    "that may replace it did not load: " + "; ".join(broken)
                )
            found = examples[name]
        if found is None:
            known = sorted(set(own) | set(examples))
            hint = f" (known: {', '.join(known)})" if known else f" (no job files in {self.folder})"
            if broken:
                hint += "; files that did not load: " + "; ".join(broken)
            raise NoSuchError(f"unknown job {name!r}{hint}")
        if not found.job.enabled:
            raise ConfigError(f"job {name!r} is switched off: enabled = false in {found.path}")
        return found


def _declared_name(path: Path) -> str | None:
    """The job name a file declares, valid or not (None: not even TOML)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    name = data.get("name", path.stem)
    return name if isinstance(name, str) else None


class CopyOutcome(StrEnum):
    WROTE = "wrote"
    REPLACED = "replaced"  # --force over an existing file
    KEPT = "kept"  # an existing file, or another file already defines the job


@dataclass(frozen=True)
class CopiedJob:
    path: Path
    outcome: CopyOutcome
    reason: str = ""


def copy_bundled_jobs(folder: Path, *, force: bool = False) -> list[CopiedJob]:
    """Copy the bundled examples into `folder` to edit (`dreaming jobs init`). A file that
    exists is kept unless `force`; an example whose job another file already defines is
    always kept out, since two files naming one job is an error."""
    source = bundled_jobs_dir()
    if folder.resolve() == source.resolve():
        raise StateError(f"{folder} is the bundled examples' folder: nothing to copy")
    folder.mkdir(parents=True, exist_ok=True)
    defined: dict[str, Path] = {}
    for path in sorted(folder.glob("*.toml")):
        declared = _declared_name(path)
        if declared is not None:
            defined.setdefault(declared, path)
    out: list[CopiedJob] = []
    for example in load_jobs(source):
        target = folder / example.path.name
        other = defined.get(example.job.name)
        if other is not None and other != target:
            out.append(CopiedJob(target, CopyOutcome.KEPT, f"job defined by {other}"))
        elif target.exists() and not force:
            out.append(CopiedJob(target, CopyOutcome.KEPT, "exists (--force replaces it)"))
        else:
            existed = target.exists()
            shutil.copyfile(example.path, target)
            out.append(CopiedJob(target, CopyOutcome.REPLACED if existed else CopyOutcome.WROTE))
    return out
