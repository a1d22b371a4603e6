"""Run-page and API search for a text with no word in it (only emoji or punctuation: ``🙃``, ``，``,
``...``, ``%``, ``*``, ``"``) finds the cases holding it, never every case (it used to filter
nothing); and fullwidth letters match their plain forms on SQLite as on PostgreSQL (both fold
documents and queries: ``ＡＢ`` finds ``abc``, ``ab`` finds ``ＡＢＣ``). Run on PostgreSQL too:
``scripts/test-postgres.sh tests/apps/evals/test_search_symbols.py``."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.core.auth import create_api_token
from apps.evals.models import EvalCase, EvalResult
from apps.evals.queries.search import ResultQuery, index_state, search_results
from apps.evals.worker.sweeper import index_pending
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

OUTPUTS = {
    "c0": "All good 🙃 really",
    "c1": "一，二，三",  # fullwidth commas
    "c2": "wait... what",
    "c3": "grew 5% in a year",
    "c4": "a * b",
    "c5": 'she said "hi"',
    "c6": "abc plain",
    "c7": "ＡＢＣ fullwidth",
    "c8": "snake_case",
}


@pytest.fixture(params=["indexed", "not indexed"])
def run(request):
    eval_set = make_eval_set("symbols", n_cases=len(OUTPUTS), splits=("dev",))
    EvalCase.objects.filter(eval_set=eval_set).update(input="question")  # plain text: no JSON quotes
    eval_run = make_eval_run(eval_set, [True] * len(OUTPUTS), case_ids=list(OUTPUTS), outputs=list(OUTPUTS.values()))
    if request.param == "indexed":
        assert index_pending() == [eval_run.pk]
    return eval_run


def cases(eval_run, text: str) -> list[str]:
    rows = search_results(EvalResult.objects.filter(eval_run=eval_run), eval_run, ResultQuery(text=text))
    return sorted(rows.values_list("case_id", flat=True))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("🙃", ["c0"]),
        ("，", ["c1"]),
        ("...", ["c2"]),
        ("%", ["c3"]),
        ("*", ["c4"]),
        ('"', ["c5"]),
        ("☃", []),
        ("_", ["c8"]),  # the index splits on it: no word either
        ("\u0301", []),  # a lone accent, which search ignores: nothing, not everything
    ],
)
def test_a_text_with_no_word_finds_only_the_cases_holding_it(run, text, expected) -> None:
    assert cases(run, text) == expected


def test_fullwidth_and_plain_letters_find_each_other_on_every_backend(run) -> None:
    assert cases(run, "ＡＢ") == ["c6", "c7"]
    assert cases(run, "ab") == ["c6", "c7"]
    assert cases(run, "ＡＢＣ plain") == ["c6"]


def test_the_page_and_the_api_say_so(run, client, viewer) -> None:
    client.force_login(viewer)
    page = client.get(reverse("evals:eval_run", args=[run.pk]), {"text": "🙃"}).content.decode()
    assert 'id="search-scan"' in page and "No word to look up in the search index" in page
    assert "All good" in page and "abc plain" not in page
    state = index_state(run, "🙃")
    assert state.unindexable and not state.ready and state.behind == len(OUTPUTS)
    assert not index_state(run, "abc").unindexable
    raw = create_api_token(user=viewer)[1]
    answer = client.get(f"/api/eval/runs/{run.pk}", {"text": "%"}, HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert answer.status_code == 200, answer.content
    assert [item["case_id"] for item in answer.json()["results"]["items"]] == ["c3"]
