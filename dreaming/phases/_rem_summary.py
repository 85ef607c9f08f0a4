"""What a REM run found and did (`RemSummary`), with its themes: the run record's JSON and
back. Apart from the phase, so that reading a run record (`dreaming.results`, the CLI)
does not load REM's machinery."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Theme:
    concept: str  # the stemmed word candidates carry ("alway"): what boosts match on
    label: str  # the word (or two-word phrase) as people wrote it most often: what is shown
    related: tuple[str, ...]  # labels too
    sessions: int
    days: int
    example: str  # a whole sentence a person said that carries it, or ""
    weight: float = 0.0  # the measure themes are ranked by (see `Recurrence.weight`)
    owner_sessions: int = 0  # of `sessions`, those where the owner said it
    example_by: str = ""  # whose sentence `example` is: "owner" or "agent"


@dataclass
class RemSummary:
    agent: str
    day: str | None = None
    candidates_in_window: int = 0
    themes: list[Theme] = field(default_factory=list)
    boosted: int = 0
    diary_written: bool = False
    diary_by: str = "deterministic"
    diary_text: str = ""
    llm_calls: int = 0
    fallback: str | None = None
    degraded: str | None = None  # the model failed, so the deterministic diary stood in
    dry_run: bool = False
    read_sessions: list[str] = field(default_factory=list)  # every session the window read
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "day": self.day,
            "read_sessions": self.read_sessions,
            "candidates_in_window": self.candidates_in_window,
            "themes": [
                {
                    "concept": t.label,
                    "related": list(t.related),
                    "sessions": t.sessions,
                    "days": t.days,
                    "owner_sessions": t.owner_sessions,
                    "weight": t.weight,
                }
                for t in self.themes
            ],
            "boosted": self.boosted,
            "diary_written": self.diary_written,
            "diary_by": self.diary_by,
            "diary_text": self.diary_text,
            "llm_calls": self.llm_calls,
            "fallback": self.fallback,
            "degraded": self.degraded,
            "dry_run": self.dry_run,
            "duration_s": round(self.duration_s, 3),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RemSummary:
        """The summary back from `to_dict`'s JSON (a run record's), to show it as it was
        shown. Raises KeyError or TypeError on another shape (another version's)."""
        themes = [
            Theme(
                t["concept"],
                t["concept"],
                tuple(t["related"]),
                t["sessions"],
                t["days"],
                "",
                weight=t.get("weight", 0.0),
                owner_sessions=t.get("owner_sessions", 0),
            )
            for t in d["themes"]
        ]
        return cls(
            agent=d["agent"],
            day=d.get("day"),
            candidates_in_window=d.get("candidates_in_window", 0),
            themes=themes,
            boosted=d["boosted"],
            diary_written=d["diary_written"],
            diary_by=d["diary_by"],
            fallback=d["fallback"],
            dry_run=d["dry_run"],
            read_sessions=list(d.get("read_sessions", [])),
            duration_s=d.get("duration_s", 0.0),
        )
