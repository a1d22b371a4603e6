"""N-way comparison (issue 27): four runs of one set, their ranking, corrected verdicts against
the baseline, flip matrix, per-case table, scorers, slices and Pareto marks, read in-process."""

from __future__ import annotations

import pytest

from apps.evals.queries.compare import CompareError
from apps.evals.queries.compare_many import (
    CompareManyError,
    case_table,
    compare_many_runs,
    comparison_payload,
    load_runs,
    many_scorer_deltas,
    many_slices,
    pareto_rows,
    parse_run_ids,
)
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

N = 60


def outcomes(rate_every: int, offset: int = 0) -> list[str | bool]:
    return [bool((i + offset) % rate_every) for i in range(N)]


@pytest.fixture
def bakeoff():
    """Four variants over 60 cases: 'base' passes 30, 'same' 30 (another 30: many flips, no net
    change), 'good' 58 of 60, 'weak' 20 and two errored cases (errored never passes)."""
    eval_set = make_eval_set("bake", n_cases=N, splits=("dev",))
    base = make_eval_run(eval_set, [i % 2 == 0 for i in range(N)], variant="base")
    same = make_eval_run(eval_set, [i % 2 == 1 for i in range(N)], variant="same")
    good = make_eval_run(eval_set, [i not in (1, 3) for i in range(N)], variant="good")
    weak_outcomes: list[str | bool] = [i % 3 == 0 for i in range(N)]
    weak_outcomes[0] = "errored"
    weak_outcomes[3] = "errored"
    weak = make_eval_run(eval_set, weak_outcomes, variant="weak")
    return [base, same, good, weak]


def test_ranking_verdicts_and_flips(bakeoff):
    _base, same, good, weak = bakeoff
    view = compare_many_runs(bakeoff)
    comparison = view.comparison
    assert view.baseline == 0 and view.baseline_reason == "first"
    assert comparison.n_cases == N and comparison.reason is None
    ranked = [view.runs[e.variant] for e in comparison.ranking]
    assert ranked[0] == good
    assert comparison.ranking[0].pass_rate == pytest.approx(58 / 60)
    assert comparison.ranking[0].interval.method == "wilson"
    assert comparison.best_group == [2]  # every other variant is clearly worse than 'good'
    by_run = {view.runs[p.b]: p for p in comparison.pairs}
    assert by_run[good].significant and by_run[good].verdict.outcome == "b_better"
    assert "Holm p=" in by_run[good].text
    assert not by_run[same].significant and by_run[same].counts.a_only == 30 and by_run[same].counts.b_only == 30
    assert by_run[weak].delta == pytest.approx((18 - 30) / 60)
    # flips[i][j]: passed by i, failed by j
    assert comparison.flips[0][1] == 30 and comparison.flips[1][0] == 30
    assert comparison.flips[0][2] == 0 and comparison.flips[2][0] == 28
    assert comparison.ranking[0].rank_low == 1 and comparison.ranking[0].rank_high == 1
    assert view.coverage[3].errored == 2 and view.coverage[3].label == "n = 60/60"


def test_baseline_given_or_pinned_and_bad_inputs(bakeoff):
    base, same, good, weak = bakeoff
    assert compare_many_runs(bakeoff, good.pk).baseline == 2
    weak.pinned = True
    weak.save()
    view = compare_many_runs(load_runs([base.pk, same.pk, good.pk, weak.pk]))
    assert (view.baseline, view.baseline_reason) == (3, "pinned")
    assert parse_run_ids(["a, b", "c,"]) == ["a", "b", "c"]
    with pytest.raises(CompareManyError, match="at least two"):
        load_runs([base.pk])
    with pytest.raises(CompareManyError, match="given twice"):
        load_runs([base.pk, base.pk])
    with pytest.raises(CompareManyError, match="no run 'nope'"):
        load_runs([base.pk, "nope"])
    with pytest.raises(CompareManyError, match="not among"):
        compare_many_runs(bakeoff, "zzz")
    other = make_eval_run(make_eval_set("other", n_cases=N), [True] * N)
    with pytest.raises(CompareError, match="same set"):
        compare_many_runs([base, other])


def test_case_table_puts_splitting_cases_first_and_filters(bakeoff):
    page = case_table(bakeoff, page_size=5)
    assert page.total == N and all(row.splits for row in page.rows)
    # nearest an even split first: 2 of 4 passing
    assert page.rows[0].n_passed == 2
    assert page.rows[0].statuses[3] in ("passed", "failed", "errored")
    weak_failed = case_table(bakeoff, only="failed:3", page_size=500)
    assert weak_failed.total == 42 and all(row.statuses[3] != "passed" for row in weak_failed.rows)
    assert case_table(bakeoff, only="all_pass").total == 0
    assert [r.case_id for r in case_table(bakeoff, q="c1", sort="case").rows][:2] == ["c1", "c10"]
    most = case_table(bakeoff, sort="passes", page_size=1).rows[0]
    assert most.n_passed == 3


