"""Hand labels of LoCoMo entries (`locomo_labels.tsv`): matching tonight's entries to them and
the labelled share of small talk (imported as `_labels` by bench/locomo.py).

The fixture names each labelled entry by the SHA-256 of its normalised statement, not by its
text: LoCoMo (CC BY-NC 4.0) is never copied into the repository, and the statement is what a
match needs. `bench/locomo_labels.py show` prints the labels beside the texts, read from the
data at run time. Normalised: the deterministic path's date and speaker prefix
("2023-05-08 — the user: ") and any key comment ("<!-- m:... -->") removed, whitespace
collapsed, case folded; so an entry written on another night, or under another key, with the
same statement matches.
"""

from __future__ import annotations

import csv
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LABELS = Path(__file__).resolve().parent / "locomo_labels.tsv"
MEMORY, SMALL_TALK = "memory", "smalltalk"
KINDS = (MEMORY, SMALL_TALK)
COLUMNS = ("conversation", "turns", "digest", "label")

# The framing the deterministic path puts before a statement, in every form it was written:
# "2023-05-08 — the user: ", "2023-05-08 — Caroline: ", "2023-05-08 Caroline: ", a bare date,
# "The agent: ", "Caroline: ".
_NAME = r"[A-Z][\w'.-]{0,30}"
_PREFIX = re.compile(
    r"^\s*(?:-\s+)?(?:\d{4}-\d{2}-\d{2}\s+(?:—\s+)?)?"
    rf"(?:(?:[Tt]he (?:user|agent)(?: and agent)?|{_NAME}(?: (?:and )?{_NAME}){{0,2}}):\s+)?"
)
_KEY_COMMENT = re.compile(r"<!--.*?-->")
_WS = re.compile(r"\s+")


def bare(text: str) -> str:
    """An entry's statement as written: no date and speaker prefix, no key comment."""
    body = _KEY_COMMENT.sub(" ", _PREFIX.sub("", text))
    return _WS.sub(" ", body).strip()


def statement(text: str) -> str:
    """The statement an entry makes, normalised for matching."""
    return bare(text).casefold()


def digest(text: str) -> str:
    """What the fixture names an entry by: 16 hex digits of its statement's SHA-256."""
    return hashlib.sha256(statement(text).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Label:
    conversation: str
    turns: str  # the LoCoMo turn ids of the labelled entry's evidence, for people
    digest: str
    label: str


def load(path: Path | None = None) -> list[Label]:
    """The labels (of LABELS by default), skipping `#` comment lines (the header saying how
    they were made)."""
    path = path or LABELS
    rows = (line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    body = [line for line in rows if not line.startswith("#")]
    out: list[Label] = []
    for row in csv.DictReader(body, delimiter="\t"):
        if row["label"] not in KINDS:
            raise ValueError(f"{path}: label {row['label']!r} is not one of {KINDS}")
        out.append(Label(row["conversation"], row["turns"], row["digest"], row["label"]))
    return out


def rescore(entries: Iterable[tuple[str, str]], labels: Iterable[Label]) -> dict[str, Any]:
    """Tonight's entries (conversation, text) against the labels: how many match a labelled
    statement of their conversation, how many do not, how many of the matched ones are
    labelled small talk, and that share (None when none matched)."""
    known = {(lb.conversation, lb.digest): lb.label for lb in labels}
    matched = unmatched = small = 0
    for conversation, text in entries:
        label = known.get((conversation, digest(text)))
        if label is None:
            unmatched += 1
            continue
        matched += 1
        small += label == SMALL_TALK
    return {
        "matched": matched,
        "unmatched": unmatched,
        "small_talk": small,
        "share": round(small / matched, 4) if matched else None,
    }
