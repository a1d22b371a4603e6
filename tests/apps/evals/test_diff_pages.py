"""Read a run without opening every row (issue 13 §2): the structural, tool-call and prose diffs
on the case and compare-case pages, the tables' inline previews (one query per page, big
values cut in SQL), the compare-case page's previous / next, and the keyboard's markup."""

from __future__ import annotations

import html
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.evals.models import EvalCase, EvalResult
from evalcore.types import expected_hash
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


def block(page: str, start: str, end: str = "<h2>Scores</h2>") -> str:
    return page[page.index(start) : page.index(end)]


def case_page(client, run, case_id="c0") -> str:
    result = run.results.get(case_id=case_id)
    return client.get(reverse("evals:result", args=[run.pk, result.pk])).content.decode()


def compare_case(client, a, b, case_id="c0", **extra) -> str:
    query = {"a": a.pk, "b": b.pk, "case": case_id, **extra}
    return client.get(reverse("evals:compare_case"), query).content.decode()


def test_json_values_show_a_table_of_changed_paths(client, viewer):
    expected = {"answer": {"city": "Paris", "country": "France"}, "sources": ["wiki/Paris"]}
    actual = {"answer": {"city": "Rome", "country": "France"}, "sources": ["wiki/Paris", "wiki/Rome"]}
    eval_set = make_eval_set("json", 1)
    eval_set.cases.update(expected=expected)
    run_a = make_eval_run(eval_set, [True], variant="a", outputs=[expected])
    run_b = make_eval_run(eval_set, [False], variant="b", outputs=[actual])
    client.force_login(viewer)
    for page, start in (
        (case_page(client, run_b), "<h2>Expected vs actual</h2>"),
        (compare_case(client, run_a, run_b), "<h2>A's output vs B's output</h2>"),
    ):
        diff = block(page, start)
        assert 'data-diff-mode="json"' in diff and '<table class="json-diff">' in diff
        rows = re.findall(r'<tr class="change-(\w+)" data-path="([^"]+)">(.*?)</tr>', diff, re.S)
        assert [(op, path) for op, path, _ in rows] == [("changed", "$.answer.city"), ("added", "$.sources[1]")]
        city = html.unescape(rows[0][2])
        assert '"<del>Paris</del>"' in city and '"<ins>Rome</ins>"' in city
        assert '"wiki/Rome"' in html.unescape(rows[1][2])
        assert "1 changed, 1 added, 0 removed paths" in diff
        assert "<summary>both values in full</summary>" in diff  # the values, closed below


def test_tool_calls_and_prose_have_their_own_diffs(client, viewer):
    calls = [{"name": "search", "arguments": {"q": "Paris"}}, {"name": "answer", "arguments": {"text": "Paris"}}]
    made = [{"name": "search", "arguments": {"q": "Rome"}}]
    prose_a = "The capital of France is Paris, on the Seine."
    prose_b = "The capital of France is Paris, on the river Seine."
    eval_set = make_eval_set("kinds", 2)
    EvalCase.objects.filter(eval_set=eval_set, case_id="c0").update(expected=calls)
    EvalCase.objects.filter(eval_set=eval_set, case_id="c1").update(expected=prose_a)
    run = make_eval_run(eval_set, [False, False], outputs=[made, prose_b])
    client.force_login(viewer)
    diff = block(case_page(client, run, "c0"), "<h2>Expected vs actual</h2>")
    assert 'data-diff-mode="tool_calls"' in diff
    assert "2 expected calls, 1 made: 1 with other arguments, 1 missing." in diff
    assert re.search(
        r'<tr class="call-arguments">.*?search.*?\$\.q: <del>&quot;Paris&quot;</del> → <ins>&quot;Rome&quot;</ins>',
        diff,
        re.S,
    )
    assert '<tr class="call-missing">' in diff
    prose = block(case_page(client, run, "c1"), "<h2>Expected vs actual</h2>")
    assert 'data-diff-mode="prose"' in prose
    assert re.search(
        r'<pre class="text prose diff">The capital of France is Paris, on the <ins>river </ins>Seine\.</pre>', prose
    )


