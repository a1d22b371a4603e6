"""The figures pages show, read back exactly: the overfit gap, the compare verdict, the trends
split filter, the suggested baseline, chart ticks, and the score results are sorted by.

Each test would fail if the figure were computed another way (a review changed these in the code
and the earlier tests still passed). They go through the URLs and the API only, so moving the
code behind them (views, queries, charts) does not touch them.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, EvalSet
from apps.evals.results.executor import executor_fields, this_executor
from apps.evals.results.writer import DjangoEvalStore
from evalcore import Case, run_eval
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)
T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def split_summary(**rates: float) -> dict:
    """A run summary with a pass rate per split (10 cases each)."""
    return {
        "splits": {
            name: {"n": 10, "passed": round(rate * 10), "pass_rate": rate, "metrics": {}}
            for name, rate in rates.items()
        }
    }


def titles(body: str) -> list[str]:
    """The chart points' labels, in page order, from each chart's table of values (shown under a
    chart, and under the sentence that replaces a chart of one or two runs)."""
    return re.findall(r'<td class="point-label">([^<]*)</td>', body)


def intervals(body: str) -> list[str]:
    """The ``low … high`` 95% interval of each point that has one, from the tables of values."""
    return [m for m in re.findall(r'<td class="num interval">([^<]*)</td>', body) if m != "—"]


def tick_labels(svg: str) -> list[str]:
    """Tick labels of one chart, Y ticks (bottom to top) then X ticks (left to right)."""
    return re.findall(r"<text [^>]*>([^<]*)</text>", svg)


def charts(body: str) -> list[str]:
    return re.findall(r"<svg class=\"chart\".*?</svg>", body, re.S)


def row_cells(body: str, run_pk: str) -> list[str]:
    """The numeric cells of a run's row in the splits table."""
    row = re.search(rf"<tr><td><a class=\"mono\" href=\"[^\"]*{run_pk}/\">.*?</tr>", body, re.S)
    assert row, f"no row for run {run_pk}"
    return re.findall(r'<td class="num">([^<]*)</td>', row.group(0))


# -- splits: the train - test gap --------------------------------------------------------------


def test_splits_rows_and_gap_chart_show_train_minus_test(client, viewer):
    eval_set = make_eval_set("gap", 6)
    whole = make_eval_run(eval_set, [True] * 6, split="all", started=T0, summary=split_summary(train=0.9, test=0.6))
    on_test = make_eval_run(
        eval_set, [True] * 6, split="test", started=T0 + DAY, summary=split_summary(test=0.4, dev=0.7)
    )
    # no summary: the run's own counters give the pass rate of the split it ran on (3 of 4)
    on_dev = make_eval_run(eval_set, [True, True, True, False], split="dev", started=T0 + 2 * DAY)
    client.force_login(viewer)
    body = client.get(reverse("evals:splits", args=[eval_set.pk]), {"target": "echo", "variant": "v1"}).content.decode()

    assert row_cells(body, whole.pk) == ["90.0%", "—", "60.0%", "+30.0"]
    assert row_cells(body, on_test.pk) == ["—", "70.0%", "40.0%", "—"]
    assert row_cells(body, on_dev.pk) == ["—", "75.0%", "—", "—"]
    tips = titles(body)
    # the gap chart reads the latest known train and test: 0.9 - 0.6, then 0.9 - 0.4; the dev-only
    # run adds no gap point
    assert [t for t in tips if t.startswith("gap")] == [
        f"gap +30.0 points ({whole.pk})",
        f"gap +50.0 points ({on_test.pk})",
    ]
    assert f"train 90.0% ({whole.pk})" in tips and f"test 40.0% ({on_test.pk})" in tips
    assert f"dev 75.0% ({on_dev.pk})" in tips
    assert "Lockbox warning" in body  # two runs touched the test split


def test_splits_gap_can_be_negative_and_one_test_run_is_no_lockbox(client, viewer):
    eval_set = make_eval_set("under", 3)
    run = make_eval_run(eval_set, [True] * 3, split="all", started=T0, summary=split_summary(train=0.25, test=0.5))
    client.force_login(viewer)
    body = client.get(reverse("evals:splits", args=[eval_set.pk]), {"target": "echo", "variant": "v1"}).content.decode()
    assert row_cells(body, run.pk) == ["25.0%", "—", "50.0%", "-25.0"]
    assert [t for t in titles(body) if t.startswith("gap")] == [f"gap -25.0 points ({run.pk})"]
    assert "Lockbox warning" not in body


