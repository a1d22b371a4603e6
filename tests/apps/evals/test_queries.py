"""The selectors (apps.evals.queries): the one home of per-split counts, eval-run history,
result filters, the "comparable" check and the figures the pages chart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import get_args

import pytest

from apps.evals.forms import CompareForm
from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, ResultStatus, Split
from apps.evals.queries import (
    eval_run_history,
    filter_results,
    latest_results,
    split_counts,
    split_counts_by_set,
)
from apps.evals.queries.compare import CompareError, check_comparable, suggested_partner
from apps.evals.queries.figures import latest_target_variant, overfit_gap, splits_figures, trend_series
from apps.evals.schemas import RunSplit
from evalcore.errors import InvalidInputError
from evalcore.splits import SPLIT_CHOICES
from evalcore.types import SPLITS, CaseStatus
from tests.apps.factories import make_eval_run, make_eval_set

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_one_vocabulary_matches_the_engine():
    assert ResultStatus.values == [s.value for s in CaseStatus]
    assert Split.values == list(SPLITS)
    assert get_args(RunSplit) == SPLIT_CHOICES
    assert set(EvalRunStatus.values) == {"queued", "running", "finished", "failed", "interrupted"}


@pytest.mark.django_db
def test_split_counts_name_every_split_even_empty_ones():
    full = make_eval_set("full", 7)  # c0..c6 cycle train/dev/test
    only_dev = make_eval_set("dev-only", 2, splits=("dev",))
    make_eval_set("empty", 0)
    assert split_counts(full) == {"train": 3, "dev": 2, "test": 2}
    assert split_counts(only_dev) == {"train": 0, "dev": 2, "test": 0}
    by_set = split_counts_by_set()
    assert by_set == {full.pk: {"train": 3, "dev": 2, "test": 2}, only_dev.pk: {"train": 0, "dev": 2, "test": 0}}


@pytest.mark.django_db
def test_eval_run_history_filters_and_orders_newest_first_queued_on_top():
    eval_set = make_eval_set("h", 3)
    old = make_eval_run(eval_set, [True], variant="", started=T0)
    new = make_eval_run(eval_set, [False], variant="v2", started=T0 + timedelta(hours=1), status="failed")
    queued = make_eval_run(eval_set, [True], variant="v2", started=T0)
    queued.started = None
    queued.status = EvalRunStatus.QUEUED
    queued.save()
    assert [r.pk for r in eval_run_history()] == [queued.pk, new.pk, old.pk]
    assert [r.pk for r in eval_run_history(variant="")] == [old.pk]  # "" means "no variant", not "any"
    assert [r.pk for r in eval_run_history(variant="v2", status="failed")] == [new.pk]
    assert list(eval_run_history(set_id=eval_set.pk + 1)) == []
    with pytest.raises(InvalidInputError, match="unknown status 'done'") as caught:
        eval_run_history(status="done")
    assert caught.value.field == "status"


@pytest.mark.django_db
def test_filter_results_by_status_and_case_search():
    eval_set = make_eval_set("r", 6)
    eval_run = make_eval_run(eval_set, [True, False, "errored", True], case_ids=["a1", "a2", "b1", "b2"])
    rows = EvalResult.objects.filter(eval_run=eval_run)
    assert sorted(r.case_id for r in filter_results(rows, status="passed")) == ["a1", "b2"]
    assert sorted(r.case_id for r in filter_results(rows, search="B")) == ["b1", "b2"]
    assert [r.case_id for r in filter_results(rows, status="errored", search="b")] == ["b1"]
    assert filter_results(rows).count() == 4
    with pytest.raises(InvalidInputError, match="unknown status 'ok'"):
        filter_results(rows, status="ok")


@pytest.mark.django_db
def test_comparable_check_is_shared_by_the_form():
    one, other = make_eval_set("one", 3), make_eval_set("other", 3)
    a, b = make_eval_run(one, [True]), make_eval_run(one, [False])
    stranger = make_eval_run(other, [True])
    check_comparable(a, b)
    with pytest.raises(CompareError, match="two different runs"):
        check_comparable(a, a)
    with pytest.raises(CompareError, match="only runs of the same set") as caught:
        check_comparable(a, stranger)
    assert caught.value.field == "b"
    form = CompareForm({"a": a.pk, "b": stranger.pk})
    assert not form.is_valid()
    assert form.non_field_errors() == [str(caught.value)]


@pytest.mark.django_db
def test_suggested_partner_prefers_the_same_targets_earlier_run():
    eval_set = make_eval_set("p", 3)
    earlier_same = make_eval_run(eval_set, [True], target_id="t", started=T0)
    make_eval_run(eval_set, [True], target_id="other", started=T0 + timedelta(hours=1))
    run = make_eval_run(eval_set, [True], target_id="t", started=T0 + timedelta(hours=2))
    later_same = make_eval_run(eval_set, [True], target_id="t", started=T0 + timedelta(hours=3))
    assert suggested_partner(run) == earlier_same
    # the first run of a target has no earlier one: any other run of the set, newest first
    assert suggested_partner(earlier_same) == later_same
    alone = make_eval_run(make_eval_set("alone", 1), [True])
    assert suggested_partner(alone) is None


def _split_summary(**rates: float) -> dict:
    return {"splits": {name: {"n": 10, "pass_rate": rate} for name, rate in rates.items()}}


@pytest.mark.django_db
def test_splits_figures_gap_is_train_minus_test_of_the_latest_values():
    eval_set = make_eval_set("g", 3)
    make_eval_run(eval_set, [True], target_id="t", variant="v", started=T0, summary=_split_summary(train=0.9, test=0.6))
    make_eval_run(
        eval_set, [True], target_id="t", variant="v", started=T0 + timedelta(hours=1), summary=_split_summary(dev=0.5)
    )
    make_eval_run(
        eval_set, [True], target_id="t", variant="v", started=T0 + timedelta(hours=2), summary=_split_summary(test=0.8)
    )
    make_eval_run(eval_set, [True], target_id="t", variant="other", started=T0, summary=_split_summary(train=0.1))
    figures = splits_figures(eval_set, "t", "v")
    assert [row["gap"] for row in figures.rows] == [pytest.approx(0.3), None, None]
    assert [row["dev"] for row in figures.rows] == [None, 0.5, None]
    # the gap series: at each run that moved train or test, latest train minus latest test
    assert [p.value for p in figures.gap.points] == [pytest.approx(0.3), pytest.approx(0.1)]
    assert [s.name for s in figures.lines] == ["train", "dev", "test"]
    assert overfit_gap(0.7, None) is None and overfit_gap(0.7, 0.75) == pytest.approx(-0.05)


@pytest.mark.django_db
def test_trend_series_per_variant_with_the_split_filter():
    eval_set = make_eval_set("tr", 3)
    make_eval_run(eval_set, [True, True], variant="a", split="dev", started=T0)
    make_eval_run(eval_set, [True, False], variant="a", split="test", started=T0 + timedelta(hours=1))
    make_eval_run(
        eval_set, [False, False], variant="b", split="dev", started=T0, summary={"metrics": {"sim": {"mean": 0.25}}}
    )
    make_eval_run(eval_set, [True], variant="b", split="dev", started=T0, status="running")  # live: not a figure
    series, names = trend_series(eval_set, "pass_rate")
    assert {s.name: [p.value for p in s.points] for s in series} == {"echo/a": [1.0, 0.5], "echo/b": [0.0]}
    assert names == ["pass_rate", "sim"]
    dev_only, _ = trend_series(eval_set, "pass_rate", "dev")
    assert {s.name: [p.value for p in s.points] for s in dev_only} == {"echo/a": [1.0], "echo/b": [0.0]}
    scored, _ = trend_series(eval_set, "sim")
    assert {s.name: [p.value for p in s.points] for s in scored} == {"echo/b": [0.25]}


@pytest.mark.django_db
def test_latest_target_variant_is_the_newest_finished_runs():
    eval_set = make_eval_set("lt", 3)
    assert latest_target_variant(eval_set) is None
    make_eval_run(eval_set, [True], target_id="old", variant="a", started=T0)
    make_eval_run(eval_set, [True], target_id="new", variant="b", started=T0 + timedelta(hours=2))
    make_eval_run(eval_set, [True], target_id="mid", variant="c", started=T0 + timedelta(hours=1))
    running = make_eval_run(eval_set, [True], target_id="live", variant="d", started=T0 + timedelta(hours=3))
    running.status = EvalRunStatus.RUNNING
    running.save()
    make_eval_run(make_eval_set("elsewhere", 1), [True], target_id="other", started=T0 + timedelta(hours=4))
    assert latest_target_variant(eval_set) == ("new", "b")
    # same start: the larger key decides, so the answer does not change between page loads
    tie = make_eval_run(eval_set, [True], target_id="tie", variant="", started=T0 + timedelta(hours=2))
    new = EvalRun.objects.get(eval_set=eval_set, target_id="new")
    assert latest_target_variant(eval_set) == (("tie", "") if tie.pk > new.pk else ("new", "b"))


@pytest.mark.django_db
def test_latest_results_are_the_newest_with_their_runs_in_one_query(django_assert_num_queries):
    eval_run = make_eval_run(make_eval_set("live", 4), [True, False, True], case_ids=["a", "b", "c"])
    with django_assert_num_queries(1):
        rows = latest_results(eval_run, 2)
        assert [(r.case_id, r.run.run_id) for r in rows] == [("c", f"{eval_run.id}:c"), ("b", f"{eval_run.id}:b")]