def test_scorers_slices_pareto_and_payload(bakeoff):
    view = compare_many_runs(bakeoff)
    scorers = many_scorer_deltas(view)
    assert [v.run.variant for v in scorers] == ["same", "good", "weak"]
    family = [d for v in scorers for d in v.deltas]
    assert all(d.p_holm >= d.p_value for d in family)
    slices = many_slices(view)
    assert len(slices) == 3 and all(v.slices for v in slices)
    pareto = pareto_rows(view)
    good_row = pareto[2]
    assert good_row.mark.on_front and good_row.point.latency is not None
    assert pareto[3].mark.dominated_by == (0, 1, 2) or not pareto[3].mark.on_front
    payload = comparison_payload(view, scorers=scorers, slices=slices, pareto=pareto)
    assert payload["ranking"][0]["run"] == bakeoff[2].pk
    assert {"passed": bakeoff[2].pk, "failed": bakeoff[0].pk, "cases": 28} in payload["flips"]
    assert payload["pareto"][2]["on_front"] is True


def _runs_param(runs) -> str:
    return ",".join(run.pk for run in runs)


def test_page_shows_ranking_verdicts_flips_and_loads_its_blocks(client, viewer, bakeoff):
    client.force_login(viewer)
    query = f"runs={_runs_param(bakeoff)}"
    page = client.get(f"/compare/?{query}")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="many-ranking"' in html and 'id="many-flips"' in html and 'id="many-pairs"' in html
    assert html.index(f'data-run="{bakeoff[2].pk}"') < html.index(f'data-run="{bakeoff[0].pk}"')  # best first
    assert "n = 60/60" in html and "Holm p=" in html
    assert "/compare/cases/?" in html and "/compare/many/pareto/" in html
    cases = client.get(f"/compare/cases/?{query}&only=split&sort=split").content.decode()
    assert 'id="many-cases-table"' in cases and 'class="splits"' in cases
    # the table's pages are the page's own URL: asked by htmx, the table alone; reloaded, the whole page
    partial = client.get(
        f"/compare/?{query}&page=2&sort=case", headers={"HX-Request": "true", "HX-Target": "many-cases"}
    )
    assert partial.content.decode().lstrip().startswith("<form") and "page 2 of" in partial.content.decode()
    whole = client.get(f"/compare/?{query}&page=2&sort=case").content.decode()
    assert 'id="many-ranking"' in whole and "page=2" in whole and "sort=case" in whole
    pareto = client.get(f"/compare/many/pareto/?{query}").content.decode()
    assert 'id="pareto-table"' in pareto and "on the front" in pareto and 'id="pareto-chart"' in pareto
    assert "Holm" in client.get(f"/compare/many/scorers/?{query}").content.decode()
    assert "vs the baseline" in client.get(f"/compare/many/slices/?{query}").content.decode()
    assert client.get("/compare/many/pareto/").status_code == 400  # no runs named


def test_page_and_partials_refuse_bad_input(client, viewer, bakeoff):
    client.force_login(viewer)
    one = client.get(f"/compare/?runs={bakeoff[0].pk}")
    assert one.status_code == 400 and "at least two" in one.content.decode()
    assert client.get(f"/compare/cases/?runs={bakeoff[0].pk},nope").status_code == 400
    assert client.get(f"/compare/?runs={_runs_param(bakeoff)}&baseline=zz").status_code == 400
    client.logout()
    assert client.get(f"/compare/?runs={_runs_param(bakeoff)}").status_code in (302, 403)


def test_ticking_more_than_two_runs_opens_the_n_way_page(client, viewer, bakeoff):
    client.force_login(viewer)
    response = client.get("/compare/?" + "&".join(f"pick={run.pk}" for run in bakeoff[:3]))
    assert response.status_code == 302 and "runs=" in response["Location"]


