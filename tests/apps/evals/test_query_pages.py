"""The evals read side (queries): a run's result table and the A/B comparison, read back
exactly through the run page and the API (whatever module computes them)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps.evals.models import EvalResult, EvalRun
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "results"}


def case_order(client, run: EvalRun, **params) -> list[str]:
    """Case ids of the run page's result table, in row order."""
    body = client.get(reverse("evals:eval_run", args=[run.pk]), params, **HX).content.decode()
    return re.findall(r'id="result-\d+".*?>(c\d+)<', body, re.S)


@pytest.fixture
def scored(viewer, client):
    """c0..c4: scores 0.9, 0.1, none (errored), 0.5, 0.3 (mean with the verdict)."""
    eval_set = make_eval_set("table", 5)
    run = make_eval_run(eval_set, [True, False, "errored", True, False], scores=[0.9, 0.1, None, 0.5, 0.3])
    client.force_login(viewer)
    return run


def test_result_table_orders(client, scored):
    assert case_order(client, scored) == ["c0", "c1", "c2", "c3", "c4"]
    # mean of the verdict (0/1) and the similarity: c0 0.95, c3 0.75, c4 0.15, c1 0.05, c2 none
    assert case_order(client, scored, order="-score") == ["c0", "c3", "c4", "c1", "c2"]
    assert case_order(client, scored, order="score") == ["c2", "c1", "c4", "c3", "c0"]
    EvalResult.objects.filter(eval_run=scored, case_id="c3").update(case_id="c9")
    assert case_order(client, scored, order="case") == ["c0", "c1", "c2", "c4", "c9"]


def test_result_table_filters(client, scored):
    assert case_order(client, scored, status="failed") == ["c1", "c4"]
    assert case_order(client, scored, status="errored") == ["c2"]
    assert case_order(client, scored, q="C3") == ["c3"]
    assert case_order(client, scored, status="passed", q="c0") == ["c0"]


def test_result_table_pages_of_fifty(client, viewer):
    eval_set = make_eval_set("long", 1)
    run = make_eval_run(eval_set, [True] * 51 + [False] * 4, case_ids=[f"c{i}" for i in range(55)])
    client.force_login(viewer)
    first = case_order(client, run)
    assert first == [f"c{i}" for i in range(50)]
    assert case_order(client, run, page=2) == [f"c{i}" for i in range(50, 55)]
    assert case_order(client, run, page=9) == [f"c{i}" for i in range(50, 55)]  # clamped to the last
    assert case_order(client, run, status="failed", page=2) == ["c51", "c52", "c53", "c54"]  # one page only
    body = client.get(reverse("evals:eval_run", args=[run.pk]), {"status": "passed"}, **HX).content.decode()
    assert "page 1 of 2" in body and "51 cases · 50 per page" in body
    failed = client.get(reverse("evals:eval_run", args=[run.pk]), {"status": "failed"}, **HX).content.decode()
    assert "4 cases" in failed and "page 1 of 1" in failed


# -- comparison through the API -----------------------------------------------------------------


@pytest.fixture
def pair(viewer, client):
    """A: c0 pass, c1 pass, c2 fail, c3 fail, c4 pass, c5 pass (only in A).
    B: c0 fail (regression), c1 pass, c2 pass (improvement), c3 fail, c4 fail (regression)."""
    eval_set = make_eval_set("pair", 6)
    a = make_eval_run(eval_set, [True, True, False, False, True, True], scores=[0.9, 0.8, 0.2, 0.3, 0.6, 0.5])
    b = make_eval_run(eval_set, [False, True, True, False, False], variant="v2", scores=[0.1, 0.7, 0.9, 0.3, 0.5])
    client.force_login(viewer)
    return a, b


def compare(client, a, b, **params) -> dict:
    response = client.get("/api/eval/compare", {"a": a.pk, "b": b.pk, **params})
    assert response.status_code == 200, response.content
    return response.json()


def test_compare_counts_and_row_order(client, pair):
    a, b = pair
    data = compare(client, a, b)
    assert data["counts"] == {
        "both": 1,
        "a_only": 2,
        "b_only": 1,
        "neither": 1,
        "n": 5,
        "pass_rate_a": 0.6,
        "pass_rate_b": 0.4,
        "delta": pytest.approx(-0.2),
    }
    assert (data["only_a"], data["only_b"]) == (1, 0)
    # regressions (largest score change first), improvements, then the rest
    assert [(i["case_id"], i["kind"]) for i in data["items"]] == [
        ("c0", "regression"),
        ("c4", "regression"),
        ("c2", "improvement"),
        ("c1", "same"),
        ("c3", "same"),
    ]
    first = data["items"][0]
    assert first["score_delta"] == pytest.approx(0.05 - 0.95)
    assert (first["a"]["status"], first["b"]["status"], first["a"]["passed"]) == ("passed", "failed", True)
    assert (data["total"], data["pages"], data["page"], data["only"]) == (5, 1, 1, None)
    # 5 pairs: below the minimum n, a null interval with its reason and no verdict
    assert data["pass_rate_interval"] is None
    assert data["pass_rate_interval_reason"] == "too few cases (n=5; an interval needs at least 10)"
    assert data["verdict"]["outcome"] == "too_few_cases" and data["scorer_deltas"] is None


