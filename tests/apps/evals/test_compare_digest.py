"""The compare page from the runs' digests (issue 30, floor 5) gives the figures of the SQL join:
the 2x2 table, cases only in one run, distinct cases, the interval and verdict (repeats included),
and the same rows in the same order for every filter and page; a stored digest is used only
while the run is as it was built from (a resume's new result makes it stale), and a live run is
compared in SQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.evals.models import EvalResult, EvalRun, RunDigest
from apps.evals.queries.compare import COMPARE_ONLY, CompareView, compare_runs
from apps.evals.queries.compare_digest import forget_pairs, paired_digest
from apps.evals.results import digest as digests
from apps.evals.results.digest import DigestUnavailable, current_stamps, forget_kept, store_digest, stored_digest
from apps.evals.results.readback import finish_eval_run
from apps.traces.models import Run
from tests.apps.factories import make_eval_run, make_eval_set

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def fresh() -> None:
    forget_kept()
    forget_pairs()


def add_result(eval_run: EvalRun, case_id: str, repeat: int, status: str, score: float | None) -> EvalResult:
    run = Run.objects.create(run_id=f"{eval_run.pk}:{case_id}:{repeat}", trace_id="t", started=T0)
    return EvalResult.objects.create(
        eval_run=eval_run,
        case_id=case_id,
        repeat_index=repeat,
        run=run,
        scores=[],
        passed=status == "passed",
        status=status,
        score=score,
    )


def figures(view: CompareView) -> tuple[object, ...]:
    rows = [(r.case_id, r.repeat_index, r.kind, r.a.pk, r.b.pk, r.score_delta) for r in view.rows]
    return (
        view.counts,
        view.only_a,
        view.only_b,
        view.cases_in_both,
        view.interval,
        view.verdict,
        view.case_counts,
        view.total,
        view.num_pages,
        rows,
    )


def assert_same_as_sql(a: EvalRun, b: EvalRun, page_size: int) -> None:
    for only in (None, *COMPARE_ONLY):
        for page in (1, 2, 3, 99):
            digest = compare_runs(a, b, page=page, page_size=page_size, only=only)
            sql = compare_runs(a, b, page=page, page_size=page_size, only=only, digest=False)
            assert figures(digest) == figures(sql), (only, page)


@pytest.mark.django_db
def test_the_digest_gives_the_sql_figures_with_errored_unscored_and_one_sided_cases() -> None:
    eval_set = make_eval_set("digest-one", 40)
    outcomes_a = ["errored", "unscored"] + [i % 3 != 0 for i in range(38)]
    outcomes_b = ["passed", "unscored", "errored"] + [i % 4 != 0 for i in range(37)]
    scores_a = [None, 0.4] + [(i % 5) / 4 for i in range(38)]
    scores_b = [0.9, None, None] + [(i % 7) / 6 for i in range(37)]
    ids_a = [f"c{i}" for i in range(40)]
    ids_b = [f"c{i}" for i in range(3, 40)] + ["x1", "x2", "x3"]  # c0..c2 only in A, x1..x3 only in B
    a = make_eval_run(eval_set, outcomes_a, case_ids=ids_a, scores=scores_a)
    b = make_eval_run(eval_set, outcomes_b, case_ids=ids_b, scores=scores_b, variant="v2")
    view = compare_runs(a, b)
    assert (view.only_a, view.only_b, view.counts.n) == (3, 3, 37)
    assert all(r.kind != "improvement" or not r.a.passed for r in view.rows)  # an unscored case never passes
    assert_same_as_sql(a, b, page_size=7)


@pytest.mark.django_db
def test_the_digest_gives_the_sql_figures_with_repeats() -> None:
    eval_set = make_eval_set("digest-repeats", 0)
    a = make_eval_run(eval_set, [])
    b = make_eval_run(eval_set, [], variant="v2")
    for i in range(25):
        for repeat in range(3):
            add_result(a, f"k{i:02d}", repeat, "passed" if (i + repeat) % 3 else "failed", (i % 4) / 3)
            if not (i == 24 and repeat == 2):  # one repeat only in A
                status = ("passed", "failed", "errored", "unscored")[(i * repeat) % 4]
                add_result(b, f"k{i:02d}", repeat, status, None if status == "errored" else (repeat % 3) / 2)
    view = compare_runs(a, b)
    assert view.case_counts is not None and view.cases_in_both == 25 and view.only_a == 1
    assert_same_as_sql(a, b, page_size=11)


@pytest.mark.django_db
def test_a_stored_digest_serves_while_the_run_is_unchanged_and_a_resume_makes_it_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(digests, "STORE_FROM", 0)
    eval_set = make_eval_set("digest-stale", 12)
    a = make_eval_run(eval_set, [True] * 12)
    b = make_eval_run(eval_set, [True] * 6 + [False] * 6, variant="v2")
    store_digest(a.pk)
    (stamp,) = current_stamps(a)
    assert RunDigest.objects.filter(eval_run=a).exists() and stored_digest(a, stamp) is not None
    assert compare_runs(a, b).counts.a_only == 6

    # a resume: the run is live (compared in SQL), then one more result, then it ends again
    EvalRun.objects.filter(pk=b.pk).update(status="running")
    b.refresh_from_db()
    with pytest.raises(DigestUnavailable):
        paired_digest(a, b)
    add_result(b, "c11", 1, "passed", 1.0)
    add_result(a, "c11", 1, "failed", 0.0)
    EvalRun.objects.filter(pk__in=[a.pk, b.pk]).update(status="finished", n_done=13)
    a.refresh_from_db()
    b.refresh_from_db()
    (stamp,) = current_stamps(a)
    assert stored_digest(a, stamp) is None  # stale: built before the new result
    view = compare_runs(a, b)
    assert (view.counts.n, view.counts.b_only) == (13, 1)
    assert figures(view) == figures(compare_runs(a, b, digest=False))


@pytest.mark.django_db(transaction=True)
def test_finishing_a_run_stores_its_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(digests, "STORE_FROM", 0)
    eval_set = make_eval_set("digest-finish", 5)
    a = make_eval_run(eval_set, [True, False, True, "errored", "unscored"], status="running")
    finish_eval_run(a.pk, None)
    a.refresh_from_db()
    (stamp,) = current_stamps(a)
    stored = stored_digest(a, stamp)
    assert stored is not None and len(stored) == 5
    assert stored.passed.tolist() == [True, False, True, False, False]  # c0..c4: unscored and errored never pass