def test_api_compare_many_and_cases_and_export(client, viewer, bakeoff):
    client.force_login(viewer)
    query = f"runs={_runs_param(bakeoff)}&baseline={bakeoff[1].pk}"
    body = client.get(f"/api/eval/compare-many?{query}&pareto=true&scorers=true&slices=true").json()
    assert body["baseline"] == bakeoff[1].pk and body["baseline_chosen"] == "given"
    assert body["ranking"][0]["run"] == bakeoff[2].pk and body["best_group"] == [bakeoff[2].pk]
    assert len(body["pairs"]) == 3 and all(p["a"] == bakeoff[1].pk for p in body["pairs"])
    assert len(body["flips"]) == 12 and body["pareto"] and body["scorers"] and body["slices"]
    bad = client.get(f"/api/eval/compare-many?runs={bakeoff[0].pk}")
    assert bad.status_code == 400 and "at least two" in str(bad.json())
    cases = client.get(f"/api/eval/compare-many/cases?{query}&page_size=3").json()
    assert cases["total"] == N and len(cases["items"]) == 3 and cases["items"][0]["n_passed"] == 2
    export = client.get(f"/api/eval/compare-many/export?{query}&format=csv")
    text = b"".join(export.streaming_content).decode()
    header = text.splitlines()[0]
    assert f"evalsite.runs.{bakeoff[0].pk}.status" in header and len(text.splitlines()) == N + 1
    # the two-run route keeps its shape
    two = client.get(f"/api/eval/compare?a={bakeoff[0].pk}&b={bakeoff[1].pk}").json()
    assert {"a", "b", "counts", "verdict"} <= set(two)
    # paging past the end gives an empty page (a client paging "until empty" stops), not the last
    # page again: both routes, as every list of the API
    last = client.get(f"/api/eval/compare-many/cases?{query}&page_size=3&page={cases['pages']}").json()
    assert last["items"] and last["page"] == cases["pages"]
    past = client.get(f"/api/eval/compare-many/cases?{query}&page_size=3&page={cases['pages'] + 1}").json()
    assert past["items"] == [] and past["page"] == cases["pages"] + 1 and past["total"] == N
    pair = f"/api/eval/compare?a={bakeoff[0].pk}&b={bakeoff[1].pk}&page_size=5"
    pages = client.get(pair).json()["pages"]
    assert client.get(f"{pair}&page={pages}").json()["items"]
    beyond = client.get(f"{pair}&page={pages + 1}").json()
    assert beyond["items"] == [] and beyond["pages"] == pages


def test_cli_prints_tables_and_json_and_exports(bakeoff, tmp_path):
    import json
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    ids = [run.pk for run in bakeoff]
    out = StringIO()
    call_command("compare", *ids, "--baseline", ids[0], stdout=out)
    text = out.getvalue()
    assert "Ranking (best first)" in text and "Flips" in text and "indistinguishable" not in text.split("Against")[0]
    assert "B is better than A" in text
    out = StringIO()
    export = tmp_path / "bake.csv"
    call_command("compare", *ids, "--json", "--pareto", "--export", str(export), stdout=out)
    body = json.loads(out.getvalue())
    assert body["ranking"][0]["run"] == ids[2] and body["pareto"][2]["on_front"]
    assert export.read_text().count("\n") == N + 1
    with pytest.raises(CommandError, match="at least two"):
        call_command("compare", ids[0])


def test_runs_not_holding_the_same_cases_are_paired_in_sql(bakeoff):
    base, same, good, _ = bakeoff
    short = make_eval_run(base.eval_set, [i % 2 == 1 for i in range(N - 1)], variant="short")  # lacks c59
    runs = [base, same, good, short]
    view = compare_many_runs(runs)
    assert view.comparison.n_cases == N - 1 and view.coverage[3].label == f"n = {N - 1}/{N - 1}"
    assert view.comparison.flips[0][3] == 30  # the 30 even cases of c0..c58: base passes them, short fails them
    page = case_table(runs, page_size=5)
    assert page.total == N - 1 and page.rows[0].n_passed == 2 and all(row.splits for row in page.rows)
    assert case_table(runs, only="passed:3").total == 29
    aligned_first = case_table(bakeoff[:3], sort="case", page_size=3)
    sql_first = case_table(runs, sort="case", page_size=3)
    assert [r.case_id for r in aligned_first.rows] == [r.case_id for r in sql_first.rows]


def test_csv_export_neutralises_formulas(client, viewer):
    eval_set = make_eval_set("formula", n_cases=3)
    ids = ["=HYPERLINK(1)", "+SUM(A1)", "plain"]
    runs = [make_eval_run(eval_set, [True, False, True], variant=v, case_ids=ids) for v in ("a", "b", "c")]
    client.force_login(viewer)
    export = client.get(f"/api/eval/compare-many/export?runs={_runs_param(runs)}&format=csv")
    lines = b"".join(export.streaming_content).decode().splitlines()
    first_cells = sorted(line.split(",")[0] for line in lines[1:])
    assert first_cells == ["'+SUM(A1)", "'=HYPERLINK(1)", "plain"]


def test_runs_with_no_case_in_common_say_so(client, viewer):
    eval_set = make_eval_set("disjoint", n_cases=4)
    first = make_eval_run(eval_set, [True, False], variant="a", case_ids=["c0", "c1"])
    second = make_eval_run(eval_set, [True, True], variant="b", case_ids=["c2", "c3"])
    view = compare_many_runs([first, second])
    assert view.comparison.n_cases == 0 and view.comparison.reason == "no cases"
    assert view.comparison.flips == [[0, 0], [0, 0]] and view.coverage[0].label == "n = 0/2"
    client.force_login(viewer)
    page = client.get(f"/compare/?runs={first.pk},{second.pk}")
    assert page.status_code == 200 and "no cases" in page.content.decode()