def test_run_table_shows_previews_cut_in_the_database(client, viewer):
    eval_set = make_eval_set("previews", 3)
    big = "line of output\n" * 20_000  # 300 KB: the page reads its first 600 characters only
    run = make_eval_run(eval_set, [True, False, True], outputs=["4", big, {"city": "Zürich"}])
    recorded = EvalResult.objects.get(eval_run=run, case_id="c2")
    recorded.expected, recorded.expected_hash = {"city": "Zürich"}, expected_hash({"city": "Zürich"})
    recorded.save(update_fields=["expected", "expected_hash"])
    client.force_login(viewer)
    body = client.get(reverse("evals:eval_run", args=[run.pk])).content.decode()
    rows = dict(re.findall(r'<tr id="result-\d+">\s*<td class="mono">.*?>(c\d)</a>(.*?)</tr>', body, re.S))
    cells = {cid: re.findall(r'<td class="preview-cell">(.*?)</td>', row, re.S) for cid, row in rows.items()}
    assert [html.unescape(c) for c in cells["c0"]] == [
        '<span class="preview">{"question": "what is 0 + 0?"}</span>',
        '<span class="preview">0</span>',
        '<span class="preview">4</span>',
    ]
    output = html.unescape(cells["c1"][2])
    assert output.startswith('<details class="preview"><summary>line of output line of output')
    assert output.count("line of output") < 60 and output.endswith("…</pre></details>")
    assert len(body) < 40_000  # the 300 KB output is not on the page
    assert html.unescape(cells["c2"][1]) == '<span class="preview">{"city": "Zürich"}</span>'  # as scored
    assert 'id="keys-help" hidden' in body and "evalsite/keys.js" in body


def _queries(client, url, params=None) -> int:
    client.get(url, params or {})  # warm: the session and cached figures are read once
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url, params or {}).status_code == 200
    return len(captured)


def test_previews_cost_one_query_per_page_whatever_its_size(client, viewer, monkeypatch):
    from apps.evals.runs import liveness

    monkeypatch.setattr(liveness, "_last_check", float("inf"))  # its once-a-second check stays out of the count
    client.force_login(viewer)
    small = make_eval_run(make_eval_set("few", 2), [True, False])
    many = make_eval_run(make_eval_set("many", 40), [True, False] * 20)
    run_url = lambda run: reverse("evals:eval_run", args=[run.pk])  # noqa: E731
    assert _queries(client, run_url(small)) == _queries(client, run_url(many))
    a = make_eval_run(many.eval_set, [False, True] * 20, variant="v2")
    b = make_eval_run(small.eval_set, [False, False], variant="v2")
    compare = reverse("evals:compare")
    assert _queries(client, compare, {"a": small.pk, "b": b.pk}) == _queries(client, compare, {"a": many.pk, "b": a.pk})


def test_compare_table_previews_both_outputs(client, viewer):
    eval_set = make_eval_set("cmp", 2)
    a = make_eval_run(eval_set, [True, True], outputs=["0", "2"])
    b = make_eval_run(eval_set, [False, True], variant="v2", outputs=["zero", "2"])
    client.force_login(viewer)
    body = client.get(reverse("evals:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    first = re.search(r'<tr class="regression">(.*?)</tr>', body, re.S).group(1)
    previews = [html.unescape(c) for c in re.findall(r'<td class="preview-cell">(.*?)</td>', first, re.S)]
    assert previews == [
        '<span class="preview">{"question": "what is 0 + 0?"}</span>',
        '<span class="preview">0</span>',
        '<span class="preview">0</span>',
        '<span class="preview">zero</span>',
    ]
    assert '<tbody class="key-rows">' in body and 'class="row-link"' in body


def test_compare_case_steps_through_the_comparison_in_its_order(client, viewer):
    eval_set = make_eval_set("steps", 4)
    a = make_eval_run(eval_set, [True, True, False, True], scores=[0.9, 0.5, 0.1, 0.5])
    b = make_eval_run(eval_set, [True, False, True, True], variant="v2", scores=[0.6, 0.5, 0.9, 0.5])
    client.force_login(viewer)
    order = re.findall(r"case=(c\d)", client.get(reverse("evals:compare"), {"a": a.pk, "b": b.pk}).content.decode())
    assert order == ["c1", "c2", "c0", "c3"]  # regression, improvement, then the largest score change

    def links(case_id, **extra):
        page = compare_case(client, a, b, case_id, **extra)
        found = {rel: re.search(rf'<a href="([^"]+)" rel="{rel}"', page) for rel in ("prev", "next")}
        return {
            rel: re.search(r"case=(c\d)", html.unescape(m.group(1))).group(1) if m else None for rel, m in found.items()
        }

    assert links("c1") == {"prev": None, "next": "c2"}
    assert links("c2") == {"prev": "c1", "next": "c0"}
    assert links("c3") == {"prev": "c0", "next": None}
    assert links("c1", only="flips") == {"prev": None, "next": "c2"}
    assert links("c2", only="flips") == {"prev": "c1", "next": None}
    page = compare_case(client, a, b, "c2", only="flips")
    assert "only=flips" in html.unescape(re.search(r'<a href="([^"]+)" rel="prev"', page).group(1))
    assert 'id="next-case"' not in page and 'id="previous-case"' in page and 'id="keys-help"' in page
