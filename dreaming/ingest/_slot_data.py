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


# Capitalised words a statement may start with that name nobody (`slots.holders`).
COMMON_CAPITALS = frozenset(
    """I The A An My Our We It This That There These Those They He She You Your His Her
    Their Its Yes No Oh So Well Also Just Now Then Actually Always Never From Use Please
    Send Ask Forward Share Sign Keep Put Hotel Changed Scratch Correction Going When If
    Don't Do Not Instead Today Tomorrow Yesterday Since After Before Call Reply Write""".split()  # noqa: SIM905
)

# Verbs a rule starts with: the name after one is its object, not whose statement it is
# ("Use Jest for the unit tests", "Ask Anna before booking").
IMPERATIVES = frozenset(
    """Use Ask Send Forward Share Call Email Text Message Tell Invite Remind Book Pay Try
    Prefer Avoid Run Install Add Copy Cc Bcc Ping Contact Thank Let Pick Choose""".split()  # noqa: SIM905
)
