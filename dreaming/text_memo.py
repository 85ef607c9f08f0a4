"""Caches of what this process worked out from people's words, which a purge empties.

A night asks about one text many times (its claims, salience, slots, group, entry key, a
MEMORY.md parse), so those answers are cached. But a cache keyed by a text holds that text:
in a scheduler that runs for weeks, a purged sentence would outlive its purge in memory.
Every such cache is made here (`text_cache`), and a purge empties them all (`forget_all`).
`tests/test_text_memo.py` fails on a module-level cache in `dreaming` that is neither made
here nor known to hold no one's words.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_CLEARS: list[Callable[[], None]] = []


def text_cache(maxsize: int) -> Callable[[Callable[..., T]], functools._lru_cache_wrapper[T]]:
    """`functools.lru_cache(maxsize)` that a purge empties."""

    def wrap(fn: Callable[..., T]) -> functools._lru_cache_wrapper[T]:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        _CLEARS.append(cached.cache_clear)
        return cached

    return wrap


def forget_all() -> None:
    """Empty every text cache (after a purge committed: nothing purged stays in memory)."""
    for clear in _CLEARS:
        clear()
