"""Crash points for tests: `DREAMING_CRASH_AT=<name>` kills the process at that point.

The crash-safety tests run a real `dreaming` subprocess with this set and check that the next
run converges to the state of an uninterrupted one. `DREAMING_CRASH_AT=<name>:<n>` crashes on
the n-th time the point is reached. Unset (always, outside tests) it costs one dict lookup.
"""

from __future__ import annotations

import os

ENV = "DREAMING_CRASH_AT"
_hits: dict[str, int] = {}


def checkpoint(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    target, _, nth = spec.partition(":")
    if target != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= int(nth or 1):
        os._exit(137)  # like SIGKILL: no cleanup, no flush, no finally blocks
