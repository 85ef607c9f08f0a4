"""Plain-text tables for the benchmark scripts (imported as `_report` from bench/)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

# A revision-against-revision table whose revisions wrote different things says so.
DIFFER = "OUTPUTS DIFFER between revisions: the figures do not compare like with like"


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(headers: list[str], rows: list[list[Any]], *, label_column: bool = False) -> str:
    """Headers, a rule of dashes, then the rows (values through `fmt`, strings as they are),
    every column right-aligned and two spaces apart. `label_column`: the first column holds
    labels, left-aligned, and no line ends in spaces."""
    cells = [headers, *[[fmt(v) for v in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        if not label_column:
            return "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True))
        padded = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(padded).rstrip()

    lines = [line(r) for r in cells]
    lines.insert(1, line(["-" * w for w in widths]))
    return "\n".join(lines)


def spread(values: Sequence[float], unit: str = "") -> dict[str, float]:
    """The median and range of one revision's rounds, as `median<unit>`, `min<unit>`,
    `max<unit>`, rounded to 2 places."""
    return {
        f"median{unit}": round(statistics.median(values), 2),
        f"min{unit}": round(min(values), 2),
        f"max{unit}": round(max(values), 2),
    }