@pytest.mark.parametrize(
    ("only", "cases"),
    [("flips", ["c0", "c4", "c2"]), ("regressions", ["c0", "c4"]), ("improvements", ["c2"]), ("same", ["c1", "c3"])],
)
def test_compare_filters(client, pair, only, cases):
    data = compare(client, *pair, only=only)
    assert [i["case_id"] for i in data["items"]] == cases
    assert (data["total"], data["only"]) == (len(cases), only)


def test_compare_pages(client, pair):
    page2 = compare(client, *pair, page_size=2, page=2)
    assert [i["case_id"] for i in page2["items"]] == ["c2", "c1"]
    assert (page2["total"], page2["pages"], page2["page"], page2["page_size"]) == (5, 3, 2, 2)
    last = compare(client, *pair, page_size=2, page=3)
    assert [i["case_id"] for i in last["items"]] == ["c3"] and last["page"] == 3
    past = compare(client, *pair, page_size=2, page=7)  # docs/api.md: a page past the end is empty
    assert past["items"] == [] and past["page"] == 7 and past["pages"] == 3


def test_compare_scorer_deltas(client, pair):
    deltas = {d["name"]: d for d in compare(client, *pair, scorers="true")["scorer_deltas"]}
    assert list(deltas) == ["exact_match", "similarity"]
    em = deltas["exact_match"]
    assert (em["n"], em["mean_a"], em["mean_b"]) == (5, 0.6, 0.4) and em["delta"] == pytest.approx(-0.2)
    sim = deltas["similarity"]
    assert sim["n"] == 5 and sim["mean_a"] == pytest.approx(0.56) and sim["mean_b"] == pytest.approx(0.5)
    assert sim["delta"] == pytest.approx(-0.06) and sim["interval"] is None  # 5 pairs: too few
    assert sim["interval_reason"] == "too few cases (n=5; an interval needs at least 10)"
    assert sim["significant"] is False


def test_compare_refusals_name_the_reason(client, pair):
    a, _ = pair
    same = client.get("/api/eval/compare", {"a": a.pk, "b": a.pk})
    assert same.status_code == 400 and same.json()["message"] == "pick two different runs to compare"
    other = make_eval_run(make_eval_set("elsewhere", 1), [True])
    response = client.get("/api/eval/compare", {"a": a.pk, "b": other.pk})
    assert response.status_code == 400
    assert response.json()["message"] == (
        f"run {a.pk} is on set “pair” and run {other.pk} on set “elsewhere”: "
        "only runs of the same set can be compared case by case"
    )


def test_compare_with_no_shared_cases(client, viewer):
    eval_set = make_eval_set("disjoint", 4)
    a = make_eval_run(eval_set, [True, False], case_ids=["c0", "c1"])
    b = make_eval_run(eval_set, [True], case_ids=["c3"], variant="v2")
    client.force_login(viewer)
    data = compare(client, a, b)
    assert data["counts"]["n"] == 0 and (data["only_a"], data["only_b"]) == (2, 1)
    assert data["verdict"]["outcome"] == "no_pairs" and data["pass_rate_interval"] is None
    assert data["items"] == [] and (data["total"], data["pages"]) == (0, 1)


def test_compare_picker_lists_newest_runs_of_the_set(client, pair):
    a, b = pair
    EvalRun.objects.filter(pk=a.pk).update(started=b.started.replace(year=2027))
    body = client.get(reverse("evals:compare"), {"set": a.eval_set_id}).content.decode()
    assert body.index(a.pk) < body.index(b.pk)


def test_result_pager_links_step_one_page(client, viewer):
    eval_set = make_eval_set("pages", 1)
    run = make_eval_run(eval_set, [True] * 120, case_ids=[f"c{i}" for i in range(120)])
    client.force_login(viewer)
    body = client.get(reverse("evals:eval_run", args=[run.pk]), {"page": 2}, **HX).content.decode()
    pager = body[body.index('<div class="pager">') :]
    assert re.findall(r'href="[^"]*\?page=(\d+)"', pager) == ["1", "3"]
    assert "page 2 of 3" in pager
    first = client.get(reverse("evals:eval_run", args=[run.pk]), **HX).content.decode()
    assert "← previous" not in first and "page 1 of 3" in first


