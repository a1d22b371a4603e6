"""Human reviews (issue 13, section 1): people grade results beside the judge; members write
their own reviews (history kept), viewers read them; the judge and each scorer are measured
against people's labels, and people against each other."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from django.contrib.auth.models import Group

from apps.evals.models import EvalResult, Review, ReviewRevision
from apps.evals.queries.reviews import human_labels, judge_vs_people, review_progress
from apps.evals.runs.reviews import save_review
from evalcore.errors import InvalidInputError
from tests.apps.factories import make_eval_run, make_eval_set
from tests.conftest import ensure_roles

pytestmark = pytest.mark.django_db


def url(run_id: str, case_id: str) -> str:
    return f"/api/eval/runs/{run_id}/cases/{case_id}/reviews"


def judged_scores(passed: bool, axes: dict[str, int]) -> list[dict]:
    """A result's scores as the rubric judge stores them (verdict, then 0..1 per axis)."""
    scores = [{"name": "rubric_judge", "value": passed, "passed": passed}]
    scores += [
        {"name": f"rubric_judge.{axis}", "value": value / 5, "passed": value >= 3} for axis, value in axes.items()
    ]
    return scores


@pytest.fixture
def run():
    return make_eval_run(make_eval_set(n_cases=6), [True, True, False, False, True, "errored"])


@pytest.fixture
def people(django_user_model):
    ensure_roles()
    member = Group.objects.get(name="member")
    users = [django_user_model.objects.create_user(f"rev{i}", password="x-pass-123") for i in range(3)]
    for user in users:
        user.groups.add(member)
    return users


def test_members_write_their_own_review_and_each_edit_keeps_the_state_it_replaces(client, member, run):
    client.force_login(member)
    created = client.post(
        url(run.pk, "c0"),
        {"verdict": "fail", "axis_scores": {"accuracy": 1}, "comment": " wrong year "},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["verdict"], body["axis_scores"], body["comment"], body["reviewer"]) == (
        "fail",
        {"accuracy": 1},
        "wrong year",
        "member",
    )
    assert body["revisions"] == 0

    edited = client.post(url(run.pk, "c0"), {"verdict": "pass"}, content_type="application/json")
    assert edited.status_code == 200 and edited.json()["id"] == body["id"]
    assert edited.json()["revisions"] == 1 and edited.json()["axis_scores"] == {}
    (old,) = ReviewRevision.objects.filter(review_id=body["id"])
    assert (old.verdict, old.axis_scores, old.comment) == ("fail", {"accuracy": 1}, "wrong year")

    # posting the same again changes nothing and adds no history
    same = client.post(url(run.pk, "c0"), {"verdict": "pass"}, content_type="application/json")
    assert same.status_code == 200 and ReviewRevision.objects.filter(review_id=body["id"]).count() == 1

    listed = client.get(url(run.pk, "c0")).json()
    assert [r["verdict"] for r in listed["items"]] == ["pass"] and listed["items"][0]["revisions"] == 1


def test_viewers_read_reviews_but_cannot_write(client, member, viewer, run):
    result = EvalResult.objects.get(eval_run=run, case_id="c1")
    save_review(result, member, verdict="pass")
    client.force_login(viewer)
    refused = client.post(url(run.pk, "c1"), {"verdict": "fail"}, content_type="application/json")
    assert refused.status_code == 403 and "review" in refused.json()["message"]
    assert [r["reviewer"] for r in client.get(url(run.pk, "c1")).json()["items"]] == ["member"]
    client.logout()
    assert client.get(url(run.pk, "c1")).status_code == 401


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"verdict": "maybe"}, "verdict"),
        ({"verdict": "pass", "axis_scores": {"tone": 3}}, "axis_scores.tone"),
        ({"verdict": "pass", "axis_scores": {"accuracy": 6}}, "axis_scores.accuracy"),
        ({"verdict": "pass", "axis_scores": {"accuracy": 2.5}}, "axis_scores.accuracy"),
        ({"verdict": "pass", "axis_scores": {"accuracy": True}}, "axis_scores.accuracy"),
        ({"verdict": "pass", "comment": "x" * 10_001}, "comment"),
    ],
)
def test_bad_reviews_are_refused_naming_the_field_and_nothing_is_written(client, member, run, body, field):
    client.force_login(member)
    answer = client.post(url(run.pk, "c0"), body, content_type="application/json")
    assert answer.status_code == 400 and answer.json()["field"] == field, answer.content
    assert not Review.objects.exists()


