"""The ledger's pages and API: a run's ledger (whole and as the run page's lazy block), the judge
cost line, a set's flakiness report, both judges side by side on the compare page; access."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from apps.evals.models import EvalResult, EvalRun, EvalSet
from apps.evals.queries.flakiness import flakiness, unstable_keys
from apps.evals.results.ledger import Invocation, record_invocations
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db
JUDGE_SPEC: dict[str, Any] = {
    "name": "rubric_judge",
    "args": {"judge_model": "m-judge", "prompt_version": "rubric-v2"},
    "version": "1",
}


def judged(run: EvalRun, verdicts: list[bool | None], spec: dict[str, Any]) -> None:
    """Give ``run``'s results a rubric judge verdict each (``None``: a judge error) and its spec."""
    EvalRun.objects.filter(pk=run.pk).update(scorer_specs=[spec])
    for result, verdict in zip(EvalResult.objects.filter(eval_run=run).order_by("case_id"), verdicts, strict=True):
        score = (
            {"name": "rubric_judge", "value": None, "passed": None, "error": "judge model error", "metadata": {}}
            if verdict is None
            else {"name": "rubric_judge", "value": verdict, "passed": verdict, "metadata": {}}
        )
        result.scores = [*result.scores, score]
        result.save(update_fields=["scores"])


@pytest.fixture
def runs() -> tuple[EvalSet, EvalRun, EvalRun]:
    qa = make_eval_set("qa", 4)
    a = make_eval_run(qa, [True, True, False, True])
    b = make_eval_run(qa, [True, False, False, True])  # an identical rerun: c1 flips
    judged(a, [True, True, False, None], JUDGE_SPEC)
    judged(b, [True, False, True, True], {**JUDGE_SPEC, "args": {**JUDGE_SPEC["args"], "rubric": "be strict"}})
    rows = [
        Invocation(kind="judge", scorer="rubric_judge", status="done", eval_run_id=a.pk, case_id=f"c{i}",
                   repeat_index=0, judge_model="m-judge", calls=1, tokens_in=40, tokens_out=20)
        for i in range(3)
    ]  # fmt: skip
    rows.append(
        Invocation(kind="judge", scorer="rubric_judge", status="errored", reason="judge unreachable: HTTP 503",
                   eval_run_id=a.pk, case_id="c3", repeat_index=0, judge_model="m-judge", calls=5)
    )  # fmt: skip
    assert record_invocations(rows) == 4
    assert record_invocations(rows) == 0  # written twice: stored once
    return qa, EvalRun.objects.get(pk=a.pk), EvalRun.objects.get(pk=b.pk)


def test_run_ledger_page_whole_and_as_the_run_pages_block(
    client: Client, viewer: User, runs: tuple[EvalSet, EvalRun, EvalRun]
) -> None:
    _, a, _ = runs
    client.force_login(viewer)
    url = reverse("evals:eval_run_ledger", args=[a.pk])
    assert url in client.get(reverse("evals:eval_run", args=[a.pk])).content.decode()
    page = client.get(url).content.decode()
    assert "<html" in page and "n=3/4" in page and "1 × errored: judge unreachable" in page
    assert 'id="judge-cost"' in page and "120 / 60" in page
    block = client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="ledger").content.decode()
    assert "<html" not in block and "n=3/4" in block
    assert client.get(reverse("evals:eval_run_ledger", args=["nope"])).status_code == 404
    assert client.post(url).status_code == 405


def test_ledger_pages_refuse_anonymous_and_outsiders(
    client: Client, outsider: User, runs: tuple[EvalSet, EvalRun, EvalRun]
) -> None:
    qa, a, _ = runs
    urls = [reverse("evals:eval_run_ledger", args=[a.pk]), reverse("evals:set_flakiness", args=[qa.pk])]
    assert all(client.get(u).status_code == 302 for u in urls)
    client.force_login(outsider)
    assert all(client.get(u).status_code == 403 for u in urls)


