"""How often CPython looks for reference cycles while a night runs."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

YOUNG_THRESHOLD = 20_000


def fewer_young_collections(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run `fn` with CPython's young-generation collection every 20,000 container
    allocations instead of 700 (restored after). A night allocates millions of short-lived
    tuples, dicts and rows and makes almost no reference cycles: with the default, light
    over 160 MB of sessions collected ~400 times, 4% of its time, to free next to nothing.
    The older generations keep their thresholds, so real cycles are still collected."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        before = gc.get_threshold()
        gc.set_threshold(max(before[0], YOUNG_THRESHOLD), *before[1:])
        try:
            return fn(*args, **kwargs)
        finally:
            gc.set_threshold(*before)

    return wrapper
