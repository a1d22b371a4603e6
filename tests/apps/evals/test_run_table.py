"""The runs list and the sets list people sit in all day (issue 26): name, duration, tokens, cost
where known, model and pass rate with its interval and coverage, sorted server-side by every
column; sets with description, cases per split and the latest pass rate per variant; one date
format with its zone label, in the admin too."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from apps.core.dates import format_when
from apps.evals.models import EvalRun, EvalSet
from apps.evals.queries.run_table import run_rows, run_table
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

Three = tuple[EvalSet, EvalRun, EvalRun, EvalRun]
HX = {"HX-Request": "true", "HX-Target": "runs-table"}


@pytest.fixture
def three() -> Three:
    """Three runs of qa: short/cheap/few tokens, long/costly/many tokens, one still running."""
    qa = make_eval_set("qa", 12)
    short = make_eval_run(qa, [True] * 9 + [False] * 3, variant="v1", summary={"tokens_in": 100, "tokens_out": 20})
    assert short.started is not None
    long = make_eval_run(
        qa,
        [True] * 3 + [False] * 9,
        variant="v2",
        started=short.started + timedelta(days=1),
        summary={"tokens_in": 9000, "tokens_out": 1000, "cost_usd": 0.42},
    )
    EvalRun.objects.filter(pk=long.pk).update(
        finished=long.started + timedelta(minutes=3, seconds=5) if long.started else None, model="big-model", name="b"
    )
    EvalRun.objects.filter(pk=short.pk).update(name="a")
    live = make_eval_run(qa, [], variant="v3", status="running", started=short.started + timedelta(days=2))
    EvalRun.objects.filter(pk=live.pk).update(finished=None, name="c", model="")
    return qa, short, long, live


def order(sort: str) -> list[str]:
    return [r.name for r in run_table(EvalRun.objects.all(), sort)]


def test_every_column_sorts_both_ways_and_a_missing_value_sorts_last(three: Three) -> None:
    assert order("") == ["c", "b", "a"]  # newest first
    assert order("name") == ["a", "b", "c"] and order("-name") == ["c", "b", "a"]
    assert order("duration") == ["a", "b", "c"] and order("-duration") == ["b", "a", "c"]  # c still runs
    assert order("tokens") == ["a", "b", "c"] and order("-tokens") == ["b", "a", "c"]
    assert order("-cost") == ["b", "c", "a"] and order("cost") == ["b", "c", "a"]  # unknown: last, newest first
    assert order("model") == ["c", "b", "a"] and order("-model") == ["a", "b", "c"]  # "" < "big-model" < "m-1"
    assert order("-pass_rate") == ["a", "b", "c"] and order("pass_rate") == ["b", "a", "c"]  # c has no rate
    assert order("no-such-sort") == order("")


def test_a_row_has_duration_tokens_cost_only_where_known_and_an_interval_at_its_n(three: Three) -> None:
    _ = three
    rows = {r.run.name: r for r in run_rows(list(run_table(EvalRun.objects.all())))}
    assert rows["b"].duration == timedelta(minutes=3, seconds=5) and rows["c"].duration is None
    assert (rows["a"].tokens, rows["b"].tokens, rows["c"].tokens) == (120, 10000, None)
    assert (rows["a"].cost, rows["b"].cost) == (None, 0.42)
    assert rows["a"].cases == 12 and rows["a"].interval.method == "wilson"
    low, high = rows["a"].interval.low, rows["a"].interval.high
    assert low is not None and high is not None and low < 0.75 < high
    assert rows["c"].interval.reason == "no cases"


def test_with_repeats_the_interval_counts_distinct_cases(three: Three) -> None:
    _, short, _, _ = three
    EvalRun.objects.filter(pk=short.pk).update(config={"repeat": 3})
    row = next(r for r in run_rows(list(run_table(EvalRun.objects.all()))) if r.run.pk == short.pk)
    assert row.cases == 4  # 12 results over 3 repeats


def test_the_page_shows_the_columns_and_sorts_by_a_click(client: Client, viewer: User, three: Three) -> None:
    _, short, long, _live = three
    client.force_login(viewer)
    page = client.get(reverse("evals:eval_runs")).content.decode()
    row_b = page[page.index(f'data-run="{long.pk}"') :]
    row_b = row_b[: row_b.index("</tr>")]
    assert ">b</a>" in row_b and "3 min 05 s" in row_b and "10,000" in row_b and "$0.4200" in row_b
    assert "big-model" in row_b and "25.0%" in row_b and "n=12/12" in row_b and "[" in row_b
    row_a = page[page.index(f'data-run="{short.pk}"') :]
    row_a = row_a[: row_a.index("</tr>")]
    assert "$0" not in row_a and "—" in row_a  # an unknown cost is a dash, never 0
    assert format_when(long.started) in row_b
    # the column heads are links that sort server-side; the current one flips direction
    assert 'data-sort="-tokens"' in page
    by_tokens = client.get(reverse("evals:eval_runs") + "?sort=-tokens", headers=HX).content.decode()
    assert by_tokens.index(f'data-run="{long.pk}"') < by_tokens.index(f'data-run="{short.pk}"')
    assert 'data-sort="tokens"' in by_tokens and "<h1>" not in by_tokens
    assert 'aria-sort="descending"' in by_tokens


def test_the_sets_list_shows_description_counts_and_latest_pass_rate_per_variant(
    client: Client, viewer: User, three: Three
) -> None:
    qa, short, _, _ = three
    EvalSet.objects.filter(pk=qa.pk).update(description="questions about sums")
    assert short.started is not None
    newer_v1 = make_eval_run(qa, [True] * 6 + [False] * 6, variant="v1", started=short.started + timedelta(hours=1))
    make_eval_set("empty", 0)
    client.force_login(viewer)
    page = client.get(reverse("evals:sets")).content.decode()
    row = page[page.index(f'data-set="{qa.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "questions about sums" in row
    assert '<td class="num">12</td><td class="num">4</td><td class="num">4</td><td class="num">4</td>' in row
    assert row.count('class="latest-variant"') == 2  # v1 and v2; the running v3 has not ended
    assert f'href="/runs/{newer_v1.pk}/"' in row and f'href="/runs/{short.pk}/"' not in row  # the latest v1
    assert "50.0%" in row and "25.0%" in row and "n=12/12" in row
    assert "no run yet" in page  # the empty set


def test_the_admin_lists_show_the_same_date_format(client: Client, staff: User, three: Three) -> None:
    _, short, _, _ = three
    client.force_login(staff)
    page = client.get("/admin/evals/evalrun/").content.decode()
    assert format_when(short.started) in page and format_when(short.started).endswith(" UTC")
