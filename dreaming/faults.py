"""Crash and pause points for tests.

`DREAMING_CRASH_AT=<name>` kills the process at that point. The crash-safety tests run a real
`dreaming` subprocess with this set and check that the next run converges to the state of an
uninterrupted one. `DREAMING_CRASH_AT=<name>:<n>` crashes on the n-th time the point is
reached.

`DREAMING_PAUSE_AT=<name>[:<n>]` stops there instead: the process writes its pid to the file
`DREAMING_PAUSE_FILE` names and waits (up to `PAUSE_S` seconds) for a signal, so a test can
deliver SIGINT or SIGTERM at exactly that point. Unset (always, outside tests) each costs
one dict lookup.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "DREAMING_CRASH_AT"
PAUSE_ENV = "DREAMING_PAUSE_AT"
PAUSE_FILE_ENV = "DREAMING_PAUSE_FILE"
PAUSE_S = 60.0  # a test that never signals does not hang the process for good
_hits: dict[str, int] = {}
_paused: dict[str, int] = {}


def checkpoint(name: str) -> None:
    spec = os.environ.get(ENV)
    if spec:
        target, _, nth = spec.partition(":")
        if target == name:
            _hits[name] = _hits.get(name, 0) + 1
            if _hits[name] >= int(nth or 1):
                os._exit(137)  # like SIGKILL: no cleanup, no flush, no finally blocks
    pause = os.environ.get(PAUSE_ENV)
    if pause:
        target, _, nth = pause.partition(":")
        if target == name:
            _paused[name] = _paused.get(name, 0) + 1
            if _paused[name] == int(nth or 1):
                _pause()


def _pause() -> None:
    """Say where we are, then wait for the signal a test sends (its handler raises here)."""
    Path(os.environ[PAUSE_FILE_ENV]).write_text(str(os.getpid()), encoding="utf-8")
    deadline = time.monotonic() + PAUSE_S
    while time.monotonic() < deadline:
        time.sleep(0.01)
