"""Where did B get worse (issue 13 §3): the comparison by slice on the compare page and in the
API, and per-scorer p-values corrected with Holm so no row contradicts the headline."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.evals.models import EvalCase
from apps.evals.queries.compare import scorer_deltas
from apps.evals.queries.slices import comparison_slices
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

N = 80


@pytest.fixture
def regressed():
    """80 cases: 40 tagged multi-hop (difficulty hard), 40 single-hop (easy). A passes every
    case; B fails 24 multi-hop ones and 2 single-hop ones. Similarity drops on multi-hop only."""
    eval_set = make_eval_set("hotpot", n_cases=N, splits=("dev",))
    for case in EvalCase.objects.filter(eval_set=eval_set):
        index = int(case.case_id[1:])
        multi = index < 40
        case.tags = ["multi-hop" if multi else "single-hop"]
        case.metadata = {"difficulty": "hard" if multi else "easy", "source_url": f"https://x/{index}"}
        case.save()
    outcomes_b = [not (i < 24 or i in (40, 41)) for i in range(N)]
    run_a = make_eval_run(eval_set, [True] * N, variant="a", scores=[0.9] * N)
    run_b = make_eval_run(eval_set, outcomes_b, variant="b", scores=[0.5 if i < 40 else 0.9 for i in range(N)])
    return run_a, run_b


def test_the_regressed_slice_is_flagged_and_leads(regressed):
    run_a, run_b = regressed
    rows = comparison_slices(run_a, run_b)
    by_label = {r.label: r for r in rows}
    assert rows[0].label in ("tag=multi-hop", "metadata.difficulty=hard")
    multi = by_label["tag=multi-hop"]
    assert multi.significant and multi.counts.n == 40 and multi.counts.delta == pytest.approx(-24 / 40)
    assert multi.contribution == pytest.approx(-24 / N)
    assert multi.sentence == "B lost 60.0 points on tag=multi-hop (40 cases)"
    assert not by_label["tag=single-hop"].significant  # two flips out of 40: not after correction
    assert not any(r.dimension == "metadata.source_url" for r in rows)  # 80 values: not a slice


def test_compare_page_loads_the_slices_block_and_the_api_lists_every_slice(client, viewer, regressed):
    run_a, run_b = regressed
    client.force_login(viewer)
    page = client.get(f"{reverse('evals:compare')}?a={run_a.pk}&b={run_b.pk}").content.decode()
    assert reverse("evals:compare_slices") in page
    block = client.get(f"{reverse('evals:compare_slices')}?a={run_a.pk}&b={run_b.pk}").content.decode()
    assert "B lost 60.0 points on tag=multi-hop (40 cases)" in block
    assert 'data-slice="tag=multi-hop" class="flagged"' in block
    body = client.get(f"/api/eval/compare/slices?a={run_a.pk}&b={run_b.pk}").json()
    labels = [s["label"] for s in body["items"]]
    assert set(labels) == {"tag=multi-hop", "tag=single-hop", "metadata.difficulty=hard", "metadata.difficulty=easy"}
    first = body["items"][0]
    assert first["significant"] and first["counts"]["a_only"] == 24 and first["p_holm"] >= first["p_value"]
    other_set = make_eval_run(make_eval_set("other", 2), [True, True])
    refused = client.get(f"/api/eval/compare/slices?a={run_a.pk}&b={other_set.pk}")
    assert refused.status_code == 400 and refused.json()["field"] == "b"


def test_scorer_rows_carry_holm_corrected_p_and_the_page_says_which_moved(client, viewer, regressed):
    run_a, run_b = regressed
    deltas = {d.name: d for d in scorer_deltas(run_a, run_b)}
    similarity = deltas["similarity"]
    assert similarity.delta == pytest.approx(-0.2) and similarity.significant
    assert similarity.p_holm == pytest.approx(min(1.0, 2 * similarity.p_value))  # two scorers, both tiny p
    client.force_login(viewer)
    block = client.get(f"{reverse('evals:compare_scorers')}?a={run_a.pk}&b={run_b.pk}").content.decode()
    assert "<b>similarity</b>: -20.0 points (Holm-corrected p" in block
    body = client.get(f"/api/eval/compare?a={run_a.pk}&b={run_b.pk}&scorers=true").json()
    rows = {d["name"]: d for d in body["scorer_deltas"]}
    assert rows["similarity"]["significant"] is True and 0 < rows["similarity"]["p_holm"] <= 1