# -- compare: the verdict ----------------------------------------------------------------------


def test_compare_verdict_is_inconclusive_when_the_test_and_the_interval_disagree(client, viewer):
    """B fixes the 4 of 12 cases A failed: the interval excludes 0 but McNemar's p is 0.125.
    (At 4 cases the same flips are too few for an interval: tests/apps/evals/test_small_n_pages.py.)"""
    eval_set = make_eval_set("few", 12)
    a = make_eval_run(eval_set, [i < 8 for i in range(12)], variant="v1")
    b = make_eval_run(eval_set, [True] * 12, variant="v2")
    client.force_login(viewer)
    body = client.get(reverse("evals:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    verdict = re.search(r'<div class="verdict ([a-z_]+)" id="verdict">([^<]*)</div>', body)
    assert verdict, body
    assert verdict.groups() == (
        "inconclusive",
        "inconclusive: p=0.125 but CI of delta [+8.3, +58.3] points excludes 0",
    )
    api = client.get("/api/eval/compare", {"a": a.pk, "b": b.pk}).json()
    assert api["verdict"]["outcome"] == "inconclusive" and api["verdict"]["significant"] is False
    assert api["verdict"]["p_value"] == 0.125
    assert api["counts"] == {
        "both": 8,
        "a_only": 0,
        "b_only": 4,
        "neither": 0,
        "n": 12,
        "pass_rate_a": 8 / 12,
        "pass_rate_b": 1.0,
        "delta": 4 / 12,
    }


def test_compare_verdict_names_a_worse_candidate(client, viewer):
    eval_set = make_eval_set("worse", 40)
    a = make_eval_run(eval_set, [i < 30 for i in range(40)], variant="v1")
    b = make_eval_run(eval_set, [i < 10 for i in range(40)], variant="v2")
    client.force_login(viewer)
    api = client.get("/api/eval/compare", {"a": a.pk, "b": b.pk}).json()
    assert api["verdict"]["outcome"] == "a_better" and api["verdict"]["significant"] is True
    assert api["verdict"]["text"].startswith("B is worse than A: p<0.001, CI of delta [")
    assert api["counts"]["delta"] == -0.5


# -- trends: the split filter ------------------------------------------------------------------


def test_trends_split_filter_keeps_only_runs_on_that_split(client, viewer):
    eval_set = make_eval_set("tr", 6)
    dev = make_eval_run(eval_set, [True, False], split="dev", started=T0)
    test = make_eval_run(eval_set, [True, True], split="test", started=T0 + DAY)
    whole = make_eval_run(eval_set, [False, False], split="all", started=T0 + 2 * DAY)
    client.force_login(viewer)
    url = reverse("evals:trends")
    every = titles(client.get(url, {"set": eval_set.pk}).content.decode())
    assert every == [
        f"echo/v1: 50.0% — run {dev.pk}",
        f"echo/v1: 100.0% — run {test.pk}",
        f"echo/v1: 0.0% — run {whole.pk}",
    ]
    only_dev = client.get(
        url, {"set": eval_set.pk, "split": "dev"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="trend-chart"
    )
    assert titles(only_dev.content.decode()) == [f"echo/v1: 50.0% — run {dev.pk}"]
    # the pass rate's 95% Wilson interval over its 2 cases; one run is a sentence, not a chart
    assert intervals(only_dev.content.decode()) == ["9.5% … 90.5%"]
    assert "1 run so far: echo/v1 50% [9–91%]" in only_dev.content.decode()
    assert 'class="band"' in client.get(url, {"set": eval_set.pk}).content.decode()  # three runs: a band
    only_test = client.get(url, {"set": eval_set.pk, "split": "test"})
    assert titles(only_test.content.decode()) == [f"echo/v1: 100.0% — run {test.pk}"]


def test_trends_of_a_scorer_plot_its_mean_and_skip_runs_without_it(client, viewer):
    eval_set = make_eval_set("sc", 2)
    with_mean = make_eval_run(eval_set, [True], started=T0, summary={"metrics": {"f1": {"mean": 0.625}}})
    make_eval_run(eval_set, [True], started=T0 + DAY, summary={"metrics": {}})
    client.force_login(viewer)
    body = client.get(reverse("evals:trends"), {"set": eval_set.pk, "scorer": "f1"}).content.decode()
    assert titles(body) == [f"echo/v1: 62.5% — run {with_mean.pk}"]


# -- chart ticks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spacing", "x_ticks"),
    [
        # more than 4 days: dates
        (timedelta(days=3), ["Mar 01", "Mar 03", "Mar 05", "Mar 07"]),
        # 4 minutes .. 4 days: date and time (UTC)
        (timedelta(hours=3), ["Mar 01 09:30", "Mar 01 11:30", "Mar 01 13:30", "Mar 01 15:30"]),
        # up to 4 minutes: time with seconds
        (timedelta(seconds=45), ["09:30:00", "09:30:30", "09:31:00", "09:31:30"]),
    ],
)
def test_trend_chart_ticks_are_exact(client, viewer, spacing, x_ticks):
    eval_set = make_eval_set("ticks", 2)
    for i, outcome in enumerate([True, False, True]):
        make_eval_run(eval_set, [outcome], started=T0 + i * spacing)
    client.force_login(viewer)
    (svg,) = charts(client.get(reverse("evals:trends"), {"set": eval_set.pk}).content.decode())
    assert tick_labels(svg) == ["0%", "20%", "40%", "60%", "80%", "100%", *x_ticks, "time (UTC)"]


def test_gap_chart_ticks_fit_the_data_and_never_show_minus_zero(client, viewer):
    eval_set = make_eval_set("gapticks", 2)
    make_eval_run(eval_set, [True], split="all", started=T0, summary=split_summary(train=0.5, test=0.7))
    # a third run (one or two runs are a sentence, not a chart), the same rates as the first
    make_eval_run(eval_set, [True], split="all", started=T0 + 3 * DAY, summary=split_summary(train=0.5, test=0.7))
    make_eval_run(eval_set, [True], split="all", started=T0 + 6 * DAY, summary=split_summary(train=0.9, test=0.5))
    client.force_login(viewer)
    body = client.get(reverse("evals:splits", args=[eval_set.pk]), {"target": "echo", "variant": "v1"}).content.decode()
    split_svg, gap_svg = charts(body)
    # gap -0.2 then +0.4, each with its 95% band: two independent proportions of 10 cases,
    # Newcombe's hybrid score interval (5/10 - 7/10: -0.526 .. +0.202; 9/10 - 5/10: -0.002 ..
    # +0.676, checked against Newcombe 1998's own table in tests/evalcore/test_small_n.py): the
    # axis fits the bands, padded by 8%
    assert intervals(body)[-2:] == ["-52.6% … 20.2%", "-0.2% … 67.6%"]
    # -0.526 .. +0.676 padded by 4% of the range (-0.574 .. +0.724), widened to round ticks
    # (steps of 1, 2 or 5 x 10^k: Heckbert 1990)
    assert tick_labels(gap_svg) == [
        *("-60%", "-40%", "-20%", "0%", "20%", "40%", "60%", "80%"),
        *("Mar 01", "Mar 03", "Mar 05", "Mar 07", "time (UTC)"),
    ]
    assert 'stroke-dasharray="4 3"' in gap_svg  # the zero line of a chart crossing zero
    assert tick_labels(split_svg)[:6] == ["0%", "20%", "40%", "60%", "80%", "100%"]
    assert 'stroke-dasharray="4 3"' not in split_svg


# -- compare with…: the suggested baseline -----------------------------------------------------


def compare_location(client, **side) -> str:
    response = client.get(reverse("evals:compare"), side)
    assert response.status_code == 302, response.content.decode()[:500]
    return response["Location"]


def test_compare_with_suggests_the_same_targets_latest_earlier_run(client, viewer):
    eval_set = make_eval_set("partner", 2)
    oldest = make_eval_run(eval_set, [True, True], started=T0)
    baseline = make_eval_run(eval_set, [True, False], started=T0 + DAY)
    other_target = make_eval_run(eval_set, [True, True], target_id="other", started=T0 + 2 * DAY)
    chosen = make_eval_run(eval_set, [False, False], started=T0 + 3 * DAY)
    make_eval_run(eval_set, [True, True], started=T0 + 4 * DAY)  # later: not a baseline
    make_eval_run(eval_set, [True], status="queued", started=T0 + 2 * DAY + timedelta(hours=1))
    make_eval_run(make_eval_set("elsewhere", 2), [True], started=T0 + 2 * DAY)  # another set
    client.force_login(viewer)
    url = reverse("evals:compare")
    assert compare_location(client, b=chosen.pk) == f"{url}?a={baseline.pk}&b={chosen.pk}"
    # asked from the A side, the chosen run stays A
    assert compare_location(client, a=chosen.pk) == f"{url}?a={chosen.pk}&b={baseline.pk}"
    # the other target's run has no earlier run of its own target: the set's newest other run
    newest = EvalRun.objects.filter(eval_set=eval_set).exclude(status="queued").order_by("-started").first()
    assert compare_location(client, b=other_target.pk) == f"{url}?a={newest.pk}&b={other_target.pk}"
    assert compare_location(client, b=oldest.pk).endswith(f"&b={oldest.pk}")
    assert compare_location(client, b=oldest.pk) == f"{url}?a={newest.pk}&b={oldest.pk}"


def test_compare_with_skips_queued_runs_and_says_when_there_is_none(client, viewer):
    eval_set = make_eval_set("lonely", 2)
    run = make_eval_run(eval_set, [True, True], started=T0 + DAY)
    make_eval_run(eval_set, [True, True], status="queued", started=T0)
    client.force_login(viewer)
    page = client.get(reverse("evals:compare"), {"a": run.pk})
    assert page.status_code == 200
    assert "no other run of this set to compare with yet" in page.content.decode()
    missing = client.get(reverse("evals:compare"), {"a": "nope"})
    assert missing.status_code == 200 and "no run &#x27;nope&#x27;" in missing.content.decode()


def test_compare_with_a_run_not_started_yet_takes_any_earlier_run_of_its_target(client, viewer):
    eval_set = make_eval_set("unstarted", 2)
    older = make_eval_run(eval_set, [True, True], started=T0)
    newer = make_eval_run(eval_set, [True, False], started=T0 + DAY)
    fresh = make_eval_run(eval_set, [True, True], status="running")
    EvalRun.objects.filter(pk=fresh.pk).update(started=None)
    client.force_login(viewer)
    url = reverse("evals:compare")
    assert compare_location(client, b=fresh.pk) == f"{url}?a={newer.pk}&b={fresh.pk}"
    assert older.pk not in compare_location(client, b=fresh.pk)


# -- the score a result is sorted by ------------------------------------------------------------


def _stored_scores(tmp_name: str, cases: list[Case], scorers: list) -> dict[str, float | None]:
    """Run ``cases`` through the store as the CLI does (a running eval run held by this process)."""
    eval_set = EvalSet.objects.create(name=tmp_name)
    eval_run_id = EvalRun.objects.create(
        eval_set=eval_set, target_id="t", status=EvalRunStatus.RUNNING, started=timezone.now(), **executor_fields()
    ).id
    store = DjangoEvalStore(target_id="t", eval_run_id=eval_run_id, executor=this_executor())
    with store:
        asyncio.run(run_eval(cases, lambda x: x, scorers, concurrency=1, sink=store, eval_run_id=eval_run_id))
    return dict(EvalResult.objects.filter(eval_run_id=eval_run_id).values_list("case_id", "score"))


@pytest.mark.django_db(transaction=True)
def test_result_score_averages_main_scores_and_leaves_sub_scores_out():
    """``exact_match`` (bool) and ``citation_set`` (a main score plus precision/recall/f1 parts):
    the stored score averages the two main scores only."""
    cases = [Case("both", ["d1", "d2"], ["d1", "d2"]), Case("half", ["d1"], ["d1", "d2"])]
    scores = _stored_scores("rs", cases, ["exact_match", "citation_set"])
    assert scores["both"] == 1.0
    result = EvalResult.objects.get(case_id="half")
    named = {s["name"]: s["value"] for s in result.scores}
    assert named["exact_match"] is False and named["citation_set"] is False
    assert named["citation_set.precision"] == 1.0 and named["citation_set.recall"] == 0.5
    # the parts (precision 1, recall 0.5, f1 0.67) are left out: both main scores are 0
    assert scores["half"] == 0.0
