"""Chart geometry that tells the truth and never clips (issue 26): round y ticks (Heckbert's nice
numbers), label boxes inside the viewBox and apart, p50/p95 labels never overlapping, long names
ellipsised, and a sentence instead of a chart of one or two runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import combinations, pairwise

import pytest

from apps.evals.charts import histograms, lines
from apps.evals.charts.histograms import histogram
from apps.evals.charts.lines import Point, Series, few_points_sentence, line_chart
from apps.evals.charts.scales import Box, ellipsize, nice_number, nice_ticks, text_box

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _apart(boxes: list[Box]) -> bool:
    return not any(a.overlaps(b) for a, b in combinations(boxes, 2))


@pytest.mark.parametrize(
    ("low", "high", "ticks"),
    [
        (0.0, 1.0, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (0.62, 0.83, [0.6, 0.65, 0.7, 0.75, 0.8, 0.85]),
        (-0.108, 0.108, [-0.15, -0.1, -0.05, 0.0, 0.05, 0.1, 0.15]),
        (3.0, 1234.0, [0.0, 200.0, 400.0, 600.0, 800.0, 1000.0, 1200.0, 1400.0]),
        (0.701, 0.712, [0.7, 0.702, 0.704, 0.706, 0.708, 0.71, 0.712]),
        (-0.574, 0.724, [-0.6, -0.4, -0.2, 0.0, 0.2, 0.4, 0.6, 0.8]),  # not widened to -100..100%
        (5.0, 5.0, [4.4, 4.6, 4.8, 5.0, 5.2, 5.4, 5.6]),  # no range: a unit-wide one
    ],
)
def test_nice_ticks_are_1_2_5_steps_covering_the_range(low, high, ticks):
    found = nice_ticks(low, high)
    assert found == pytest.approx(ticks)
    assert found[0] <= low and found[-1] >= high and len(found) <= 8
    steps = {round(b - a, 9) for a, b in pairwise(found)}
    assert len(steps) == 1
    mantissa = f"{steps.pop():e}".split("e")[0]
    assert float(mantissa) in (1.0, 2.0, 5.0)


def test_nice_number_rounds_or_ceils_to_1_2_5():
    assert [nice_number(v, round_it=True) for v in (1.2, 2.9, 4.0, 8.0)] == [1.0, 2.0, 5.0, 10.0]
    assert [nice_number(v, round_it=False) for v in (1.2, 2.9, 4.0, 8.0)] == [2.0, 5.0, 5.0, 10.0]
    with pytest.raises(ValueError, match="max_ticks"):
        nice_ticks(0, 1, max_ticks=1)
    with pytest.raises(ValueError, match="finite"):
        nice_ticks(0, float("nan"))


def test_fine_steps_get_decimals_so_labels_differ():
    series = [Series("a", [Point(T0 + timedelta(days=i), 0.701 + i * 0.004) for i in range(4)])]
    chart = line_chart(series, y_min=None, y_max=None)
    labels = [t.label for t in chart.y_ticks]
    assert len(set(labels)) == len(labels) and labels[0].endswith("%") and "." in labels[0]


@pytest.mark.parametrize("width", [360, 720, 1200])
@pytest.mark.parametrize("span", [timedelta(days=30), timedelta(hours=5), timedelta(seconds=100)])
@pytest.mark.parametrize(("y_min", "y_max", "scale"), [(0.0, 1.0, 1.0), (None, None, 1.0), (None, None, 1000.0)])
def test_line_chart_labels_stay_inside_the_viewbox_and_apart(width, span, y_min, y_max, scale):
    points = [Point(T0 + span * i / 5, (0.3 + 0.1 * (i % 3) - 0.5 * (i == 4)) * scale) for i in range(6)]
    chart = line_chart([Series("x", points)], width=width, y_min=y_min, y_max=y_max, percent=scale == 1.0)
    boxes = lines.label_boxes(chart)
    assert boxes and all(box.inside(chart.width, chart.height) for box in boxes), boxes
    assert _apart(boxes)
    # the y labels end left of the axis: the reserved margin fits the widest one
    assert all(box.x1 < chart.left for box in boxes[: len(chart.y_ticks)])


def test_left_margin_grows_with_the_widest_label():
    narrow = line_chart([Series("a", [Point(T0 + timedelta(days=i), 0.5) for i in range(3)])])
    wide_points = [Point(T0 + timedelta(days=i), v) for i, v in enumerate((-123456.0, 0.0, 98765.0))]
    wide = line_chart([Series("a", wide_points)], y_min=None, y_max=None, percent=False)
    assert wide.left > narrow.left


def test_one_or_two_runs_make_a_sentence_with_values_and_intervals():
    v1 = Series("v1", [Point(T0, 0.71, low=0.62, high=0.79), Point(T0 + timedelta(days=1), 0.74, low=0.65, high=0.82)])
    chart = line_chart([v1])
    assert chart.few and chart.summary == "2 runs so far: v1 71% [62–79%], v1 74% [65–82%]"
    one = line_chart([Series("dev", [Point(T0, 0.5, low=0.3, high=0.7)]), Series("train", [Point(T0, 0.9)])])
    assert one.few and one.summary == "1 run so far: dev 50% [30–70%], train 90%"
    three = line_chart([Series("v1", [Point(T0 + timedelta(days=i), 0.5) for i in range(3)])])
    assert not three.few and three.summary == ""
    gap = few_points_sentence([Series("gap", [Point(T0, -0.05, low=-0.2, high=0.1)])], percent=False)
    assert gap == "1 run so far: gap -0.05 [-0.20–0.10]"


def test_points_with_intervals_get_error_bars_inside_the_plot():
    pts = [Point(T0 + timedelta(days=i), 0.5, low=0.3, high=0.7) for i in range(3)]
    chart = line_chart([Series("v1", pts)])
    for p in pts:
        assert p.y_low is not None and p.y_high is not None
        assert chart.top <= p.y_high < p.y < p.y_low <= chart.bottom
        assert p.interval == "[30–70%]"


def test_long_series_names_are_ellipsised_for_the_legend_only():
    name = "a-very-long-target-identifier/with-an-even-longer-variant-name-v12"
    series = Series(name, [Point(T0 + timedelta(days=i), 0.5) for i in range(3)])
    line_chart([series])
    assert series.name == name and series.short_name.endswith("…") and len(series.short_name) == lines.LEGEND_CHARS
    assert ellipsize("short", 10) == "short"


@pytest.mark.parametrize(
    "values",
    [
        [100.0] * 50 + [101.0, 102.0],  # p50 and p95 a pixel apart
        list(range(1, 101)),  # apart
        [1.0] * 95 + [1000.0] * 5,  # p95 at the right edge: "p95" must not read "p9"
        [5.0, 5.0],  # one value
    ],
)
def test_histogram_percentile_labels_never_overlap_or_clip(values):
    h = histogram(values, title="latency (ms)", unit=" ms")
    boxes = histograms.label_boxes(h)
    assert all(box.inside(h.width, h.height) for box in boxes), boxes
    assert _apart(boxes[:2])
    assert all(m.label_y < h.top for m in h.markers)  # above the bars, clear of the lines' tops


def test_text_box_anchors_and_baselines():
    assert text_box(100, 50, "abcd", font_px=10, anchor="end").x1 == 100
    middle = text_box(100, 50, "abcd", font_px=10, anchor="middle")
    assert middle.x0 < 100 < middle.x1
    centred = text_box(0, 50, "a", font_px=10, baseline="middle")
    assert centred.y0 < 50 < centred.y1
    with pytest.raises(ValueError, match="anchor"):
        text_box(0, 0, "a", font_px=10, anchor="left")


def test_several_series_with_intervals_get_dodged_error_bars_and_no_bands():
    make = [Point(T0 + timedelta(days=i), 0.5, low=0.3, high=0.7) for i in range(3)]
    train, dev = Series("train", make), Series("dev", [Point(p.when, 0.6, low=0.4, high=0.8) for p in make])
    line_chart([train, dev])
    assert train.band == "" and dev.band == ""
    a, b = train.points[1], dev.points[1]  # the middle time (the ends are clamped to the plot)
    assert a.x == b.x and b.bar_x - a.bar_x == lines.ERRORBAR_DODGE
