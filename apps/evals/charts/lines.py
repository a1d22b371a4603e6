"""Server-rendered SVG line charts: the geometry is computed here, the template draws it. A point
may carry an interval (``low`` / ``high``): its series then gets a shaded band.

No chart library: a few lines with points, axes, a legend and ``<title>`` tooltips are all the
runs pages need, and SVG keeps them crisp and printable. ``evalsite/templates/evals/_chart.html`` draws a
:class:`Chart`. Time ticks are in UTC (the axis title says so), whatever the server's zone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")


@dataclass(slots=True)
class Point:
    """One data point: when, value, tooltip text."""

    when: datetime
    value: float
    label: str = ""
    x: float = 0.0
    y: float = 0.0
    low: float | None = None
    high: float | None = None


@dataclass(slots=True)
class Series:
    """One line of a chart."""

    name: str
    points: list[Point]
    color: str = ""
    path: str = ""
    band: str = ""


@dataclass(slots=True)
class Tick:
    label: str
    pos: float
    anchor: str = "middle"


@dataclass(slots=True)
class Chart:
    """A laid-out chart (pixel coordinates inside a ``width`` x ``height`` viewBox)."""

    series: list[Series]
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    zero_y: float | None = None
    empty: bool = True
    x_title: str = "time (UTC)"


def no_negative_zero(value: float, digits: int) -> float:
    """``value`` rounded to ``digits``, with a rounded zero always positive (never "-0")."""
    rounded = round(value, digits)
    return 0.0 if rounded == 0 else rounded


def tick_label(value: float, *, percent: bool) -> str:
    """A Y tick label: ``"40%"`` (0..1 values as percentages) or ``"0.40"``; never ``"-0%"``
    (a padded axis starts a hair below zero)."""
    if percent:
        return f"{no_negative_zero(value * 100, 0):.0f}%"
    return f"{no_negative_zero(value, 2):.2f}"


def line_chart(
    series: list[Series],
    *,
    width: int = 720,
    height: int = 260,
    y_min: float | None = 0.0,
    y_max: float | None = 1.0,
    percent: bool = True,
) -> Chart:
    """Lay out ``series`` over a shared time axis and value axis.

    Args:
        series: Lines; points in any order (sorted by time here).
        width, height: viewBox size in px.
        y_min, y_max: Value range; ``None`` fits the data (with a little headroom).
        percent: Y tick labels as percentages (values in 0..1).
    """
    left, right, top, bottom = 52, width - 16, 16, height - 34
    points = [p for s in series for p in s.points]
    chart = Chart(series, width, height, left, right, top, bottom, empty=not points)
    if not points:
        return chart
    times = [p.when.timestamp() for p in points]
    t0, t1 = min(times), max(times)
    if t1 == t0:
        t0, t1 = t0 - 1, t1 + 1
    values = [p.value for p in points] + [b for p in points for b in (p.low, p.high) if b is not None]
    lo = min(values) if y_min is None else min(y_min, *values)
    hi = max(values) if y_max is None else max(y_max, *values)
    if hi == lo:
        lo, hi = lo - 0.05, hi + 0.05
    if y_min is None or y_max is None:
        pad = (hi - lo) * 0.08
        lo, hi = lo - pad, hi + pad

    def sx(t: float) -> float:
        return round(left + (t - t0) / (t1 - t0) * (right - left), 1)

    def sy(v: float) -> float:
        return round(bottom - (v - lo) / (hi - lo) * (bottom - top), 1)

    for index, line in enumerate(series):
        line.color = line.color or PALETTE[index % len(PALETTE)]
        line.points.sort(key=lambda p: p.when)
        for p in line.points:
            p.x, p.y = sx(p.when.timestamp()), sy(p.value)
        line.path = " ".join(f"{'M' if i == 0 else 'L'}{p.x},{p.y}" for i, p in enumerate(line.points))
        banded = [p for p in line.points if p.low is not None and p.high is not None]
        if banded:
            # the interval as a shaded polygon: along the highs, back along the lows
            upper = [f"{p.x},{sy(p.high)}" for p in banded if p.high is not None]
            lower = [f"{p.x},{sy(p.low)}" for p in reversed(banded) if p.low is not None]
            line.band = "M" + " L".join(upper + lower) + " Z"
    for i in range(5):
        v = lo + (hi - lo) * i / 4
        chart.y_ticks.append(Tick(tick_label(v, percent=percent), sy(v)))
    # label format fine enough that ticks differ; identical labels are dropped, and the end
    # ticks are anchored inwards so they are not clipped by the viewBox
    span = t1 - t0
    fmt = "%b %d" if span > 4 * 86400 else "%b %d %H:%M" if span > 240 else "%H:%M:%S"
    seen: set[str] = set()
    for i in range(4):
        t = t0 + span * i / 3
        label = datetime.fromtimestamp(t, tz=UTC).strftime(fmt)
        if label in seen:
            continue
        seen.add(label)
        anchor = "start" if i == 0 else "end" if i == 3 else "middle"
        chart.x_ticks.append(Tick(label, sx(t), anchor))
    if lo < 0 < hi:
        chart.zero_y = sy(0.0)
    return chart


def points(value: Any) -> str:
    """A 0..1 delta as signed percentage points: ``+2.1``."""
    if value is None:
        return "—"
    shown = round(float(value) * 100, 1)
    return f"{shown if shown != 0 else 0.0:+.1f}"  # never "-0.0"
