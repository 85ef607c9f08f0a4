"""Our own diary lines quoted back in a transcript, recognised (`claims.EchoIndex`)."""

from __future__ import annotations

import re
from collections import defaultdict

_WORD = re.compile(r"\w+")


class EchoIndex:
    """Recognises our own text (diary lines) quoted back in a transcript.

    Each known line of at least `min_words` words is keyed by its first `min_words` words; a
    corpus line is checked by sliding that window over its words (linear in its length) and
    confirming a hit by containment, so thousands of diary lines cost no more than a few."""

    def __init__(self, min_words: int = 8) -> None:
        self.min_words = min_words
        self._lines: dict[tuple[str, ...], list[str]] = defaultdict(list)

    @staticmethod
    def _words(text: str) -> list[str]:
        return [w.casefold() for w in _WORD.findall(text)]

    def add(self, line: str) -> None:
        words = self._words(line)
        if len(words) >= self.min_words:
            self._lines[tuple(words[: self.min_words])].append(" ".join(words))

    def contains_echo(self, text: str) -> bool:
        if not self._lines:
            return False
        words = self._words(text)
        n = self.min_words
        joined: str | None = None
        for i in range(len(words) - n + 1):
            known = self._lines.get(tuple(words[i : i + n]))
            if known:
                joined = joined if joined is not None else " ".join(words)
                if any(k in joined for k in known):
                    return True
        return False

    def __len__(self) -> int:
        return sum(len(v) for v in self._lines.values())
