"""What a check finds: a level, a message and the fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

SHOWN_AGENTS = 8  # agents named in one line; the rest are counted


class Level(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    check: str  # state, settings, openclaw, tags, sources, coexist, caps, endpoint, verify
    level: Level
    message: str
    fix: str | None = None
    agent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "level": self.level.value,
            "agent": self.agent,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass
class Diagnosis:
    state_dir: Path
    findings: list[Finding] = field(default_factory=list)

    def add(
        self,
        check: str,
        level: Level,
        message: str,
        fix: str | None = None,
        agent: str | None = None,
    ) -> None:
        self.findings.append(Finding(check, level, message, fix, agent))

    @property
    def ok(self) -> bool:
        """Nothing failed (warnings alone are fine)."""
        return all(f.level is not Level.FAIL for f in self.findings)

    def counts(self) -> dict[str, int]:
        return {lvl.value: sum(f.level is lvl for f in self.findings) for lvl in Level}

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "state_dir": str(self.state_dir),
            "counts": self.counts(),
            "checks": [f.to_dict() for f in self.findings],
        }


def names(agents: list[str], noun: str) -> str:
    shown = ", ".join(agents[:SHOWN_AGENTS])
    more = f" and {len(agents) - SHOWN_AGENTS} more" if len(agents) > SHOWN_AGENTS else ""
    return f"{len(agents)} {noun}{'' if len(agents) == 1 else 's'} ({shown}{more})"
