"""A run's stored metrics read back as the engine's ``MetricSummary`` (one declaration, issue 24):
rows stored today, rows stored before coverage and intervals, and the ``spread`` filter."""

from __future__ import annotations

from apps.evals.templatetags.evals_tags import metric_rows, spread
from evalcore.report import MetricSummary
from evalcore.serial import adapter


def test_a_stored_report_reads_back_equal_to_the_engine_summary():
    metric = MetricSummary(
        name="exact_match",
        n=8,
        total=9,
        errors=1,
        mean=0.75,
        stderr=None,
        passed=6,
        labels={},
        cases=10,
        binary=True,
        low=0.41,
        high=0.93,
        interval_method="wilson",
        interval_reason=None,
    )
    stored = {"metrics": {"exact_match": adapter(MetricSummary).dump_python(metric, mode="json")}}
    [row] = metric_rows(stored)
    assert row == metric
    assert (row.partial, row.missing, row.not_attempted) == (True, 2, 1)
    assert spread(row) == "95% CI 41.0–93.0%"


def test_a_row_stored_before_coverage_and_intervals_gets_both():
    stored = {"metrics": {"score": {"n": 2, "total": 2, "errors": 0, "mean": 0.5, "stderr": 0.1, "labels": {}}}}
    [row] = metric_rows(stored)
    assert (row.cases, row.partial, row.passed) == (2, False, 0)
    assert row.stderr is None and row.interval.method is None  # two values: too few for an interval
    assert spread(row) == "(too few cases)"


def test_a_mean_with_a_normal_interval_shows_its_standard_error_and_labels_show_nothing():
    normal = {"n": 30, "total": 30, "errors": 0, "mean": 0.5, "stderr": 0.05, "labels": {}, "cases": 30}
    normal |= {"low": 0.402, "high": 0.598, "interval_method": "normal", "interval_reason": None}
    labels = {"n": 3, "total": 3, "errors": 0, "mean": None, "stderr": None, "labels": {"a": 3}, "cases": 3}
    rows = metric_rows({"metrics": {"m": normal, "kind": labels}})
    assert [r.name for r in rows] == ["kind", "m"]
    assert spread(rows[1]) == "± 5.0%"
    assert spread(rows[0]) == ""
    assert metric_rows(None) == [] and metric_rows({"metrics": None}) == []
