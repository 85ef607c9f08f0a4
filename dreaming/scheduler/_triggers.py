"""Job triggers: a job file's `[trigger]` table (the `Trigger` model) and its APScheduler 3
trigger, built from a crontab expression or an interval.

Cron expressions follow standard crontab: weekday 0 and 7 are Sunday, and when both the
day of month and the weekday are restricted a day matching either fires. APScheduler 3
counts weekdays from Monday and requires both, so expressions are translated here.
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from tzlocal import get_localzone

from dreaming.errors import ConfigError


class Trigger(BaseModel):
    """A job's `[trigger]`: a crontab expression or an interval, in a zone, with the grace
    a late fire still runs in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: str | None = None
    # At least a minute: a job that fires many times a second is a typo, not a schedule.
    interval_minutes: float | None = Field(default=None, ge=1, le=366 * 24 * 60)
    timezone: str | None = None
    misfire_grace_minutes: float = Field(default=60.0, ge=0, le=366 * 24 * 60)

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


_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _weekday(token: str) -> int:
    low = token.strip().lower()
    if low in _DAYS:
        return _DAYS.index(low)
    if low.isdigit() and int(low) <= 7:
        return int(low)
    raise ValueError(f"weekday {token!r} is not 0-7 or sun-sat")


def crontab_weekdays(spec: str) -> str:
    """A crontab weekday field (0/7 = Sunday) as APScheduler day names ("mon,wed")."""
    if spec == "*":
        return "*"
    days: set[int] = set()
    for part in spec.split(","):
        base, slash, step_text = part.partition("/")
        if slash and not (step_text.isdigit() and int(step_text) > 0):
            raise ValueError(f"weekday step {step_text!r} is not a positive number")
        step = int(step_text) if slash else 1
        if base == "*":
            low, high = 0, 6
        elif "-" in base:
            first, last = base.split("-", 1)
            low, high = _weekday(first), _weekday(last)
            if low > high:
                raise ValueError(f"weekday range {base!r} runs backwards")
        else:
            low = _weekday(base)
            high = 6 if slash else low
        days.update(d % 7 for d in range(low, high + 1, step))
    return ",".join(_DAYS[d] for d in sorted(days))


_INTERVAL_ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)


def trigger_zone(trigger: Trigger) -> tzinfo:
    return ZoneInfo(trigger.timezone) if trigger.timezone else get_localzone()


def build_trigger(trigger: Trigger, origin: Path | str = "job") -> Any:
    """The APScheduler trigger for a job's `[trigger]`; a bad expression is a ConfigError
    naming `origin` and the key."""
    zone = trigger_zone(trigger)
    if trigger.interval_minutes is not None:
        # On a fixed grid (from 2000-01-01 UTC), not from whenever this scheduler started:
        # two schedulers kept for availability then fire at the same instants, which is
        # what lets the fleet queue recognise the second fire as the same one.
        return IntervalTrigger(
            minutes=trigger.interval_minutes, timezone=zone, start_date=_INTERVAL_ORIGIN
        )
    assert trigger.cron is not None
    minute, hour, dom, month, dow = trigger.cron.split()
    try:
        days = crontab_weekdays(dow)
        if not dom.startswith("*") and not dow.startswith("*"):
            # crontab: a restricted day of month and weekday fire on a day matching either
            return OrTrigger(
                [
                    CronTrigger.from_crontab(f"{minute} {hour} {dom} {month} *", zone),
                    CronTrigger.from_crontab(f"{minute} {hour} * {month} {days}", zone),
                ]
            )
        return CronTrigger.from_crontab(f"{minute} {hour} {dom} {month} {days}", timezone=zone)
    except ValueError as err:
        raise ConfigError(f"{origin}: key 'trigger.cron': {trigger.cron!r}: {err}") from None


def describe_trigger(trigger: Trigger | None) -> str:
    if trigger is None:
        return "on demand"
    zone = trigger.timezone or f"local {get_localzone()}"
    if trigger.interval_minutes is not None:
        return f"every {trigger.interval_minutes:g} min ({zone})"
    return f"cron {trigger.cron} ({zone})"


def next_fire_time(
    trigger: Trigger | None, now: datetime | None = None, origin: Path | str = "job"
) -> datetime | None:
    """When a freshly scheduled trigger would fire next (None: on demand)."""
    if trigger is None:
        return None
    built = build_trigger(trigger, origin)
    zone = trigger_zone(trigger)
    moment = (now or datetime.now(UTC)).astimezone(zone)
    fire: datetime | None = built.get_next_fire_time(None, moment)
    return fire


def grace_seconds(trigger: Trigger) -> int:
    # APScheduler wants a positive whole number of seconds; 0 minutes means "never late".
    return max(1, round(trigger.misfire_grace_minutes * 60))


def fingerprint(trigger: Any) -> str:
    """What a trigger fires on; a fresh IntervalTrigger's start date is not part of it."""
    if isinstance(trigger, OrTrigger):
        return "or[" + ";".join(fingerprint(t) for t in trigger.triggers) + "]"
    if isinstance(trigger, IntervalTrigger):
        return f"interval[{trigger.interval.total_seconds()}]@{trigger.timezone}"
    return f"{trigger}@{getattr(trigger, 'timezone', '')}"
