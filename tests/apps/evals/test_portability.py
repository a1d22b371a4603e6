"""Behaviour that differs between SQLite and PostgreSQL unless spelled out: JSON text matching,
NULL ordering. Run on both (``scripts/test-postgres.sh`` for PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client
from django.urls import reverse

from apps.evals.models import EvalCase, EvalRun
from apps.evals.queries.results import run_results
from apps.evals.queries.runs import latest_runs
from apps.evals.queries.tags import has_tag
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

TAGS = {"c0": ["café"], "c1": ['say "hi"'], "c2": ["Odd", "x_y"], "c3": ["odd"], "c4": ["xay"]}


@pytest.fixture
def tagged():
    eval_set = make_eval_set("tagged", 5)
    for case_id, tags in TAGS.items():
        EvalCase.objects.filter(eval_set=eval_set, case_id=case_id).update(tags=tags)
    return eval_set


def tagged_ids(eval_set, tag: str) -> list[str]:
    rows = EvalCase.objects.filter(has_tag(tag), eval_set=eval_set).order_by("position")
    return list(rows.values_list("case_id", flat=True))


def test_tag_filter_matches_whole_tags_with_any_characters(tagged):
    assert tagged_ids(tagged, "café") == ["c0"]
    assert tagged_ids(tagged, 'say "hi"') == ["c1"]
    assert tagged_ids(tagged, "say") == []  # a whole tag, not a substring of one
    assert tagged_ids(tagged, "x_y") == ["c2"]  # "_" is not a LIKE wildcard here
    assert tagged_ids(tagged, "odd") == ["c2", "c3"]  # ASCII case-insensitive, as on SQLite


def test_tag_filter_on_the_page_the_api_and_the_admin(tagged, viewer, staff):
    client = Client()
    client.force_login(viewer)
    page = client.get(reverse("evals:set", args=[tagged.pk]), {"tag": "café"}).content.decode()
    assert ">c0<" in page and ">c3<" not in page
    api = client.get(f"/api/eval/sets/{tagged.pk}/cases", {"tag": "café"}).json()
    assert [c["case_id"] for c in api["items"]] == ["c0"]
    client.force_login(staff)
    admin = client.get(reverse("admin:evals_evalcase_changelist"), {"tag": "café"}).content.decode()
    assert ">c0<" in admin and ">c3<" not in admin


def test_results_without_a_score_sort_lowest_both_ways():
    eval_set = make_eval_set("scored", 3)
    eval_run = make_eval_run(eval_set, ["passed", "errored", "failed"], scores=[0.9, None, 0.1])
    ascending = run_results(eval_run, order="score").rows
    assert [r.case_id for r in ascending] == ["c1", "c2", "c0"]
    descending = run_results(eval_run, order="-score").rows
    assert [r.case_id for r in descending] == ["c0", "c2", "c1"]


def test_a_queued_run_is_listed_before_started_ones(viewer):
    eval_set = make_eval_set("queued", 2)
    old = make_eval_run(eval_set, [True], started=datetime(2026, 1, 1, tzinfo=UTC))
    new = make_eval_run(eval_set, [True], started=datetime(2026, 2, 1, tzinfo=UTC))
    queued = EvalRun.objects.create(eval_set=eval_set, target_id="echo", status="queued")
    assert [r.pk for r in latest_runs(eval_set.pk)] == [queued.pk, new.pk, old.pk]
    client = Client()
    client.force_login(viewer)
    listing = client.get(reverse("evals:eval_runs")).content.decode()
    assert listing.index(queued.pk) < listing.index(new.pk) < listing.index(old.pk)
