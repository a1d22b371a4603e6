"""A run's distributions (issue 13 §3 charts): score, latency and token histograms with p50 / p95."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.evals.charts.histograms import histogram
from apps.traces.models import Run
from tests.apps.factories import make_eval_run, make_eval_set


def test_histogram_bins_counts_and_marks_percentiles():
    values = [float(v) for v in range(1, 101)] + [None, float("nan")]
    chart = histogram(values, title="latency (ms)", unit=" ms", bins=10)
    assert chart.n == 100 and [b.count for b in chart.bars] == [10] * 10
    assert chart.p50 == pytest.approx(50.5) and chart.p95 == pytest.approx(95.05)
    assert [m.name for m in chart.markers] == ["p50", "p95"]
    assert chart.markers[0].x < chart.markers[1].x <= chart.right
    assert chart.bars[0].label == "1 ms – 11 ms: 10"
    assert all(b.height == chart.bottom - chart.top for b in chart.bars)  # all bins equally tall


def test_fixed_range_and_empty_and_one_value():
    scores = histogram([0.0, 1.0, 1.0, 1.0], title="score", unit="%", value_range=(0, 1), bins=4)
    assert [b.count for b in scores.bars] == [1, 0, 0, 3]
    assert scores.x_ticks[0][1] == "0%" and scores.x_ticks[-1][1] == "100%"
    assert histogram([], title="x").empty and histogram([None], title="x").bars == []
    single = histogram([7.0, 7.0], title="tokens", bins=5)
    assert single.n == 2 and sum(b.count for b in single.bars) == 2
    with pytest.raises(ValueError, match="bins"):
        histogram([1.0], title="x", bins=0)


@pytest.mark.django_db
def test_run_page_loads_the_distributions_block(client, viewer):
    eval_run = make_eval_run(make_eval_set(n_cases=4), [True, False, True, "errored"], scores=[0.2, 0.4, 0.9, None])
    for index, run in enumerate(Run.objects.filter(eval_results__eval_run=eval_run).order_by("pk")):
        Run.objects.filter(pk=run.pk).update(elapsed_ms=100.0 * (index + 1), tokens_in=10 * index, tokens_out=5)
    client.force_login(viewer)
    page = client.get(reverse("evals:eval_run", args=[eval_run.pk])).content.decode()
    url = reverse("evals:eval_run_distributions", args=[eval_run.pk])
    assert url in page
    block = client.get(url).content.decode()
    assert block.count("<figure") == 3
    assert 'data-title="latency (ms)"' in block and "n=4 · p50 250 ms · p95 385 ms" in block
    assert "tokens (in + out)" in block and "n=4" in block
