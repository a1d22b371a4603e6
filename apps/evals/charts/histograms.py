"""Server-rendered SVG histograms of a run's per-case figures (score, latency, tokens), with the
median (p50) and p95 marked: the geometry is computed here, ``evalsite/templates/evals/_histogram.html``
draws it. Like :mod:`apps.evals.charts.lines`, no chart library: a few rectangles and lines.

Percentiles are numpy's default ("linear", Hyndman & Fan 1996 definition 7).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from apps.evals.charts.scales import Box, text_box, text_width

FONT_PX = 10
"""Font size of histogram labels (``.histogram svg text`` in ``site.css``)."""
MARKER_ROWS = (11.0, 24.0)
"""Baselines of the percentile labels: p50 on the first row, p95 on the second when they would touch."""
LABEL_PAD = 3
"""Pixels between a percentile's line and its label."""


@dataclass(slots=True)
class Bar:
    """One bin: its pixel box, its count and its range as text (the tooltip)."""

    x: float
    y: float
    width: float
    height: float
    count: int
    label: str


@dataclass(slots=True)
class Marker:
    """A vertical line at a percentile: its x, its name (``p50``) and value as text, and where
    its label goes (``label_x``, ``label_y``, ``anchor``: beside the line, inside the viewBox)."""

    x: float
    name: str
    value: str
    label_x: float = 0.0
    label_y: float = 0.0
    anchor: str = "start"


@dataclass(slots=True)
class Histogram:
    """A laid-out histogram in a ``width`` x ``height`` viewBox.

    Attributes:
        title: What is counted ("latency (ms)").
        n: Values counted (finite ones).
        bars: One per bin, left to right.
        markers: p50 and p95 lines.
        x_ticks: ``(x, label)`` of the axis' low, middle and high.
        p50, p95: The percentiles as numbers (``None`` when empty).
    """

    title: str
    n: int
    width: int = 360
    height: int = 150
    left: int = 8
    right: int = 352
    top: int = 30
    bottom: int = 126
    bars: list[Bar] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    p50: float | None = None
    p95: float | None = None

    @property
    def empty(self) -> bool:
        return self.n == 0


def _fmt(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value * 100:.0f}%"
    if abs(value) >= 1000:
        return f"{value:,.0f}{unit}"
    if abs(value) >= 10 or value == int(value):
        return f"{value:.0f}{unit}"
    return f"{value:.2f}{unit}"


def histogram(
    values: Sequence[float | None],
    *,
    title: str,
    unit: str = "",
    bins: int = 20,
    value_range: tuple[float, float] | None = None,
) -> Histogram:
    """Bin ``values`` (``None`` and non-finite ones are left out) into ``bins`` equal bins.

    Args:
        values: The figures, one per case.
        title: What is counted.
        unit: Appended to labels (``" ms"``, ``""``); ``"%"`` shows 0..1 values as percents.
        bins: Number of bins (>= 1).
        value_range: Fixed ``(low, high)`` (e.g. ``(0, 1)`` for scores); default the data's.

    Raises:
        ValueError: ``bins`` < 1.
    """
    if bins < 1:
        raise ValueError("bins must be >= 1")
    data = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    chart = Histogram(title=title, n=int(data.size))
    if not data.size:
        return chart
    low, high = value_range if value_range else (float(data.min()), float(data.max()))
    if high <= low:
        high = low + 1.0
    counts, edges = np.histogram(data, bins=bins, range=(low, high))
    tallest = max(int(counts.max()), 1)
    span_x = chart.right - chart.left
    span_y = chart.bottom - chart.top
    bar_width = span_x / bins
    for index, count in enumerate(counts):
        height = span_y * int(count) / tallest
        chart.bars.append(
            Bar(
                x=round(chart.left + index * bar_width, 1),
                y=round(chart.bottom - height, 1),
                width=round(max(bar_width - 1, 1), 1),
                height=round(height, 1),
                count=int(count),
                label=f"{_fmt(edges[index], unit)} – {_fmt(edges[index + 1], unit)}: {int(count)}",
            )
        )
    p50, p95 = (float(p) for p in np.percentile(data, [50, 95]))
    chart.p50, chart.p95 = p50, p95

    def x_of(value: float) -> float:
        return round(chart.left + span_x * (min(max(value, low), high) - low) / (high - low), 1)

    chart.markers = [Marker(x_of(p50), "p50", _fmt(p50, unit)), Marker(x_of(p95), "p95", _fmt(p95, unit))]
    place_marker_labels(chart)
    chart.x_ticks = [(x_of(v), _fmt(v, unit)) for v in (low, (low + high) / 2, high)]
    return chart


def place_marker_labels(chart: Histogram) -> None:
    """Put each percentile's label beside its line, inside the viewBox, none overlapping.

    A label goes right of its line (``start``), or left of it (``end``) when it would pass the
    right edge; a label that would touch an earlier one moves to the next row of
    :data:`MARKER_ROWS` (p50 and p95 close together stack instead of overlapping).
    """
    placed: list[Box] = []
    for marker in chart.markers:
        width = text_width(marker.name, FONT_PX)
        if marker.x + LABEL_PAD + width <= chart.width - 1:
            marker.anchor, marker.label_x = "start", round(marker.x + LABEL_PAD, 1)
        else:
            marker.anchor, marker.label_x = "end", round(marker.x - LABEL_PAD, 1)
        for row in MARKER_ROWS:
            box = text_box(marker.label_x, row, marker.name, font_px=FONT_PX, anchor=marker.anchor)
            if not any(box.overlaps(other) for other in placed):
                break
        marker.label_y = row
        placed.append(box)


def label_boxes(chart: Histogram) -> list[Box]:
    """Estimated boxes of every text the template draws in ``chart`` (percentile labels, the
    axis' low / middle / high labels), for checks that none leaves the viewBox or overlaps."""
    boxes = [text_box(m.label_x, m.label_y, m.name, font_px=FONT_PX, anchor=m.anchor) for m in chart.markers]
    anchors = ("start", "middle", "end")
    boxes += [
        text_box(x, chart.bottom + 14, label, font_px=FONT_PX, anchor=anchors[min(i, 2)])
        for i, (x, label) in enumerate(chart.x_ticks)
    ]
    return boxes
