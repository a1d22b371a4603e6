"""The SVG line-chart layout (apps.evals.charts.lines): ticks, labels in UTC, geometry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from apps.evals.charts.lines import PALETTE, Point, Series, line_chart, tick_label


def _series(name: str, *points: tuple[datetime, float]) -> Series:
    return Series(name, [Point(when, value, f"{name} {value}") for when, value in points])


def test_empty_chart_is_marked_empty_and_has_no_ticks():
    chart = line_chart([])
    assert chart.empty and chart.x_ticks == [] and chart.y_ticks == []


def test_y_ticks_are_round_percentages_from_bottom_to_top():
    t = datetime(2026, 3, 1, tzinfo=UTC)
    chart = line_chart([_series("a", (t, 0.2), (t + timedelta(days=10), 0.8))])
    assert [tick.label for tick in chart.y_ticks] == ["0%", "20%", "40%", "60%", "80%", "100%"]
    assert chart.y_ticks[0].pos == chart.bottom and chart.y_ticks[-1].pos == chart.top
    assert chart.x_title == "time (UTC)"


def test_fitted_axis_pads_the_data_and_never_shows_minus_zero():
    assert tick_label(-0.0001, percent=True) == "0%"
    assert tick_label(-0.001, percent=False) == "0.00"
    assert tick_label(0.4, percent=True) == "40%" and tick_label(0.4, percent=False) == "0.40"
    t = datetime(2026, 3, 1, tzinfo=UTC)
    chart = line_chart([_series("gap", (t, -0.1), (t + timedelta(hours=1), 0.1))], y_min=None, y_max=None)
    assert chart.zero_y is not None and chart.top < chart.zero_y < chart.bottom
    # the range is fitted to -0.1..0.1 with a little headroom, then widened to round ticks
    assert [tick.label for tick in chart.y_ticks] == ["-15%", "-10%", "-5%", "0%", "5%", "10%", "15%"]
    assert chart.y_ticks[3].pos == chart.zero_y


@pytest.mark.parametrize(
    ("span", "labels"),
    [
        (timedelta(days=9), ["Mar 01", "Mar 04", "Mar 07", "Mar 10"]),
        (timedelta(hours=3), ["Mar 01 22:00", "Mar 01 23:00", "Mar 02 00:00", "Mar 02 01:00"]),
        (timedelta(seconds=90), ["22:00:00", "22:00:30", "22:01:00", "22:01:30"]),
    ],
)
def test_x_tick_format_follows_the_span_and_is_in_utc(span, labels):
    # the same instants written in another zone: the labels are still UTC
    start = datetime(2026, 3, 1, 22, 0, tzinfo=UTC).astimezone(timezone(timedelta(hours=-7)))
    chart = line_chart([_series("a", (start, 0.5), (start + span, 0.6))])
    assert [tick.label for tick in chart.x_ticks] == labels
    assert [tick.anchor for tick in chart.x_ticks] == ["start", "middle", "middle", "end"]
    assert chart.x_ticks[0].pos == chart.left and chart.x_ticks[-1].pos == chart.right


def test_identical_tick_labels_are_dropped():
    t = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    chart = line_chart([_series("a", (t, 0.5), (t + timedelta(days=1), 0.6))])  # a 1-day span: "%b %d %H:%M"
    labels = [tick.label for tick in chart.x_ticks]
    assert len(labels) == len(set(labels))


def test_points_are_sorted_by_time_and_placed_on_the_axes():
    t = datetime(2026, 3, 1, tzinfo=UTC)
    line = _series("a", (t + timedelta(days=2), 1.0), (t, 0.0))
    chart = line_chart([line, _series("b", (t, 0.5))])
    first, last = line.points
    assert first.when == t and (first.x, first.y) == (chart.left, chart.bottom)
    assert (last.x, last.y) == (chart.right, chart.top)
    assert line.path == f"M{first.x},{first.y} L{last.x},{last.y}"
    assert [s.color for s in chart.series] == list(PALETTE[:2])


def test_points_with_intervals_get_a_shaded_band_inside_the_axis():
    from datetime import UTC, datetime, timedelta

    from apps.evals.charts.lines import Point, Series, line_chart

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    series = Series("v1", [Point(t0 + timedelta(days=i), 0.5, low=0.3, high=0.7) for i in range(3)])
    plain = Series("v2", [Point(t0, 0.4)])
    chart = line_chart([series, plain])
    assert series.band.startswith("M") and series.band.endswith(" Z") and series.band.count(",") == 6
    assert plain.band == ""
    ys = [float(pair.split(",")[1]) for pair in series.band[1:-2].split(" L")]
    assert all(chart.top <= y <= chart.bottom for y in ys)
    assert min(ys) < series.points[0].y < max(ys)  # the line runs inside its band
