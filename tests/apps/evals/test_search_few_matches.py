"""A text search finds the same results whether SQLite filters the run by the list of the
index's matches (at most ``FEW_MATCHES``: a probe per id on a million-result run) or by the
index's subquery (more matches), on a run whose index also holds another run's results."""

from __future__ import annotations

import pytest

from apps.evals.models import EvalResult
from apps.evals.queries import search
from apps.evals.queries.search import ResultQuery, search_results
from apps.evals.worker.sweeper import index_pending
from tests.apps.factories import make_eval_run, make_eval_set


@pytest.mark.django_db
def test_the_list_of_few_matches_and_the_subquery_find_the_same_results(monkeypatch: pytest.MonkeyPatch) -> None:
    eval_set = make_eval_set("few-matches", 12)
    outputs = [f"answer {'paris' if i % 3 == 0 else 'lima'} {i}" for i in range(12)]
    eval_run = make_eval_run(eval_set, [i % 2 == 0 for i in range(12)], outputs=outputs)
    make_eval_run(eval_set, [True] * 12, outputs=["paris"] * 12, variant="other")  # its matches are not this run's
    while index_pending(limit=2):
        pass

    def found(text: str) -> list[str]:
        rows = search_results(EvalResult.objects.filter(eval_run=eval_run), eval_run, ResultQuery(text=text))
        return sorted(rows.values_list("case_id", flat=True))

    listed = {text: found(text) for text in ("paris", "lima 1", "answer", "nowhere")}
    assert listed["paris"] == ["c0", "c3", "c6", "c9"] and listed["nowhere"] == []
    monkeypatch.setattr(search, "FEW_MATCHES", 0)  # every search through the subquery
    assert {text: found(text) for text in listed} == listed
