"""The slot relations and lists as data (`slots.toml`, extended in settings under
`[slots]`), and how a list of them compiles to one whole-word pattern (`slots.Slots.build`)."""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources


def merged(
    base: Mapping[str, tuple[str, ...]], extra: Mapping[str, Sequence[str]] | None
) -> dict[str, tuple[str, ...]]:
    out = dict(base)
    for key, values in (extra or {}).items():
        out[key] = (*out.get(key, ()), *values)
    return out


def words_regex(patterns: Sequence[str]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    joined = "|".join(f"(?:{p})" for p in patterns)
    # Whole words: no word character before (a cue may itself start with "'" or ", ") and
    # none after, unless the cue ends in punctuation or space.
    return re.compile(
        rf"(?:(?<![\w'])|(?=[',]))(?:{joined})(?:(?<=[^\w'])|(?![\w']))", re.IGNORECASE
    )


@functools.cache
def defaults() -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    raw = tomllib.loads(
        resources.files("dreaming.ingest").joinpath("slots.toml").read_text("utf-8")
    )

    def table(name: str) -> dict[str, tuple[str, ...]]:
        return {k: tuple(str(v) for v in vs) for k, vs in raw.get(name, {}).items()}

    return table("relations"), table("lists")