def test_unknown_case_or_repeat_is_404(client, member, run):
    client.force_login(member)
    assert client.post(url(run.pk, "nope"), {"verdict": "pass"}, content_type="application/json").status_code == 404
    assert (
        client.post(url(run.pk, "c0"), {"verdict": "pass", "repeat": 3}, content_type="application/json").status_code
        == 404
    )
    assert client.get(url("missing-run", "c0")).status_code == 404


def test_case_ids_with_slashes_reach_their_result(client, member):
    run = make_eval_run(make_eval_set("slashes", n_cases=1), [True], case_ids=["gsm8k/test/7"])
    client.force_login(member)
    answer = client.post(url(run.pk, "gsm8k/test/7"), {"verdict": "unsure"}, content_type="application/json")
    assert answer.status_code == 201 and answer.json()["case_id"] == "gsm8k/test/7"


def test_human_label_is_the_majority_of_pass_and_fail_votes(run, people):
    a, b, c = people
    results = {r.case_id: r for r in EvalResult.objects.filter(eval_run=run)}
    for user, verdict in ((a, "pass"), (b, "pass"), (c, "fail")):
        save_review(results["c0"], user, verdict=verdict)
    for user, verdict in ((a, "pass"), (b, "fail")):  # a tie: no label
        save_review(results["c1"], user, verdict=verdict)
    save_review(results["c2"], a, verdict="unsure")  # unsure does not vote
    save_review(results["c3"], a, verdict="fail")
    labels = {EvalResult.objects.get(pk=pk).case_id: label for pk, label in human_labels(run).items()}
    assert labels == {"c0": True, "c3": False}
    assert review_progress(run).reviewed == 4 and review_progress(run).total == 6


def test_judge_vs_people_gives_accuracy_kappa_disagreements_and_axis_gaps(run, people):
    a = people[0]
    results = {r.case_id: r for r in EvalResult.objects.filter(eval_run=run)}
    # the judge passes c0, c1, c4 and fails c2, c3; people agree except on c1 (they fail it)
    judge = {"c0": True, "c1": True, "c2": False, "c3": False, "c4": True}
    for case_id, passed in judge.items():
        EvalResult.objects.filter(pk=results[case_id].pk).update(
            scores=judged_scores(passed, {"accuracy": 5 if passed else 1}),
        )
    human = {"c0": "pass", "c1": "fail", "c2": "fail", "c3": "fail", "c4": "pass"}
    for case_id, verdict in human.items():
        save_review(results[case_id], a, verdict=verdict, axis_scores={"accuracy": 4 if verdict == "pass" else 2})
    found = judge_vs_people(run)
    by_name = {s.name: s for s in found.scorers}
    judge_row = by_name["rubric_judge"]
    assert judge_row.figures.n == 5 and judge_row.figures.accuracy == pytest.approx(0.8)
    # p_o = 0.8; judge yes 3/5, people yes 2/5: p_e = 0.6*0.4 + 0.4*0.6 = 0.48; kappa = 0.32/0.52
    assert judge_row.figures.cohen_kappa == pytest.approx(0.32 / 0.52)
    assert [(d.case_id, d.scorer_passed, d.human_passed) for d in judge_row.disagreements] == [("c1", True, False)]
    assert (judge_row.figures.confusion.fp, judge_row.figures.confusion.tp) == (1, 2)
    # the overall verdict row comes first: the factory's verdicts are c0, c1, c4 passed
    assert found.scorers[0].name == "verdict" and found.scorers[0].figures.n == 5
    (accuracy,) = found.axes
    # judge 5 vs person 4 on passed cases (c0, c4), 5 vs 2 on c1, 1 vs 2 on c2, c3
    assert accuracy.axis == "accuracy" and accuracy.n == 5
    assert accuracy.mean_abs_diff == pytest.approx((1 + 3 + 1 + 1 + 1) / 5)
    assert accuracy.within_one == pytest.approx(4 / 5)
    assert found.alpha is None and found.multi_rated == 0  # one reviewer: no inter-rater figure


