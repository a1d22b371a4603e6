"""Pages a new user opens first (issue 11): trends and splits open on something that has runs,
no "-0%" labels, a favicon."""

from __future__ import annotations

import pytest

from apps.evals.charts.lines import points, tick_label
from apps.evals.templatetags.evals_tags import pct
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


def test_trends_opens_on_the_set_of_the_latest_run(client, viewer):
    make_eval_set("empty-first", 3)  # the first set has no runs
    used = make_eval_set("used", 4)
    make_eval_run(used, [True, False, True, True], target_id="echo", variant="v1")
    client.force_login(viewer)
    body = client.get("/trends/").content.decode()
    assert "<h1>Trends: used</h1>" in body
    assert f'<option value="{used.pk}" selected>used</option>' in body
    assert "1 run so far: echo/v1 75%" in body and "No sets yet" not in body  # one run: a sentence, not a chart


def test_splits_opened_bare_shows_the_latest_target_and_variant(client, viewer):
    eval_set = make_eval_set("qa", 6)
    make_eval_run(eval_set, [True, True, False, True, True, False], target_id="echo", variant="v2")
    client.force_login(viewer)
    body = client.get(f"/sets/{eval_set.pk}/splits/").content.decode()
    assert "echo / v2" in body.split("</h1>")[0] and "pick a target" not in body
    assert "No finished runs of this target/variant" not in body


def test_no_negative_zero_labels():
    assert tick_label(-1e-12, percent=True) == "0%" and tick_label(-0.004, percent=True) == "0%"
    assert tick_label(-0.001, percent=False) == "0.00" and tick_label(0.5, percent=True) == "50%"
    assert pct(-1e-9) == "0.0%" and pct(-0.0) == "0.0%" and pct(0.625) == "62.5%"
    assert points(-1e-9) == "+0.0" and points(-0.021) == "-2.1" and points(0.021) == "+2.1"


def test_favicon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/evalsite/favicon.svg"
