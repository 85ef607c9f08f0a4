"""The table of transcript formats: one `TranscriptFormat` value per format module.

Each format module (`_openclaw`, `_claude_code`, `_event_log`, ...) builds its one `FORMAT`
and the package's `__init__` registers it with one line; the reader's parser, the sniffer's
line classifier, source discovery and the doctor's hints all look the format up here, so
adding a format is one new module and one registration line (plus its `messages.Format`
name, which `config.SourceKind` is).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreaming.errors import ConfigError
from dreaming.messages import Format, Message, SessionFile

from ._common import ParseContext

Parser = Callable[[Iterable[tuple[int, dict[str, Any]]], ParseContext], Iterator[Message]]


@dataclass(frozen=True)
class SourceRoot:
    """Where one format's discovery looks, and for whom."""

    path: Path
    agent: str | None = None  # the source's agent; None for roots that name their agents
    agents: Collection[str] | None = None  # only these agents' files, when set
    per_project: bool = False  # claude-code: each project folder is its own agent
    # openclaw: only transcripts with one of these ids or keys (what a purge names); other
    # formats list every file (they open none to do it)
    sessions: Collection[str] | None = None


@dataclass(frozen=True)
class TranscriptFormat:
    """One transcript format: its name and the four things the stages need from it.

    `claims(line_type, obj)` says whether one object line names this format by itself; the
    formats' claims are disjoint (a test checks the known line types), so the order of
    registration never decides a file's format.
    """

    name: Format
    claims: Callable[[str, dict[str, Any]], bool]
    discover: Callable[[SourceRoot], list[SessionFile]]
    parse: Parser
    layout: str  # what a source of this kind reads, for the doctor's hint
    needs_agent: bool = True  # False: the root's own folders name its agents
    # The agents a root holds transcripts of, opening none of them (a fleet's parent hands
    # out agents by this); None: those `discover` finds, which opens no transcript.
    agents: Callable[[SourceRoot], list[str]] | None = None

    def agents_of(self, root: SourceRoot) -> set[str]:
        if self.agents is not None:
            return set(self.agents(root))
        return {sf.agent for sf in self.discover(root)}


FORMATS: dict[Format, TranscriptFormat] = {}


def register(fmt: TranscriptFormat) -> TranscriptFormat:
    """Add one format to the table; a name registered twice is a programming error."""
    if fmt.name in FORMATS:
        raise ValueError(f"transcript format {fmt.name.value!r} is registered twice")
    FORMATS[fmt.name] = fmt
    return fmt


def format_named(kind: str) -> TranscriptFormat:
    """The registered format called `kind`; an unknown one is a ConfigError, never a
    silent stand-in."""
    for name, fmt in FORMATS.items():
        if name == kind:
            return fmt
    known = ", ".join(sorted(f.value for f in FORMATS))
    raise ConfigError(f"sources: no transcript format {kind!r} (known: {known})")
