"""Helpers every benchmark script shares (imported as `_common` from bench/): the repository
root on sys.path, progress lines on stderr, ISO timestamps and compact JSON for synthetic
transcripts, byte sizes for people, the code-name vocabulary of the deep and forget benches,
and the --help formatter."""

from __future__ import annotations

import argparse
import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Synthetic sessions start on this day (then spread over a few weeks by each generator).
START = datetime(2026, 1, 5, tzinfo=UTC).timestamp()

# One transcript line: no spaces, non-ASCII kept, as OpenClaw writes them.
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def repo_on_path() -> Path:
    """Put the repository root on sys.path (for `dreaming` and `tests.*` when a script runs
    from a checkout without an installed package); returns it."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return REPO


def log(msg: str) -> None:
    """A progress line on stderr (stdout is for the report)."""
    print(msg, file=sys.stderr, flush=True)


def iso(when: datetime | int) -> str:
    """An OpenClaw timestamp, `2026-01-05T09:30:00.250Z`: `when` is a UTC datetime or
    milliseconds since the epoch (exact: integer arithmetic, no float)."""
    if isinstance(when, int):
        when = EPOCH + timedelta(milliseconds=when)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def human(n: float) -> str:
    """Bytes for people: 512 B, 1.50 KB, 64.00 MB, 1.00 GB (decimal units)."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    return f"{n:.2f} GB"


def codenames(rng: random.Random) -> list[str]:
    """Every three-syllable CV word (70**3 of them), shuffled. Ends in a vowel, so the
    claim stemmer (plural folding) leaves it alone; no digits, which claims ignore."""
    syllables = [c + v for c in "bdfgklmnprtvz" for v in "aeiou"]
    words = [a + b + c for a in syllables for b in syllables for c in syllables]
    rng.shuffle(words)
    return words


def fill_codenames(template: str, s: str, v: str) -> str:
    """A fact template with its code names: {S} the subject, {v}/{V} the value."""
    return template.format(S=s.capitalize(), v=v, V=v.capitalize())


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, and every option's default."""