def test_krippendorff_alpha_among_reviewers(run, people):
    a, b, c = people
    results = [r for r in EvalResult.objects.filter(eval_run=run).order_by("case_id")][:4]
    for result in results:  # a and b always agree
        save_review(result, a, verdict="pass" if result.passed else "fail")
        save_review(result, b, verdict="pass" if result.passed else "fail")
    assert judge_vs_people(run).alpha == pytest.approx(1.0)
    save_review(results[0], c, verdict="fail")  # c disagrees on a passed case
    found = judge_vs_people(run)
    assert found.multi_rated == 4 and found.alpha is not None and found.alpha < 1.0


def test_agreement_api(client, member, run):
    result = EvalResult.objects.get(eval_run=run, case_id="c2")
    save_review(result, member, verdict="pass")  # the run failed c2
    client.force_login(member)
    body = client.get(f"/api/eval/runs/{run.pk}/reviews/agreement").json()
    assert (body["reviewed"], body["total"], body["labelled"]) == (1, 6, 1)
    verdict = body["scorers"][0]
    assert verdict["name"] == "verdict" and verdict["accuracy"] == 0.0
    assert verdict["disagreements"] == [
        {
            "result_id": result.pk,
            "eval_run_id": run.pk,
            "case_id": "c2",
            "repeat_index": 0,
            "scorer_passed": False,
            "human_passed": True,
        }
    ]


def test_check_review_is_the_one_validation():
    with pytest.raises(InvalidInputError) as caught:
        save_review(None, None, verdict="pass", axis_scores=[1, 2])  # type: ignore[arg-type]
    assert caught.value.field == "axis_scores"


# -- reviews without a verdict -----------------------------------------------------------------


def test_a_comment_alone_or_axis_scores_alone_are_reviews(client, member, run):
    client.force_login(member)
    noted = client.post(url(run.pk, "c0"), {"comment": "input looks truncated"}, content_type="application/json")
    assert noted.status_code == 201, noted.content
    assert (noted.json()["verdict"], noted.json()["comment"]) == (None, "input looks truncated")
    scored = client.post(
        url(run.pk, "c1"), {"axis_scores": {"grounding": 2}, "verdict": None}, content_type="application/json"
    )
    assert scored.status_code == 201 and scored.json()["axis_scores"] == {"grounding": 2}
    assert Review.objects.get(case_id="c1").verdict == ""
    # a verdict added later, then taken away again: each edit keeps the state it replaces
    client.post(
        url(run.pk, "c0"), {"verdict": "fail", "comment": "input looks truncated"}, content_type="application/json"
    )
    dropped = client.post(
        url(run.pk, "c0"), {"verdict": "", "comment": "input looks truncated"}, content_type="application/json"
    )
    assert dropped.status_code == 200 and dropped.json()["verdict"] is None and dropped.json()["revisions"] == 2
    assert [r["verdict"] for r in client.get(url(run.pk, "c0")).json()["items"]] == [None]


@pytest.mark.parametrize("body", [{}, {"comment": "   "}, {"verdict": None, "axis_scores": {}}, {"verdict": ""}])
def test_an_empty_review_is_refused(client, member, run, body):
    client.force_login(member)
    answer = client.post(url(run.pk, "c0"), body, content_type="application/json")
    assert answer.status_code == 400 and answer.json()["field"] == "verdict", answer.content
    assert "a verdict, an axis score or a comment" in answer.json()["message"]
    assert not Review.objects.exists()


