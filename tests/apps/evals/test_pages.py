"""The evals pages: whole and as htmx partials, access rules, compare ordering and verdict, start a run."""

from __future__ import annotations

import re
import textwrap

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.evals.models import EvalRun
from apps.traces.models import Run
from tests.apps.factories import add_trace, make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}

SUMMARY = {
    "n": 4,
    "passed": 2,
    "failed": 1,
    "errored": 1,
    "pass_rate": 0.5,
    "metrics": {
        "exact_match": {"name": "exact_match", "n": 3, "total": 4, "errors": 1, "mean": 0.6667, "stderr": 0.333},
    },
    "splits": {
        "train": {"n": 2, "passed": 1, "failed": 1, "errored": 0, "pass_rate": 0.5, "metrics": {}},
        "test": {"n": 2, "passed": 1, "failed": 0, "errored": 1, "pass_rate": 0.5, "metrics": {}},
    },
}


@pytest.fixture
def runs():
    """A set with two runs: A passes c0, c1; B fails c0 (regression), passes c2 (improvement)."""
    eval_set = make_eval_set("qa", 5)
    a = make_eval_run(eval_set, [True, True, False, False, "errored"], variant="v1", summary=SUMMARY)
    b = make_eval_run(eval_set, [False, True, True, False], variant="v2", scores=[0.1, 0.9, 0.8, 0.2])
    return a, b


def page_urls(a: EvalRun, b: EvalRun) -> list[str]:
    result = a.results.order_by("id").first()
    return [
        reverse("evals:eval_runs"),
        reverse("evals:eval_run", args=[a.pk]),
        reverse("evals:result", args=[a.pk, result.pk]),
        reverse("evals:compare") + f"?a={a.pk}&b={b.pk}",
        reverse("evals:sets"),
        reverse("evals:set", args=[a.eval_set_id]),
        reverse("evals:splits", args=[a.eval_set_id]) + "?target=echo&variant=v1",
        reverse("evals:trends"),
        reverse("traces:list"),
        reverse("traces:detail", args=[result.run_id]),
    ]


def test_anonymous_is_sent_to_login(client, runs):
    for url in [*page_urls(*runs), reverse("evals:start_eval_run"), reverse("agents:playground")]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/"), url


def test_outsider_gets_403_everywhere(client, outsider, runs):
    client.force_login(outsider)
    for url in page_urls(*runs):
        assert client.get(url).status_code == 403, url


def test_viewer_sees_every_page_whole_and_as_partial(client, viewer, runs):
    client.force_login(viewer)
    for url in page_urls(*runs):
        whole = client.get(url)
        assert whole.status_code == 200, url
        assert b"<html" in whole.content and b'class="topnav"' in whole.content, url
        partial = client.get(url, **HX)
        assert partial.status_code == 200, url
        assert b"<html" not in partial.content and b"topnav" not in partial.content, url
        assert b"<h1>" in partial.content or b"<h1 " in partial.content, url


def test_viewer_cannot_start_runs_or_use_the_playground(client, viewer):
    client.force_login(viewer)
    assert client.get(reverse("evals:start_eval_run")).status_code == 403
    assert client.post(reverse("evals:start_eval_run"), {}).status_code == 403
    assert client.get(reverse("agents:playground")).status_code == 403


def test_bad_ids_are_404(client, viewer, runs):
    a, _ = runs
    client.force_login(viewer)
    assert client.get(reverse("evals:eval_run", args=["nope"])).status_code == 404
    assert client.get(reverse("evals:result", args=[a.pk, 999999])).status_code == 404
    assert client.get(reverse("evals:set", args=[999999])).status_code == 404
    assert client.get(reverse("traces:detail", args=[999999])).status_code == 404
    # a result of another run is not found under this run
    other = runs[1].results.first()
    assert client.get(reverse("evals:result", args=[a.pk, other.pk])).status_code == 404


def test_wrong_method_is_405(client, viewer, runs):
    a, _ = runs
    client.force_login(viewer)
    assert client.post(reverse("evals:eval_runs")).status_code == 405
    assert client.post(reverse("evals:eval_run", args=[a.pk])).status_code == 405
    assert client.delete(reverse("evals:compare")).status_code == 405


