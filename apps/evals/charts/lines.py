"""Server-rendered SVG line charts: the geometry is computed here, the template draws it. A point
may carry an interval (``low`` / ``high``): its series then gets a shaded band.

No chart library: a few lines with points, axes, a legend and ``<title>`` tooltips are all the
runs pages need, and SVG keeps them crisp and printable. ``evalsite/templates/evals/_chart.html`` draws a
:class:`Chart`. Time ticks are in UTC (the axis title says so), whatever the server's zone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from apps.evals.charts.scales import Box, ellipsize, nice_ticks, step_decimals, text_box, text_width

FONT_PX = 11
"""Font size of chart labels (``svg.chart text`` in ``site.css``)."""
Y_LABEL_GAP = 6
"""Pixels between a y tick label's right end and the axis."""
X_LABEL_GAP = 8
"""Least pixels between two x tick labels."""
TOP_PAD, RIGHT_PAD, BOTTOM_PAD = 10, 16, 40
"""Margins (px) above the plot (half a y label), right of it, and below it (x labels + axis title)."""
ERRORBAR_DODGE = 4
"""Pixels between the error bars of two series at one time."""
LEGEND_CHARS = 40
"""Legend names longer than this are ellipsised (the full name is the entry's tooltip)."""

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")


@dataclass(slots=True)
class Point:
    """One data point: when, value, tooltip text (``label``), optional 95% interval
    (``low``/``high``) and coverage text (``"n = 58/60"``); the layout fills ``x``, ``y`` and the
    error bar's ``y_low``/``y_high``."""

    when: datetime
    value: float
    label: str = ""
    x: float = 0.0
    y: float = 0.0
    low: float | None = None
    high: float | None = None
    y_low: float | None = None
    y_high: float | None = None
    interval: str = ""
    coverage: str = ""
    bar_x: float = 0.0


@dataclass(slots=True)
class Series:
    """One line of a chart; ``short_name`` is ``name`` ellipsised for the legend."""

    name: str
    points: list[Point]
    color: str = ""
    path: str = ""
    band: str = ""
    short_name: str = ""


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
    few: bool = False
    summary: str = ""
    percent: bool = True

    @property
    def x_label_y(self) -> float:
        """Baseline of the x tick labels."""
        return self.bottom + 16

    @property
    def title_y(self) -> float:
        """Baseline of the x axis title (below the tick labels, clear of the viewBox's bottom)."""
        return self.height - 4

    @property
    def y_label_x(self) -> float:
        """Right end of the y tick labels."""
        return self.left - Y_LABEL_GAP


def no_negative_zero(value: float, digits: int) -> float:
    """``value`` rounded to ``digits``, with a rounded zero always positive (never "-0")."""
    rounded = round(value, digits)
    return 0.0 if rounded == 0 else rounded


def tick_label(value: float, *, percent: bool, decimals: int | None = None) -> str:
    """A Y tick label: ``"40%"`` (0..1 values as percentages) or ``"0.40"``; never ``"-0%"``.
    ``decimals`` overrides the default (0 for percents, 2 otherwise)."""
    if percent:
        places = 0 if decimals is None else decimals
        return f"{no_negative_zero(value * 100, places):.{places}f}%"
    places = 2 if decimals is None else decimals
    return f"{no_negative_zero(value, places):.{places}f}"


def interval_text(low: float | None, high: float | None, *, percent: bool) -> str:
    """``"[62–79%]"`` (or ``"[0.12–0.30]"``) of an interval, ``""`` without one."""
    if low is None or high is None:
        return ""
    if percent:
        return f"[{no_negative_zero(low * 100, 0):.0f}–{no_negative_zero(high * 100, 0):.0f}%]"
    return f"[{no_negative_zero(low, 2):.2f}–{no_negative_zero(high, 2):.2f}]"


def value_text(value: float, *, percent: bool) -> str:
    """A point's value as shown in sentences and tables: ``"71%"`` or ``"0.12"``."""
    return f"{no_negative_zero(value * 100, 0):.0f}%" if percent else f"{no_negative_zero(value, 2):.2f}"


def few_points_sentence(series: list[Series], *, percent: bool, noun: str = "run") -> str:
    """The sentence shown instead of a chart of one or two runs, e.g. ``"2 runs so far: v1 71%
    [62–79%], v1 74% [65–82%]"``: each point's series, value and 95% interval, oldest first."""
    pts = sorted(((p.when, s.name, p) for s in series for p in s.points), key=lambda t: t[0])
    runs = len({when for when, _, _ in pts})
    parts = []
    for _, name, p in pts:
        interval = interval_text(p.low, p.high, percent=percent)
        parts.append(" ".join(x for x in (name, value_text(p.value, percent=percent), interval) if x))
    return f"{runs} {noun}{'' if runs == 1 else 's'} so far: " + ", ".join(parts)