def test_reviews_without_a_verdict_count_in_no_verdict_figure(run, people):
    a, b, c = people
    results = {r.case_id: r for r in EvalResult.objects.filter(eval_run=run)}
    EvalResult.objects.filter(pk=results["c0"].pk).update(scores=judged_scores(True, {"accuracy": 5}))
    save_review(results["c0"], a, verdict="pass")
    save_review(results["c0"], b, comment="looks right but I did not check the sources")  # no vote
    save_review(results["c0"], c, axis_scores={"accuracy": 3})  # no vote; its axis score counts
    save_review(results["c1"], a, comment="skip: duplicate of c0")
    assert {EvalResult.objects.get(pk=pk).case_id for pk in human_labels(run)} == {"c0"}
    found = judge_vs_people(run)
    assert found.labelled == 1 and [s.figures.n for s in found.scorers] == [1, 1, 1]
    assert found.multi_rated == 0 and found.alpha is None  # one verdict per result: no inter-rater figure
    (accuracy,) = found.axes
    assert accuracy.n == 1 and accuracy.mean_abs_diff == 2  # judge 5 vs c's 3
    # two verdicts on one result make it multi-rated; the comment-only review still does not vote
    save_review(results["c0"], b, verdict="fail", comment="sources contradict it")
    again = judge_vs_people(run)
    assert again.multi_rated == 1 and again.alpha is not None and again.labelled == 0  # a 1-1 tie
    assert review_progress(run).reviewed == 2  # a comment alone still marks a result reviewed


def test_an_export_shows_a_review_without_a_verdict_as_null(client, member, run):
    save_review(EvalResult.objects.get(eval_run=run, case_id="c0"), member, comment="note")
    client.force_login(member)
    data = b"".join(client.get(f"/api/eval/runs/{run.pk}/export").streaming_content).decode()
    c0 = next(json.loads(line) for line in data.splitlines() if json.loads(line)["id"] == "c0")
    assert c0["evalsite"]["reviews"][0]["verdict"] is None and c0["evalsite"]["human_label"] is None


# -- case ids that need encoding ---------------------------------------------------------------

ODD_IDS = [
    "gsm8k/test/7",
    "what is 2+2?",
    "x#1",
    "100% sure",
    "line one\nline two",
    "/lead/",
    "a//b",
    "%2F",
    "tab\there",
]


def test_case_ids_with_reserved_characters_reach_their_result_when_percent_encoded(client, member):
    run = make_eval_run(make_eval_set("odd", n_cases=len(ODD_IDS)), [True] * len(ODD_IDS), case_ids=ODD_IDS)
    client.force_login(member)
    for case_id in ODD_IDS:
        path = url(run.pk, quote(case_id, safe=""))
        answer = client.post(path, {"verdict": "unsure", "comment": case_id}, content_type="application/json")
        assert answer.status_code == 201 and answer.json()["case_id"] == case_id, (case_id, answer.content)
        (listed,) = client.get(path).json()["items"]
        assert listed["comment"] == case_id.strip()
    assert Review.objects.count() == len(ODD_IDS)
    # a raw slash works as well as an encoded one; an id that is not in the run is a 404
    assert client.get(url(run.pk, "gsm8k/test/7")).json()["items"][0]["case_id"] == "gsm8k/test/7"
    assert client.get(url(run.pk, quote("line one", safe=""))).status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"verdict": "pass", "comment": "fine\u0000"}, "comment"),
        ({"verdict": "pass", "axis_scores": {"accu\u0000racy": 3}}, "axis_scores.accu\u0000racy"),
    ],
)
def test_text_holding_a_nul_character_is_refused_naming_the_field_on_every_database(client, member, run, body, field):
    """PostgreSQL cannot store U+0000 (the write was a 500 there) and SQLite can: the API refuses
    it on both, naming the field, as Django's forms do."""
    client.force_login(member)
    answer = client.post(url(run.pk, "c0"), body, content_type="application/json")
    assert answer.status_code == 422, answer.content
    assert answer.json()["field"] == field and "NUL character" in answer.json()["message"]
    assert not Review.objects.exists()
    listing = client.get("/api/eval/runs", {"status": "fin\u0000ished"})
    assert listing.status_code == 422 and listing.json()["field"] == "status", listing.content
