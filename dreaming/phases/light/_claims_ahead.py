"""Claims extracted in the reading child while light is the slower half.

Over chat-dense sessions (a short line after a short line, nearly all of it speech) light's
work per line outweighs reading it: the reading child (`_ahead`) has its results ready long
before light takes them. While it holds at least `FROM_HELD` of results light has not
taken, it also extracts each row's claims (`claims.extract`, a pure function of the text
and the claim settings, which the forked child shares), and light folds those instead of
extracting them itself (`candidates.Folder.fold_files`'s `known`).

Only where the child is ahead: over coding sessions reading is the slower half, and
extracting there too made the child the bottleneck (light over 161 MB of real sessions
took 2.43-2.51 s instead of 1.93-2.14 s). And only for texts light's own claim cache most
likely does not hold: the child sees the rows in light's order and follows what that
least-recently-used cache of `claims.EXTRACT_CACHE` texts holds (`Recent`: the texts light
extracted itself); a line said again shortly is a cache hit for light, cheaper than the
unpickling of its claims. A guess either way costs time, never a different result: light
extracts whatever it was not sent.

The texts the child keeps for this (`Recent`, its copy of the claim cache) are lines of the
files as they are now, as its results are: a purge in the run (an edited file's lines that
no longer stand) removes what a file no longer says, which the child never read. Light's
`known` lives for one batch, and a purge commits the batch before it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from dreaming.config import Settings
from dreaming.ingest import claims as claims_mod
from dreaming.ingest.claims import Claim

MB = 1024 * 1024
# Results held for light (pickled bytes) from which the child extracts claims as well: a
# batch of light's commits takes a few MB, so this much waiting means light is behind.
FROM_HELD = 1 * MB


class Recent:
    """The texts light's claim cache most likely holds, kept as that least-recently-used
    cache keeps them: a text light extracts goes in, one light finds there becomes the
    most recent, and past `size` the least recent goes. A text whose claims were sent is
    not extracted by light, so it does not go in."""

    def __init__(self, size: int = claims_mod.EXTRACT_CACHE) -> None:
        self._size = size
        self._texts: OrderedDict[str, None] = OrderedDict()

    def holds(self, text: str) -> bool:
        """Whether light's cache holds `text` (a hit: now its most recent)."""
        if text in self._texts:
            self._texts.move_to_end(text)
            return True
        return False

    def add(self, text: str) -> None:
        """Light extracts `text` (a miss: it goes in)."""
        self._texts[text] = None
        if len(self._texts) > self._size:
            self._texts.popitem(last=False)


def claims_of(
    rows: list[dict[str, Any]], settings: Settings, recent: Recent, extract: bool
) -> list[tuple[Claim, ...] | None] | None:
    """Each row's claims where `extract` (the child is ahead) and light's cache most likely
    misses them, else None for the row; None when none were extracted. `recent` follows
    light's cache through every row either way. A line holding our own block markers is
    left to light, which takes quoted blocks out and extracts what is left (a text `recent`
    does not follow)."""
    cs = settings.candidates
    found: list[tuple[Claim, ...] | None] = []
    for row in rows:
        text = row["text"]
        if "<!--" in text or recent.holds(text):
            found.append(None)
        elif extract:
            found.append(claims_mod.extract_cached(text, cs.min_claim_words, cs.max_claim_words))
        else:
            recent.add(text)
            found.append(None)
    return found if extract else None