def line_chart(
    series: list[Series],
    *,
    width: int = 720,
    height: int = 260,
    y_min: float | None = 0.0,
    y_max: float | None = 1.0,
    percent: bool = True,
    noun: str = "run",
) -> Chart:
    """Lay out ``series`` over a shared time axis and value axis.

    Y ticks are round values (:func:`apps.evals.charts.scales.nice_ticks`, Heckbert 1990) and
    the axis spans exactly the first to the last tick. Margins are reserved from the estimated
    label widths (:func:`apps.evals.charts.scales.text_width`), so no label leaves the viewBox.
    Points with an interval get an error bar (``y_low`` / ``y_high``) and their series a band.
    Data from one or two runs (distinct times) is not drawn: ``chart.few`` is set and
    ``chart.summary`` holds the sentence (:func:`few_points_sentence`).

    Args:
        series: Lines; points in any order (sorted by time here).
        width, height: viewBox size in px.
        y_min, y_max: Value range to include; ``None`` fits the data (with a little headroom).
        percent: Y tick labels as percentages (values in 0..1).
        noun: What a point in time is, for the one-or-two sentence ("run").
    """
    points = [p for s in series for p in s.points]
    chart = Chart(series, width, height, 0, width - RIGHT_PAD, TOP_PAD, height - BOTTOM_PAD, empty=not points)
    chart.percent = percent
    for index, line in enumerate(series):
        line.color = line.color or PALETTE[index % len(PALETTE)]
        line.short_name = ellipsize(line.name, LEGEND_CHARS)
        line.points.sort(key=lambda p: p.when)
    if not points:
        return chart
    if len({p.when for p in points}) <= 2:
        chart.few = True
        chart.summary = few_points_sentence(series, percent=percent, noun=noun)
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
        pad = (hi - lo) * 0.04
        lo, hi = lo - (pad if y_min is None else 0), hi + (pad if y_max is None else 0)
    ticks = nice_ticks(lo, hi, max_ticks=7)
    lo, hi = ticks[0], ticks[-1]
    decimals = step_decimals(ticks, 100.0 if percent else 1.0)
    labels = [tick_label(v, percent=percent, decimals=decimals) for v in ticks]
    # the left margin holds the widest y label, its gap to the axis and a pixel of air
    left = math.ceil(max(text_width(label, FONT_PX) for label in labels) + Y_LABEL_GAP + 2)
    right, top, bottom = chart.right, chart.top, chart.bottom
    chart.left = left

    def sx(t: float) -> float:
        return round(left + (t - t0) / (t1 - t0) * (right - left), 1)

    def sy(v: float) -> float:
        return round(bottom - (v - lo) / (hi - lo) * (bottom - top), 1)

    # one series: its intervals as a band and error bars; several: error bars only (overlapping
    # bands hide each other), each series' bars dodged a few px so bars at one time stay apart
    with_intervals = [line for line in series if any(p.low is not None for p in line.points)]
    for index, line in enumerate(series):
        dodge = 0.0 if len(with_intervals) < 2 else (index - (len(series) - 1) / 2) * ERRORBAR_DODGE
        for p in line.points:
            p.x, p.y = sx(p.when.timestamp()), sy(p.value)
            p.bar_x = round(min(max(p.x + dodge, left), right), 1)
            if p.low is not None and p.high is not None:
                p.y_low, p.y_high = sy(p.low), sy(p.high)
                p.interval = interval_text(p.low, p.high, percent=percent)
        line.path = " ".join(f"{'M' if i == 0 else 'L'}{p.x},{p.y}" for i, p in enumerate(line.points))
        banded = [p for p in line.points if p.low is not None and p.high is not None]
        if len(banded) > 1 and len(with_intervals) == 1:
            # the interval as a shaded polygon: along the highs, back along the lows
            upper = [f"{p.x},{sy(p.high)}" for p in banded if p.high is not None]
            lower = [f"{p.x},{sy(p.low)}" for p in reversed(banded) if p.low is not None]
            line.band = "M" + " L".join(upper + lower) + " Z"
    chart.y_ticks = [Tick(label, sy(v), "end") for v, label in zip(ticks, labels, strict=True)]
    # label format fine enough that ticks differ; identical labels are dropped, the end ticks
    # are anchored inwards so they stay inside the viewBox, and a tick whose box would touch
    # the previous one is left out
    span = t1 - t0
    fmt = "%b %d" if span > 4 * 86400 else "%b %d %H:%M" if span > 240 else "%H:%M:%S"
    seen: set[str] = set()
    last_box: Box | None = None
    count = 4
    for i in range(count):
        t = t0 + span * i / (count - 1)
        label = datetime.fromtimestamp(t, tz=UTC).strftime(fmt)
        if label in seen:
            continue
        anchor = "start" if i == 0 else "end" if i == count - 1 else "middle"
        box = text_box(sx(t), chart.x_label_y, label, font_px=FONT_PX, anchor=anchor)
        if last_box is not None and box.x0 < last_box.x1 + X_LABEL_GAP:
            if i != count - 1:
                continue
            chart.x_ticks.pop()  # the last tick (the latest time) wins over the one before
        seen.add(label)
        last_box = box
        chart.x_ticks.append(Tick(label, sx(t), anchor))
    if lo < 0 < hi:
        chart.zero_y = sy(0.0)
    return chart


def label_boxes(chart: Chart) -> list[Box]:
    """Estimated boxes of every text the template draws in ``chart`` (y tick labels, x tick
    labels, the axis title), for checks that none leaves the viewBox or overlaps another."""
    boxes = [
        text_box(chart.left - Y_LABEL_GAP, t.pos, t.label, font_px=FONT_PX, anchor="end", baseline="middle")
        for t in chart.y_ticks
    ]
    boxes += [text_box(t.pos, chart.x_label_y, t.label, font_px=FONT_PX, anchor=t.anchor) for t in chart.x_ticks]
    boxes.append(text_box(chart.right, chart.title_y, chart.x_title, font_px=FONT_PX, anchor="end"))
    return boxes


def points(value: Any) -> str:
    """A 0..1 delta as signed percentage points: ``+2.1``."""
    if value is None:
        return "—"
    shown = round(float(value) * 100, 1)
    return f"{shown if shown != 0 else 0.0:+.1f}"  # never "-0.0"