def test_runs_list_filters_and_columns(client, viewer, runs):
    a, b = runs
    client.force_login(viewer)
    body = client.get(reverse("evals:eval_runs"), {"variant": "v2"}).content.decode()
    assert b.pk in body and a.pk not in body
    assert "abc1234d" in body  # short git sha
    partial = client.get(reverse("evals:eval_runs"), {"status": "finished"}, HTTP_HX_TARGET="runs-table", **HX)
    assert b'id="runs-table"' not in partial.content and a.pk.encode() in partial.content
    # an invalid filter value is a form error, not a crash
    assert client.get(reverse("evals:eval_runs"), {"status": "bogus"}).status_code == 200


def test_picking_two_runs_on_the_list_opens_compare_with_older_as_baseline(client, viewer, runs):
    a, b = runs
    EvalRun.objects.filter(pk=b.pk).update(started=a.started.replace(year=2027))
    client.force_login(viewer)
    response = client.get(reverse("evals:compare"), {"pick": [b.pk, a.pk]})
    assert response.status_code == 302
    assert response["Location"].endswith(f"?a={a.pk}&b={b.pk}")
    one = client.get(reverse("evals:compare"), {"pick": [a.pk]})
    assert "tick exactly two runs" in one.content.decode()


def test_run_detail_summary_metrics_and_filters(client, viewer, runs):
    a, _ = runs
    client.force_login(viewer)
    body = client.get(reverse("evals:eval_run", args=[a.pk])).content.decode()
    assert 'id="run-summary"' in body
    assert "n=3/4" in body  # a scorer errored once
    # a summary stored before intervals, 3 values: no "± 33.3%" below 10 (tests/apps/evals/test_small_n_pages.py)
    assert '<td class="num">66.7% (too few cases)</td>' in body
    assert "ws-connect" not in body  # finished: no live socket
    failed = client.get(reverse("evals:eval_run", args=[a.pk]), {"status": "failed"}, HTTP_HX_TARGET="results", **HX)
    text = failed.content.decode()
    assert ">c2<" in text and ">c3<" in text and ">c0<" not in text
    assert 'id="results-body"' in text
    searched = client.get(reverse("evals:eval_run", args=[a.pk]), {"q": "c4"}, HTTP_HX_TARGET="results", **HX)
    assert ">c4<" in searched.content.decode() and ">c1<" not in searched.content.decode()


def test_running_run_opens_a_websocket_after_the_last_rendered_result(client, viewer, runs):
    a, _ = runs
    # a live run: its executor's heartbeat is fresh (a sweep would leave it running; a read never marks)
    EvalRun.objects.filter(pk=a.pk).update(status="running", heartbeat_at=timezone.now())
    client.force_login(viewer)
    body = client.get(reverse("evals:eval_run", args=[a.pk])).content.decode()
    last = a.results.order_by("-id").first().id
    assert f'ws-connect="/ws/eval/runs/{a.pk}/?after={last}"' in body
    assert 'hx-ext="ws"' in body


def test_live_partials_render_with_the_documented_context(runs):
    from django.template.loader import render_to_string

    a, _ = runs
    result = a.results.select_related("run").first()
    row = render_to_string("evals/run_detail.html#result_row", {"result": result, "eval_run": a})
    assert row.strip().startswith("<tr") or f'id="result-{result.id}"' in row
    assert f'id="result-{result.id}"' in row
    latest = render_to_string(
        "evals/run_detail.html#live_latest", {"latest": [result], "eval_run": a, "live_rows": 20, "oob": True}
    )
    assert 'id="live-latest" hx-swap-oob="true"' in latest and f'id="live-result-{result.id}"' in latest
    summary = render_to_string("evals/run_detail.html#summary", {"eval_run": a, "oob": True})
    assert 'id="run-summary"' in summary and 'hx-swap-oob="true"' in summary