def test_flakiness_page_and_api(client: Client, viewer: User, runs: tuple[EvalSet, EvalRun, EvalRun]) -> None:
    qa, _, b = runs
    client.force_login(viewer)
    # the two runs' judge specs differ (b has a rubric): not identical reruns; exact_match alone
    # would group them, but the specs are the run's whole scorer list
    page = client.get(reverse("evals:set_flakiness", args=[qa.pk])).content.decode()
    assert "2 finished runs in 2 groups" in page and "Wilson" in page
    EvalRun.objects.filter(pk=b.pk).update(scorer_specs=[JUDGE_SPEC])
    data = client.get(f"/api/eval/sets/{qa.pk}/flakiness").json()
    rates = {r["score"]: r for r in data["rates"]}
    assert (data["groups"], rates["rubric_judge"]["flaky"], rates["rubric_judge"]["n"]) == (1, 2, 3)
    assert rates["exact_match"]["flaky"] == 1 and rates["exact_match"]["by_source"] == {"reruns": 1}
    assert [c["case_id"] for c in data["flaky_cases"]] == ["c1", "c2"]
    assert client.get(f"/api/eval/sets/{qa.pk}/flakiness?judge=other").json()["runs"] == 0
    assert client.get("/api/eval/sets/999/flakiness").status_code == 404


def test_ledger_api(client: Client, viewer: User, runs: tuple[EvalSet, EvalRun, EvalRun]) -> None:
    _, a, _ = runs
    client.force_login(viewer)
    rows = client.get(f"/api/eval/runs/{a.pk}/ledger?status=errored").json()
    assert [(r["case_id"], r["reason"]) for r in rows["items"]] == [("c3", "judge unreachable: HTTP 503")]
    summary = client.get(f"/api/eval/runs/{a.pk}/ledger/summary").json()
    judge = summary["scorers"][0]
    assert (summary["n_results"], judge["done"], judge["calls"]) == (4, 3, 8)
    assert judge["reasons"] == [{"status": "errored", "reason": "judge unreachable", "n": 1}]
    assert client.get(f"/api/eval/runs/{a.pk}/ledger?status=pending").status_code == 400
    assert client.get("/api/eval/runs/nope/ledger/summary").status_code == 404


def test_compare_shows_both_judges_side_by_side(
    client: Client, viewer: User, runs: tuple[EvalSet, EvalRun, EvalRun]
) -> None:
    _, a, b = runs
    client.force_login(viewer)
    url = reverse("evals:compare_judges")
    assert url in client.get(reverse("evals:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    block = client.get(url, {"a": a.pk, "b": b.pk}).content.decode()
    assert "be strict" in block and "n=3/4" in block and "n=4/4" in block
    assert "A passes only 1, B passes only 1" in block and 'id="compare-judge-cost"' in block
    assert client.get(url, {"a": a.pk, "b": "nope"}).status_code == 400


def test_the_set_page_links_its_flakiness_report(
    client: Client, viewer: User, runs: tuple[EvalSet, EvalRun, EvalRun]
) -> None:
    qa, _, _ = runs
    client.force_login(viewer)
    page = client.get(reverse("evals:set", args=[qa.pk])).content.decode()
    assert reverse("evals:set_flakiness", args=[qa.pk]) in page


def test_the_admin_lists_invocations_read_only(
    client: Client, staff: User, runs: tuple[EvalSet, EvalRun, EvalRun]
) -> None:
    client.force_login(staff)
    page = client.get("/admin/evals/scorerinvocation/?status__exact=errored")
    assert page.status_code == 200 and "judge unreachable: HTTP 503" in page.content.decode()
    assert client.get("/admin/evals/scorerinvocation/add/").status_code == 403
    assert client.get("/admin/evals/judgespecversion/").status_code == 200


def test_repeats_that_disagree_are_flaky_and_unstable(runs: tuple[EvalSet, EvalRun, EvalRun]) -> None:
    qa, a, _ = runs
    first = EvalResult.objects.get(eval_run=a, case_id="c0")
    flipped = [{**s, "value": False, "passed": False} if s["name"] == "rubric_judge" else s for s in first.scores]
    EvalResult.objects.create(
        eval_run=a, case_id="c0", repeat_index=1, split=first.split, run=first.run, scores=flipped,
        passed=False, status="failed",
    )  # fmt: skip
    report = flakiness(qa, eval_runs=[a])
    verdict = next(r for r in report.rates if r.score == "rubric_judge")
    assert (verdict.flaky, verdict.n, verdict.by_source) == (1, 1, {"repeats": 1})
    assert unstable_keys(a) == {("c0", 0), ("c0", 1)}