def test_case_browser_finds_non_ascii_tags(client, viewer):
    from apps.evals.models import EvalCase

    eval_set = make_eval_set("tags", 3)
    EvalCase.objects.filter(eval_set=eval_set, case_id="c1").update(tags=["café", "ünï"])
    client.force_login(viewer)
    body = client.get(
        reverse("evals:set", args=[eval_set.pk]), {"tag": "café"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="cases"
    ).content.decode()
    assert re.findall(r">(c\d)<", body) == ["c1"]


def test_scorer_deltas_leave_out_scores_whose_scorer_failed(client, pair):
    a, b = pair
    # a failed scorer's score on c0 in A: its value (stored by an older writer) is not a measurement
    result = EvalResult.objects.get(eval_run=a, case_id="c0")
    result.scores = [*result.scores, {"name": "judge", "value": 1.0, "passed": None, "error": "timeout"}]
    result.save(update_fields=["scores"])
    other = EvalResult.objects.get(eval_run=b, case_id="c0")
    other.scores = [*other.scores, {"name": "judge", "value": 0.0, "passed": None, "error": None}]
    other.save(update_fields=["scores"])
    deltas = {d["name"] for d in compare(client, a, b, scorers="true")["scorer_deltas"]}
    assert deltas == {"exact_match", "similarity"}


def test_run_api_reports_the_highest_result_id(client, pair):
    a, _ = pair
    data = client.get(f"/api/eval/runs/{a.pk}").json()
    assert data["last_seq"] == EvalResult.objects.filter(eval_run=a).order_by("-id").first().id
    empty = make_eval_run(make_eval_set("none", 1), [])
    assert client.get(f"/api/eval/runs/{empty.pk}").json()["last_seq"] == 0


def test_scorer_deltas_are_cached_while_neither_run_changes(client, pair):
    a, b = pair
    before = compare(client, a, b, scorers="true")["scorer_deltas"]
    result = EvalResult.objects.get(eval_run=b, case_id="c1")
    result.scores = [{**s, "value": 0.0} if s["name"] == "similarity" else s for s in result.scores]
    result.save(update_fields=["scores"])
    assert compare(client, a, b, scorers="true")["scorer_deltas"] == before  # same n_done: cached
    EvalRun.objects.filter(pk=b.pk).update(n_done=b.n_done + 1)
    after = {d["name"]: d for d in compare(client, a, b, scorers="true")["scorer_deltas"]}
    assert after["similarity"]["mean_b"] == pytest.approx((0.1 + 0.0 + 0.9 + 0.3 + 0.5) / 5)


def test_scorer_deltas_skip_cases_of_one_run_only(client, viewer):
    eval_set = make_eval_set("skip", 3)
    a = make_eval_run(eval_set, [True, True, False], case_ids=["x", "c0", "c1"], scores=[0.5, 0.4, 0.2])
    b = make_eval_run(eval_set, [True, False], case_ids=["c0", "c1"], variant="v2", scores=[0.6, 0.6])
    client.force_login(viewer)
    deltas = {d["name"]: d for d in compare(client, a, b, scorers="true")["scorer_deltas"]}
    assert deltas["similarity"]["n"] == 2 and deltas["similarity"]["mean_a"] == pytest.approx(0.3)


def test_compare_picker_lists_every_set_or_one(client, viewer):
    first = make_eval_run(make_eval_set("one", 1), [True])
    second = make_eval_run(make_eval_set("two", 1), [True])
    twin = make_eval_run(make_eval_set("three", 1), [True])
    client.force_login(viewer)
    every = client.get(reverse("evals:compare")).content.decode()
    assert first.pk in every and second.pk in every
    only = client.get(reverse("evals:compare"), {"set": second.eval_set_id}).content.decode()
    assert second.pk in only and first.pk not in only
    # same start time: the higher id first
    listed = [pk for pk in re.findall(r"\b([0-9a-f]{16})\b", every) if pk in (first.pk, second.pk, twin.pk)]
    assert list(dict.fromkeys(listed)) == sorted({first.pk, second.pk, twin.pk}, reverse=True)


def test_an_unfiltered_finished_run_counts_from_its_counter(client, scored):
    """A finished run's own ``n_done`` is the total (no COUNT over 100k rows); a running run counts rows."""
    EvalRun.objects.filter(pk=scored.pk).update(n_done=7)
    url = reverse("evals:eval_run", args=[scored.pk])
    assert 'id="results-footer">7 cases</p>' in client.get(url, **HX).content.decode()
    assert 'id="results-footer">2 cases</p>' in client.get(url, {"status": "failed"}, **HX).content.decode()
    EvalRun.objects.filter(pk=scored.pk).update(status="interrupted")
    assert 'id="results-footer">5 cases</p>' in client.get(url, **HX).content.decode()
