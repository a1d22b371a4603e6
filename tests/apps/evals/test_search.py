"""Search and filter a run's results (issue 13 §2): full text over input, expected and output
(SQLite FTS5 here, PostgreSQL's full-text search with DATABASE_URL), tag, metadata key=value,
score / latency / token ranges; in the URL (page) and the API."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.evals.models import EvalCase, EvalResult, EvalRun, SearchIndexState
from apps.evals.queries.results import run_results
from apps.evals.queries.search import ResultQuery, index_state, search_results
from apps.evals.runs.edits import delete_eval_run
from apps.evals.worker.sweeper import index_pending
from apps.traces.models import Run
from evalcore.errors import InvalidInputError
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def run():
    eval_set = make_eval_set("capitals", n_cases=4, splits=("dev",))
    inputs = ["What is the capital of France?", "Capital of Perú?", "Largest ocean?", "Boiling point of water?"]
    for index, case in enumerate(EvalCase.objects.filter(eval_set=eval_set).order_by("position")):
        case.input = {"question": inputs[index]}
        case.metadata = {"difficulty": "hard" if index % 2 else "easy", "level": index}
        case.tags = ["geo"] if index < 2 else ["science"]
        case.save()
    outputs = ["Paris, of course", "Lima", "The Pacific Ocean", "100 degrees Celsius"]
    eval_run = make_eval_run(eval_set, [True, False, True, False], outputs=outputs, scores=[0.9, 0.1, 0.8, 0.3])
    for index, result in enumerate(EvalResult.objects.filter(eval_run=eval_run).order_by("case_id")):
        Run.objects.filter(pk=result.run_id).update(elapsed_ms=100 * (index + 1), tokens_in=10 * index, tokens_out=10)
    assert index_pending() == [eval_run.pk]  # the sweeper indexes the finished run: searches read the index
    return eval_run


def cases(eval_run, **query) -> list[str]:
    rows = search_results(EvalResult.objects.filter(eval_run=eval_run), eval_run, ResultQuery(**query))
    return sorted(rows.values_list("case_id", flat=True))


def test_full_text_over_input_expected_and_output(run):
    assert cases(run, text="capital") == ["c0", "c1"]  # input
    assert cases(run, text="pacific OCEAN") == ["c2"]  # output, any case, every word
    assert cases(run, text="peru") == ["c1"]  # accents ignored
    assert cases(run, text="capital paris") == ["c0"]  # input and output together
    assert cases(run, text="celsius capital") == []
    assert cases(run, text='" OR * NEAR(') == []  # FTS syntax is searched as words, never run
    assert cases(run, text='" * (') == []  # no word at all: looked for as typed (it used to filter nothing)
    # a run not indexed yet is scanned (a search writes nothing), then read from the index once
    # the sweeper has indexed it
    extra = make_eval_run(run.eval_set, [True], case_ids=["c0"], outputs=["Paris again"])
    assert cases(extra, text="again") == ["c0"] and cases(run, text="again") == []
    assert not SearchIndexState.objects.filter(eval_run=extra).exists()
    assert index_state(extra).behind == 1
    assert index_pending() == [extra.pk]
    assert index_state(extra).ready
    assert cases(extra, text="again") == ["c0"] and cases(run, text="again") == []


def test_results_past_the_index_are_scanned_until_the_sweeper_indexes_them(run, client, viewer):
    """Results written after the run was indexed (e.g. a resumed run) are found by a scan of the
    results the index lacks, folded as the index folds (accents, case), together with the indexed
    ones; the page says "indexing…" meanwhile. Neither writes anything."""
    newest = EvalResult.objects.filter(eval_run=run).order_by("-id").first()
    extra = make_eval_run(run.eval_set, [True], case_ids=["c1"], outputs=["Lima, Perú again"])
    EvalResult.objects.filter(eval_run=extra).update(eval_run=run, repeat_index=1)  # past the run's index
    EvalRun.objects.filter(pk=run.pk).update(finished=timezone.now())  # as a resume ends it again
    assert cases(run, text="peru") == ["c1", "c1"]  # one from the index, one scanned
    assert cases(run, text="PERU again") == ["c1"]
    client.force_login(viewer)
    page = client.get(reverse("evals:eval_run", args=[run.pk]), {"text": "peru"}).content.decode()
    assert "indexing… 1 case not in the search index yet" in page
    assert SearchIndexState.objects.get(eval_run=run).indexed_upto == newest.pk
    assert index_pending() == [run.pk]
    assert cases(run, text="peru") == ["c1", "c1"]
    page = client.get(reverse("evals:eval_run", args=[run.pk]), {"text": "peru"}).content.decode()
    assert "indexing…" not in page


def test_tag_metadata_and_ranges(run):
    assert cases(run, tag="geo") == ["c0", "c1"]
    assert cases(run, meta="difficulty=hard") == ["c1", "c3"]
    assert cases(run, meta="level=2") == ["c2"]  # read as JSON: the number 2
    # score: the mean of exact_match (1 / 0) and similarity: 0.95, 0.05, 0.9, 0.15
    assert cases(run, score_min=0.5) == ["c0", "c2"] and cases(run, score_max=0.1) == ["c1"]
    assert cases(run, latency_min_ms=250, latency_max_ms=350) == ["c2"]
    assert cases(run, tokens_max=20) == ["c0", "c1"]  # 0 + 10 and 10 + 10 tokens
    assert cases(run, tag="geo", score_min=0.5, text="paris") == ["c0"]
    with pytest.raises(InvalidInputError) as bad:
        cases(run, meta="difficulty__contains=h")
    assert bad.value.field == "meta"
    with pytest.raises(InvalidInputError) as inverted:
        cases(run, score_min=0.9, score_max=0.1)
    assert inverted.value.field == "score_min"


def test_the_run_page_and_api_filter_by_url(client, viewer, run):
    client.force_login(viewer)
    url = reverse("evals:eval_run", args=[run.pk])
    page = client.get(url, {"text": "ocean", "tag": "science"}).content.decode()
    assert "1 case" in page or ">c2<" in page
    assert run_results(run, query=ResultQuery(text="ocean")).total == 1
    body = client.get(f"/api/eval/runs/{run.pk}", {"text": "capital", "score_min": 0.5}).json()
    assert [r["case_id"] for r in body["results"]["items"]] == ["c0"] and body["results"]["total"] == 1
    bad = client.get(url, {"meta": "no-equals-sign"})
    assert bad.status_code == 200 and "meta must be key=value" in bad.content.decode()
    assert client.get(f"/api/eval/runs/{run.pk}", {"meta": "x"}).status_code == 400


def test_deleting_a_run_drops_it_from_the_index(run):
    assert cases(run, text="paris") == ["c0"]
    ids = list(EvalResult.objects.filter(eval_run=run).values_list("pk", flat=True))
    delete_eval_run(run)
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            marks = ", ".join(["%s"] * len(ids))
            cursor.execute(f"SELECT COUNT(*) FROM evals_result_fts WHERE rowid IN ({marks})", ids)
            assert cursor.fetchone()[0] == 0


def test_a_scan_is_bounded_and_the_page_says_so(client, viewer, monkeypatch):
    """A run far from indexed is scanned up to SCAN_LIMIT results per search (the rest is found
    once the sweeper has indexed it), and the page says how many were read."""
    from apps.evals.queries import search
    from apps.evals.results import search_index

    monkeypatch.setattr(search_index, "SCAN_LIMIT", 2)
    monkeypatch.setattr(search, "SCAN_LIMIT", 2)
    eval_set = make_eval_set("bounded", n_cases=3, splits=("dev",))
    eval_run = make_eval_run(eval_set, [True, True, True], outputs=["same word"] * 3)
    assert cases(eval_run, text="word") == ["c0", "c1"]  # the first two past the (empty) index
    client.force_login(viewer)
    page = client.get(reverse("evals:eval_run", args=[eval_run.pk]), {"text": "word"}).content.decode()
    assert "indexing… 3 cases not in the search index yet: the first 2 are scanned instead" in page
    assert index_pending() == [eval_run.pk]
    assert cases(eval_run, text="word") == ["c0", "c1", "c2"]