def test_result_detail_shows_diff_scores_and_span_tree(client, viewer):
    eval_set = make_eval_set("diffs", 1)
    run = make_eval_run(eval_set, [False], outputs=["0 "])  # expected "0", actual "0 " (trailing space)
    result = run.results.get()
    add_trace(Run.objects.get(pk=result.run_id))
    client.force_login(viewer)
    body = client.get(reverse("evals:result", args=[run.pk, result.pk])).content.decode()
    assert "differs only in whitespace" in body
    assert "<ins>·</ins>" in body
    assert "exact_match" in body and "compared" in body
    assert "execute_tool" in body and "paris" in body and "Paris is the capital" in body
    assert "100→20" in body  # chat span tokens


def test_compare_orders_flips_first_and_gives_a_verdict(client, viewer, runs):
    a, b = runs
    client.force_login(viewer)
    body = client.get(reverse("evals:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    rows = body[body.index('id="compare-rows"') :]
    # regression, improvement, then the rest by largest score change (c3 moved 0.1, c1 0.05)
    order = [rows.index(f">{cid}<") for cid in ("c0", "c2", "c3", "c1")]
    assert order == sorted(order)
    assert "pass → fail" in rows and "fail → pass" in rows
    assert "too few cases to compare: 4 in common" in body  # no interval and no verdict below 10
    assert "only in A / only in B" in body  # c4 exists only in A
    flips = client.get(
        reverse("evals:compare"), {"a": a.pk, "b": b.pk, "only": "flips"}, HTTP_HX_TARGET="compare-rows", **HX
    )
    text = flips.content.decode()
    assert ">c0<" in text and ">c2<" in text and ">c1<" not in text


def test_compare_verdict_calls_a_clear_winner(client, viewer):
    eval_set = make_eval_set("big", 40)
    a = make_eval_run(eval_set, [i < 10 for i in range(40)])
    b = make_eval_run(eval_set, [i < 30 for i in range(40)], variant="v2")
    client.force_login(viewer)
    body = client.get(reverse("evals:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    assert "B is better than A" in body and "excludes 0" in body


def test_compare_refuses_runs_of_different_sets(client, viewer, runs):
    a, _ = runs
    other = make_eval_run(make_eval_set("other", 2), [True, False])
    client.force_login(viewer)
    body = client.get(reverse("evals:compare"), {"a": a.pk, "b": other.pk}).content.decode()
    assert "only runs of the same set can be compared" in body
    assert 'id="verdict"' not in body


def test_compare_scorer_deltas_partial(client, viewer, runs):
    a, b = runs
    client.force_login(viewer)
    response = client.get(reverse("evals:compare_scorers"), {"a": a.pk, "b": b.pk}, **HX)
    assert response.status_code == 200
    assert "exact_match" in response.content.decode() and "CI" not in response.content.decode()[:0]
    assert client.get(reverse("evals:compare_scorers"), {"a": a.pk}).status_code == 400


def test_set_page_counts_and_case_browser(client, viewer, runs):
    a, _ = runs
    client.force_login(viewer)
    url = reverse("evals:set", args=[a.eval_set_id])
    body = client.get(url).content.decode()
    assert "held out" in body
    odd = client.get(url, {"tag": "odd"}, HTTP_HX_TARGET="cases", **HX).content.decode()
    assert ">c1<" in odd and ">c0<" not in odd
    test_only = client.get(url, {"split": "test"}, HTTP_HX_TARGET="cases", **HX).content.decode()
    assert ">c2<" in test_only and ">c1<" not in test_only


def test_splits_view_charts_and_lockbox_warning(client, viewer):
    from datetime import timedelta

    eval_set = make_eval_set("lock", 6)
    first = make_eval_run(eval_set, [True] * 6, split="all", summary=SUMMARY)
    second = make_eval_run(eval_set, [True] * 6, split="test", summary=SUMMARY)
    EvalRun.objects.filter(pk=second.pk).update(started=first.started + timedelta(days=1))
    client.force_login(viewer)
    body = client.get(reverse("evals:splits", args=[eval_set.pk]), {"target": "echo", "variant": "v1"}).content.decode()
    assert "Lockbox warning" in body
    # two runs: each chart is a sentence with the values and their intervals, not dots
    assert body.count("<svg") == 0 and body.count("2 runs so far: ") == 2 and "%]" in body
    assert '<td class="point-label">' in body  # the values as a table too


def test_trends_chart_one_line_per_variant(client, viewer, runs):
    a, _ = runs
    client.force_login(viewer)
    body = client.get(reverse("evals:trends"), {"set": a.eval_set_id}).content.decode()
    # one run per variant so far: a sentence with each variant's pass rate and 95% interval
    (sentence,) = re.findall(r"<p class=\"chart-few\" data-chart-few>([^<]*)</p>", body)
    assert re.fullmatch(r"\d runs? so far: echo/v\d \d+% \[\d+–\d+%\], echo/v\d \d+% \[\d+–\d+%\]", sentence)
    assert "echo/v1" in sentence and "echo/v2" in sentence
    scorer = client.get(
        reverse("evals:trends"), {"set": a.eval_set_id, "scorer": "exact_match"}, HTTP_HX_TARGET="trend-chart", **HX
    ).content.decode()
    # only v1 has a summary
    assert "exact_match mean" in scorer and scorer.count('<td class="point-label">echo/v1') == 1
    assert '<td class="point-label">echo/v2' not in scorer


@pytest.fixture
def agents_dir(tmp_path, settings):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "echo_agent.py").write_text(
        textwrap.dedent(
            """
            from evalcore.discovery import TargetSpec, target

            @target(id="echo", scorers=["exact_match"])
            def echo(question):
                return question

            multi = TargetSpec(id="multi", variants={"a": echo.target, "b": echo.target}, scorers=["exact_match"])
            """
        )
    )
    settings.EVALSITE_AGENTS_DIR = folder
    return folder


def test_start_run_prepares_enqueues_and_redirects(client, member, agents_dir):
    from django_tasks_db.models import DBTaskResult

    eval_set = make_eval_set("start", 6)
    client.force_login(member)
    page = client.get(reverse("evals:start_eval_run"))
    assert page.status_code == 200 and "held-out test split" in page.content.decode()
    response = client.post(reverse("evals:start_eval_run"), {"eval_set": eval_set.pk, "target": "echo", "split": "dev"})
    assert response.status_code == 302
    eval_run = EvalRun.objects.get(eval_set=eval_set)
    assert response["Location"] == reverse("evals:eval_run", args=[eval_run.pk])
    assert eval_run.status == "queued" and eval_run.created_by == member and eval_run.n_total == 2
    assert DBTaskResult.objects.filter(args_kwargs__args=[eval_run.pk]).exists()
    # recorded as a worker's run, so a dead worker's run is found and marked interrupted
    assert eval_run.config["executor"] == "task" and eval_run.config["task_id"]


def test_start_run_needs_the_test_tick_and_a_known_variant(client, member, agents_dir):
    eval_set = make_eval_set("start2", 3)
    client.force_login(member)
    response = client.post(
        reverse("evals:start_eval_run"), {"eval_set": eval_set.pk, "target": "echo", "split": "test"}
    )
    assert response.status_code == 200 and "tick the box" in response.content.decode()
    bad = client.post(
        reverse("evals:start_eval_run"), {"eval_set": eval_set.pk, "target": "multi", "variant": "zz", "split": "dev"}
    )
    assert "has no variant" in bad.content.decode()
    assert not EvalRun.objects.filter(eval_set=eval_set).exists()
    ok = client.post(
        reverse("evals:start_eval_run"),
        {"eval_set": eval_set.pk, "target": "echo", "split": "test", "allow_test": "on"},
    )
    assert ok.status_code == 302 and EvalRun.objects.get(eval_set=eval_set).split == "test"


def test_posts_need_csrf(member, agents_dir):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(member)
    eval_set = make_eval_set("csrf", 2)
    response = strict.post(reverse("evals:start_eval_run"), {"eval_set": eval_set.pk, "target": "echo", "split": "dev"})
    assert response.status_code == 403
    page = strict.get(reverse("evals:eval_runs"))
    assert b"X-CSRFToken" in page.content  # htmx posts send the token in a header


def test_login_page_and_home(client, viewer, member):
    page = client.get(reverse("login"))
    assert page.status_code == 200 and b'name="username"' in page.content
    client.force_login(viewer)
    assert client.get("/")["Location"] == reverse("evals:eval_runs")
    nav = client.get(reverse("evals:eval_runs")).content.decode()
    for label in ("Runs", "Sets", "Compare", "Trends", "Log out"):
        assert f">{label}<" in nav
    # a viewer is not offered what it may not do
    assert ">Playground<" not in nav and ">Start run<" not in nav
    assert ">Admin<" not in nav  # staff only
    # htmx is served from our static files, never from a CDN (the random CSRF token may spell "cdn")
    scripts = re.findall(r'<script[^>]*\bsrc="([^"]+)"', nav)
    assert any("htmx" in src for src in scripts), scripts
    assert all(src.startswith("/static/") for src in scripts), scripts
    client.force_login(member)
    nav = client.get(reverse("evals:eval_runs")).content.decode()
    assert ">Playground<" in nav and ">Start run<" in nav


def test_staff_sees_admin_link(client, staff):
    client.force_login(staff)
    assert b">Admin<" in client.get(reverse("evals:eval_runs")).content


def test_compare_with_from_a_run_page_suggests_the_baseline(client, viewer):
    eval_set = make_eval_set("cw", 4)
    older = make_eval_run(eval_set, [True, False, True, True], variant="v1")
    newer = make_eval_run(eval_set, [True, True, True, True], variant="v2")
    client.force_login(viewer)
    response = client.get(reverse("evals:compare"), {"b": newer.pk})
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('evals:compare')}?a={older.pk}&b={newer.pk}"
    lonely = make_eval_run(make_eval_set("alone", 2), [True, True])
    page = client.get(reverse("evals:compare"), {"b": lonely.pk})
    assert page.status_code == 200 and b"no other run of this set" in page.content
    assert b"This field is required" not in page.content


def test_next_case_steps_through_the_filtered_list(client, viewer):
    eval_set = make_eval_set("steps", 6)
    run = make_eval_run(eval_set, [False, True, False, True, True, False])
    client.force_login(viewer)
    page = client.get(reverse("evals:eval_run", args=[run.pk]), {"status": "failed"}).content.decode()
    assert "?status=failed" in page  # the case links carry the filter
    failed = list(run.results.filter(status="failed").order_by("id").values_list("id", flat=True))
    first = client.get(reverse("evals:result", args=[run.pk, failed[0]]), {"status": "failed"})
    nxt = reverse("evals:result", args=[run.pk, failed[1]])
    assert f'href="{nxt}?status=failed"' in first.content.decode()
    unfiltered = client.get(reverse("evals:result", args=[run.pk, failed[0]])).content.decode()
    passed_next = run.results.filter(id__gt=failed[0]).order_by("id").first().id
    assert reverse("evals:result", args=[run.pk, passed_next]) in unfiltered


def test_compare_case_shows_both_outputs_side_by_side(client, viewer):
    eval_set = make_eval_set("side", 3)
    a = make_eval_run(eval_set, [True, False, True], variant="v1", outputs=["alpha", "beta", "gamma"])
    b = make_eval_run(eval_set, [True, True, False], variant="v2", outputs=["alpha", "BETA!", "delta"])
    client.force_login(viewer)
    compare_page = client.get(reverse("evals:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    assert reverse("evals:compare_case") in compare_page
    page = client.get(reverse("evals:compare_case"), {"a": a.pk, "b": b.pk, "case": "c1"})
    text = page.content.decode()
    assert page.status_code == 200
    assert "A failed" in text and "B passed" in text
    assert "<del>beta</del>" in text and "<ins>BETA!</ins>" in text
    assert client.get(reverse("evals:compare_case"), {"a": a.pk, "b": b.pk, "case": "nope"}).status_code == 404
    assert client.get(reverse("evals:compare_case"), {"a": a.pk, "case": "c1"}).status_code == 404
