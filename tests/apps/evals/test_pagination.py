"""The API's page shape over a queryset or a list (:meth:`apps.evals.api.pagination.Pages.page_of`)."""

from __future__ import annotations

import pytest

from apps.evals.api.pagination import Pages
from apps.evals.models import EvalCase
from tests.apps.factories import make_eval_set


def test_a_list_pages_like_a_queryset():
    rows = list(range(7))
    assert Pages.page_of(rows, 2, 3) == {"items": [3, 4, 5], "page": 2, "page_size": 3, "total": 7, "pages": 3}
    assert Pages.page_of(rows, 3, 3)["items"] == [6]
    assert Pages.page_of(rows, 4, 3)["items"] == []  # past the end: empty, not an error
    assert Pages.page_of([], 1, 50) == {"items": [], "page": 1, "page_size": 50, "total": 0, "pages": 1}


@pytest.mark.django_db
def test_a_queryset_page_counts_unless_given_the_total():
    eval_set = make_eval_set(n_cases=5)
    cases = EvalCase.objects.filter(eval_set=eval_set).order_by("id")
    page = Pages.page_of(cases, 1, 2)
    assert [c.case_id for c in page["items"]] == ["c0", "c1"]
    assert (page["total"], page["pages"]) == (5, 3)
    assert Pages.page_of(cases, 1, 2, total=4)["pages"] == 2
