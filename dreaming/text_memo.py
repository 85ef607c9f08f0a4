"""Caches of what this process worked out from people's words, which a purge empties.

A night asks about one text many times (its claims, salience, slots, group, entry key, a
MEMORY.md parse), so those answers are cached. But a cache keyed by a text holds that text:
in a scheduler that runs for weeks, a purged sentence would outlive its purge in memory.
Every such cache is made here (`text_cache`, at module level), and `forget_all` empties
them all: after a purge in this process, and when a night finds a purge another process
made (`forget.complete_pending`). `tests/test_text_memo.py` fails on a module-level cache in
`dreaming` that is neither made here nor known to hold no one's words.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

CACHES: list[functools._lru_cache_wrapper[Any]] = []


def text_cache(maxsize: int) -> Callable[[Callable[..., T]], functools._lru_cache_wrapper[T]]:
    """`functools.lru_cache(maxsize)` that a purge empties. For module-level functions:
    each use adds a cache to the list for good."""

    def wrap(fn: Callable[..., T]) -> functools._lru_cache_wrapper[T]:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        CACHES.append(cached)
        return cached

    return wrap


def forget_all() -> None:
    """Empty every text cache: nothing of a purged text stays in this process's memory."""
    for cache in CACHES:
        cache.cache_clear()
