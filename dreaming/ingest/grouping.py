"""MEMORY.md's managed groups, as data: the `[[groups]]` tables of `lexicon.toml`.

Each group names the cue lists (keys of `lexicon.toml`, extendable in settings'
`[salience]`) that send an entry under its heading. The tables' order is the order the
headings render in; `rank` is the order they are tried in (an instruction that names a
preference is an instruction). The one group without cues or checks takes the rest.

Adding a group is one `[[groups]]` table here and the cue list it names; the classifier
(`salience.group_of`) and the render order (`dreaming.syntax.GROUPS`) follow. This module
reads data and builds cue matchers; it needs nothing of salience.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from dreaming.ingest.cues import Cues

# The checks a group may add or exclude by name: they need more than a cue list
# (`salience.group_of` implements them).
CHECKS = frozenset({"directive", "about_family", "only_an_alternative"})


@dataclass(frozen=True, slots=True)
class Group:
    """One managed group: its name, heading title, classification rank and what sends an
    entry there (`cues`: cue-list keys; `checks`: named checks; `unless`: checks that veto)."""

    name: str
    title: str
    rank: int
    cues: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()

    @property
    def fallback(self) -> bool:
        return not self.cues and not self.checks


def _strings(table: Mapping[str, Any], key: str) -> tuple[str, ...]:
    return tuple(str(v) for v in table.get(key, ()))


def parse(tables: Sequence[Mapping[str, Any]]) -> tuple[Group, ...]:
    """The groups of `[[groups]]` tables, in render order; an error names what is wrong."""
    groups = tuple(
        Group(
            name=str(t["name"]),
            title=str(t.get("title", str(t["name"]).capitalize())),
            rank=int(t.get("rank", len(tables))),
            cues=_strings(t, "cues"),
            checks=_strings(t, "checks"),
            unless=_strings(t, "unless"),
        )
        for t in tables
    )
    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        raise ValueError(f"groups: a name is declared twice in {names}")
    if sum(g.fallback for g in groups) != 1:
        raise ValueError("groups: exactly one group must have no cues (it takes the rest)")
    unknown = {c for g in groups for c in (*g.checks, *g.unless)} - CHECKS
    if unknown:
        raise ValueError(f"groups: unknown checks {sorted(unknown)}; known: {sorted(CHECKS)}")
    return groups


def by_rank(groups: Sequence[Group]) -> tuple[Group, ...]:
    """The order entries are tried in: by rank, the fallback last."""
    return tuple(sorted(groups, key=lambda g: (g.fallback, g.rank)))


def with_cues(
    lists: Mapping[str, Sequence[str]], groups: Sequence[Group]
) -> tuple[tuple[Group, Cues], ...]:
    """Each group, in the order tried, with the cue lists it names (and their `_cjk`) as one."""
    out = []
    for g in by_rank(groups):
        words = [w for key in g.cues for w in lists.get(key, ())]
        cjk = [w for key in g.cues for w in lists.get(f"{key}_cjk", ())]
        out.append((g, Cues(words, cjk)))
    return tuple(out)


@functools.cache
def lexicon_data() -> Mapping[str, Any]:
    """`lexicon.toml`, parsed once a process (6 ms): its `[[groups]]` are read here, its cue
    lists by `salience`. Read only."""
    return tomllib.loads(
        resources.files("dreaming.ingest").joinpath("lexicon.toml").read_text("utf-8")
    )


@functools.cache
def default_groups() -> tuple[Group, ...]:
    return parse(lexicon_data().get("groups", ()))


# Managed groups in render order, and the titles of their headings.
GROUPS: tuple[str, ...] = tuple(g.name for g in default_groups())
GROUP_TITLES: dict[str, str] = {g.name: g.title for g in default_groups()}
