"""Comparisons and per-rule figures are cached while their runs do not change
(:func:`apps.evals.queries.cached.while_unchanged`)."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from apps.evals.models import EvalRunStatus
from apps.evals.queries.cached import while_unchanged
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def test_a_read_is_computed_once_while_its_runs_stay_the_same_and_again_when_one_moves_on():
    eval_set = make_eval_set()
    run_a = make_eval_run(eval_set, [True, False])
    run_b = make_eval_run(eval_set, [True, True])
    calls: list[int] = []

    def read() -> int:
        calls.append(1)
        return len(calls)

    assert while_unchanged("probe", (run_a, run_b), read) == 1
    assert while_unchanged("probe", (run_a, run_b), read) == 1
    run_b.n_done += 1
    assert while_unchanged("probe", (run_a, run_b), read) == 2
    run_b.status = EvalRunStatus.FAILED
    assert while_unchanged("probe", (run_a, run_b), read) == 3
    assert while_unchanged("other", (run_a, run_b), read) == 4
    assert while_unchanged("probe", (run_b, run_a), read) == 5
