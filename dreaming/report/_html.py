"""The report as one self-contained HTML page: `prompts/report.html.j2` with inline CSS and
SVG, no script, nothing fetched. Everything a transcript or a model wrote is hostile text:
the templates are rendered with autoescaping on, and the page's Content-Security-Policy
forbids scripts and every network load should anything slip through.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime

import jinja2

from dreaming.report._records import DaySpend, Report
from dreaming.templates import template_env

TEMPLATE = "report.html.j2"

_WORDS = re.compile(r"\w+|\s+|[^\w\s]")


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """(op, text) runs turning `old` into `new`, word by word: op is eq, del or ins. A lone
    space kept between two changes joins them, so a rewritten phrase reads as one deletion
    and one insertion rather than alternating words."""
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    runs: list[tuple[str, str, str]] = []  # (op, old text, new text)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        runs.append(("eq" if tag == "equal" else "change", "".join(a[i1:i2]), "".join(b[j1:j2])))
    merged: list[tuple[str, str, str]] = []
    for i, (kind, was, now) in enumerate(runs):
        between = 0 < i < len(runs) - 1 and runs[i - 1][0] == runs[i + 1][0] == "change"
        if kind == "eq" and between and not was.strip():
            kind = "change"
        if merged and kind == merged[-1][0] == "change":
            merged[-1] = ("change", merged[-1][1] + was, merged[-1][2] + now)
        else:
            merged.append((kind, was, now))
    out: list[tuple[str, str]] = []
    for kind, was, now in merged:
        if kind == "eq":
            out.append(("eq", was))
            continue
        if was:
            out.append(("del", was))
        if now:
            out.append(("ins", now))
    return out


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else many or word + 's'}"


def anchor(*parts: str) -> str:
    """An HTML id from names and keys: letters, digits, `-` and `_` kept, anything else
    spelled as its code point, so two different names never share an id."""
    return "-".join(re.sub(r"[^A-Za-z0-9_-]", lambda m: f"_{ord(m.group(0)):x}", p) for p in parts)


def usd(value: float | None) -> str:
    if value is None:
        return "-"
    return f"${value:.4f}" if value < 100 else f"${value:,.0f}"


def when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M UTC")


# -- the spend chart ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str
    over: bool  # above the cap


@dataclass(frozen=True, slots=True)
class Chart:
    """A bar chart's geometry in SVG user units; the template draws it."""

    title: str
    width: int
    height: int
    left: int
    top: int
    right: int  # x of the plot's right edge
    bottom: int  # y of the plot's baseline
    bars: tuple[Bar, ...]
    ticks: tuple[tuple[float, str], ...]  # (y, label) on the value axis
    labels: tuple[tuple[float, str], ...]  # (x, label) under the bars
    cap_y: float | None
    cap_label: str
    empty: bool  # every bar is zero


def _nice(top: float) -> float:
    """A round number at or above `top`: 1, 2, 2.5 or 5 times a power of ten (1 for 0)."""
    if top <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(top))
    found = next(m * power for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= top - 1e-12)
    return round(found, 12)


def _axis(top: float) -> tuple[float, int]:
    """(axis maximum, number of steps): round steps, 4 to 6 of them, the lowest maximum."""
    if top <= 0:
        return 1.0, 1  # nothing to draw: a bare axis
    return min(((_nice(top / n) * n, n) for n in (4, 5, 6)), key=lambda a: (a[0], a[1]))


def bar_chart(
    title: str,
    days: Sequence[DaySpend],
    value: Callable[[DaySpend], float],
    fmt: Callable[[float], str],
    cap: float | None,
    cap_name: str,
    *,
    width: int = 960,
    height: int = 230,
) -> Chart:
    left, top, right, bottom = 84, 16, width - 16, height - 40
    plot_w, plot_h = right - left, bottom - top
    values = [value(d) for d in days]
    scale, steps = _axis(max([*values, cap or 0.0]) * 1.08)
    slot = plot_w / max(1, len(days))
    gap = min(6.0, slot * 0.2)

    def y_of(v: float) -> float:
        return round(bottom - plot_h * min(v, scale) / scale, 2)

    bars = tuple(
        Bar(
            x=round(left + i * slot + gap / 2, 2),
            y=y_of(v),
            width=round(slot - gap, 2),
            height=round(bottom - y_of(v), 2),
            title=f"{d.day.isoformat()}: {fmt(v)}",
            over=cap is not None and v > cap,
        )
        for i, (d, v) in enumerate(zip(days, values, strict=True))
    )
    every = max(1, math.ceil(len(days) / 14))  # at most 14 day labels
    labels = tuple(
        (round(left + (i + 0.5) * slot, 2), _short(d.day))
        for i, d in enumerate(days)
        if i % every == 0
    )
    ticks = tuple((y_of(scale * k / steps), fmt(scale * k / steps)) for k in range(steps + 1))
    cap_label = "no daily cap" if cap is None else f"{cap_name} {fmt(cap)}"
    return Chart(
        title=title,
        width=width,
        height=height,
        left=left,
        top=top,
        right=right,
        bottom=bottom,
        bars=bars,
        ticks=ticks,
        labels=labels,
        cap_y=None if cap is None else y_of(cap),
        cap_label=cap_label,
        empty=not any(values),
    )


def _short(day: date) -> str:
    return day.strftime("%b %d").replace(" 0", " ")


def _usd_axis(v: float) -> str:
    if v == 0:
        return "$0"
    return f"${v:.4g}" if v < 1 else f"${v:,.2f}"


def _tokens_axis(v: float) -> str:
    if v >= 1_000_000:
        return f"{v / 1_000_000:.3g}M"
    if v >= 1_000:
        return f"{v / 1_000:.3g}k"
    return f"{v:.0f}"


def spend_charts(
    days: Sequence[DaySpend], daily_usd: float | None, daily_tokens: int | None
) -> list[Chart]:
    """USD and tokens per day, each against its daily cap; one short USD chart when
    nothing was spent."""
    usd_chart = functools.partial(
        bar_chart, "USD per day", days, lambda d: d.usd, _usd_axis, daily_usd, "daily_max_usd"
    )
    if not any(d.usd or d.tokens for d in days):
        return [usd_chart(height=150)]
    return [
        usd_chart(),
        bar_chart(
            "Tokens per day",
            days,
            lambda d: float(d.tokens),
            _tokens_axis,
            None if daily_tokens is None else float(daily_tokens),
            "daily_max_tokens",
        ),
    ]


# -- rendering ---------------------------------------------------------------------------------


@functools.cache
def _env() -> jinja2.Environment:
    # The prompts' loader (source tree, else the wheel's copy), but with autoescaping on:
    # the prompt environment renders text for a model and must not escape.
    env = jinja2.Environment(
        loader=template_env().loader,
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(word_diff=word_diff, usd=usd, when=when, plural=plural)
    env.globals.update(anchor=anchor, spend_charts=spend_charts)
    return env


def render(report: Report) -> str:
    return _env().get_template(TEMPLATE).render(report=report)
