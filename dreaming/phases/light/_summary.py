"""What a light run reports: the sessions it saw and read, the lines it kept and dropped, and
the candidates and recalls its folds produced."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dreaming.ingest.candidates import FoldStats
from dreaming.messages import SessionFile

MAX_SKIPPED_FILES = 100


@dataclass
class LightSummary:
    agent: str
    sessions_seen: int = 0
    sessions_read: int = 0
    sessions_unchanged: int = 0
    files_rewritten: int = 0
    lines_rederived: int = 0  # lines of edited transcripts whose text changed or vanished
    not_admitted: Counter[str] = field(default_factory=Counter)
    unclassified: list[str] = field(default_factory=list)  # admitted as untrusted evidence
    # Sessions whose admission changed since their last night: what was derived is redone.
    reclassified: list[dict[str, Any]] = field(default_factory=list)
    messages: int = 0
    corpus_lines: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    skips: Counter[str] = field(default_factory=Counter)
    candidates_new: int = 0
    candidates_updated: int = 0
    candidates_pending: int = 0
    recalls: int = 0
    # The agent's claims that repeated no candidate: not kept (it corroborates, it does not
    # create, unless [deep] promote_agent_only is on).
    agent_unmatched: int = 0
    bytes_read: int = 0
    corpus_files_written: int = 0
    clock: str | None = None
    duration_s: float = 0.0

    # Which files the skips came from (capped): a count alone does not say what to fix.
    skipped_files: list[dict[str, Any]] = field(default_factory=list)

    def note_skips(self, sf: SessionFile, found: Counter[str]) -> None:
        if found and len(self.skipped_files) < MAX_SKIPPED_FILES:
            self.skipped_files.append(
                {"session_id": sf.session_id, "file": str(sf.path), "reasons": dict(found)}
            )

    def absorb_read(self, sf: SessionFile, part: LightSummary) -> None:
        """Count what reading `sf` into `part` (a summary of that read alone, made in another
        process) counted, as if it had been read into this one."""
        self.messages += part.messages
        self.dropped.update(part.dropped)
        self.skips.update(part.skips)
        self.note_skips(sf, part.skips)

    def add_fold(self, stats: FoldStats) -> None:
        if stats.echoes:  # a reason is listed only once a line was dropped for it
            self.dropped["echo"] += stats.echoes
        self.candidates_new += stats.candidates_new
        self.recalls += stats.recalls
        self.agent_unmatched += stats.agent_unmatched

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "sessions": {
                "seen": self.sessions_seen,
                "read": self.sessions_read,
                "unchanged": self.sessions_unchanged,
                "rewritten": self.files_rewritten,
                "lines_rederived": self.lines_rederived,
                "not_admitted": dict(sorted(self.not_admitted.items())),
                "unclassified": self.unclassified[:50],
                "unclassified_count": len(self.unclassified),
                "reclassified": self.reclassified[:50],
            },
            "messages": self.messages,
            "corpus_lines": self.corpus_lines,
            "dropped": dict(sorted(self.dropped.items())),
            "skips": dict(sorted(self.skips.items())),
            "skipped_files": self.skipped_files,
            "candidates": {
                "new": self.candidates_new,
                "updated": self.candidates_updated,
                "pending": self.candidates_pending,
                "agent_unmatched": self.agent_unmatched,
            },
            "recalls": self.recalls,
            "bytes_read": self.bytes_read,
            "corpus_files_written": self.corpus_files_written,
            "clock": self.clock,
            "duration_s": round(self.duration_s, 3),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LightSummary:
        """The summary back from `to_dict`'s JSON (a run record's), to show it as it was
        shown. Raises KeyError or TypeError on another shape (another version's)."""
        s, c = d["sessions"], d["candidates"]
        unclassified = list(s.get("unclassified", []))
        unclassified += [""] * (s.get("unclassified_count", 0) - len(unclassified))  # count kept
        return cls(
            agent=d["agent"],
            sessions_seen=s["seen"],
            sessions_read=s["read"],
            sessions_unchanged=s["unchanged"],
            files_rewritten=s["rewritten"],
            lines_rederived=s.get("lines_rederived", 0),
            not_admitted=Counter(s["not_admitted"]),
            unclassified=unclassified,
            reclassified=list(s.get("reclassified", [])),
            messages=d["messages"],
            corpus_lines=d["corpus_lines"],
            dropped=Counter(d["dropped"]),
            skips=Counter(d["skips"]),
            candidates_new=c["new"],
            candidates_updated=c["updated"],
            candidates_pending=c["pending"],
            agent_unmatched=c.get("agent_unmatched", 0),
            recalls=d["recalls"],
        )
