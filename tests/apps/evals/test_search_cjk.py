"""Run-page text search inside Chinese, Japanese and Korean text (repro bh-38): a word in the
middle of a sentence is found (CJK runs are indexed as bigrams), and every other script keeps
working as before: English prefixes, NFD accents, Arabic, Cyrillic, Thai. Real SQLite here;
``scripts/test-postgres.sh tests/apps/evals/test_search_cjk.py`` runs the same on PostgreSQL."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.urls import reverse

from apps.evals.models import EvalCase, EvalResult, SearchIndexState
from apps.evals.queries.search import ResultQuery, search_results
from apps.evals.results.search_index import FTS_TABLE, SearchTerm, cjk_split, search_terms
from apps.evals.worker.sweeper import index_pending
from tests.apps.factories import make_eval_run, make_eval_set

REPRO = Path(__file__).resolve().parents[2] / "fixtures" / "repros" / "bh-38-cjk-search.jsonl"
pytestmark = pytest.mark.django_db


@pytest.fixture
def run():
    """The repro's seven cases (zh, ja, th, ar, ru, en, nfd), plus a Korean one, as case inputs."""
    records = [json.loads(line) for line in REPRO.read_text(encoding="utf-8").splitlines() if line.strip()]
    records.append({"id": "ko", "input": "서울에서 날씨가 좋습니다"})
    eval_set = make_eval_set("bh-38", n_cases=len(records), splits=("dev",))
    for case, record in zip(EvalCase.objects.filter(eval_set=eval_set).order_by("position"), records, strict=True):
        case.input = record["input"]
        case.save()
    names = [record["id"] for record in records]
    eval_run = make_eval_run(eval_set, [True] * len(records), outputs=["ok"] * len(records))
    assert index_pending() == [eval_run.pk]  # the sweeper indexes it: the searches below read the index
    return eval_run, {f"c{i}": name for i, name in enumerate(names)}


def found(run, text: str) -> list[str]:
    eval_run, names = run
    rows = search_results(EvalResult.objects.filter(eval_run=eval_run), eval_run, ResultQuery(text=text))
    return sorted(names[case_id] for case_id in rows.values_list("case_id", flat=True))


@pytest.mark.parametrize(
    ("word", "case"),
    [
        ("天气", "zh"),  # the repro: inside 今天天气很好
        ("公园", "zh"),
        ("今天", "zh"),
        ("很好", "zh"),  # the run's last two characters
        ("天气很好", "zh"),  # several bigrams, as a phrase
        ("天気", "ja"),
        ("東京", "ja"),
        ("晴れ", "ja"),  # kanji + hiragana
        ("날씨", "ko"),
        ("서울", "ko"),
        ("에서", "ko"),  # a particle inside 서울에서
        ("อากาศ", "th"),
        ("مساعدتك", "ar"),
        ("дела", "ru"),
        ("sunny", "en"),
        ("sun", "en"),  # a prefix
        ("café", "nfd"),  # the text holds cafe + U+0301
        ("cafe", "nfd"),
    ],
)
def test_a_word_is_found_inside_text_of_every_script(run, word, case):
    assert found(run, word) == [case]


def test_one_cjk_character_finds_every_position_and_a_phrase_needs_its_order(run):
    assert found(run, "天") == ["ja", "zh"]  # 天 starts a bigram in both
    assert found(run, "吧") == ["zh"]  # the last character of a run (not the start of any bigram)
    assert found(run, "好天") == []  # not in the text, though 好 and 天 both are
    assert found(run, "气天") == []  # both characters in the text, never in this order
    assert found(run, "天气 sunny") == []  # every term must match one document
    assert found(run, "Tokyo東京") == []  # "tokyo" is not in the text


def test_terms_and_documents_are_split_the_same_way():
    assert cjk_split("今天天气") == " 今天 天天 天气 气 "
    assert cjk_split("東") == " 東 "
    assert cjk_split("Paris 東京の天気") == "Paris  東京 京の の天 天気 気 "
    assert search_terms(["天气", "天", "Tokyo東京", "sun"]) == [
        SearchTerm(("天气",), prefix=False),
        SearchTerm(("天",), prefix=True),
        SearchTerm(("Tokyo",), prefix=True),
        SearchTerm(("東京",), prefix=False),
        SearchTerm(("sun",), prefix=True),
    ]


def test_the_run_page_and_api_find_the_word(client, viewer, run):
    eval_run, names = run
    client.force_login(viewer)
    page = client.get(reverse("evals:eval_run", args=[eval_run.pk]), {"text": "天气"}).content.decode()
    assert "No cases match." not in page
    body = client.get(f"/api/eval/runs/{eval_run.pk}", {"text": "天气"}).json()
    assert [names[r["case_id"]] for r in body["results"]["items"]] == ["zh"]


@pytest.mark.django_db(transaction=True)
def test_the_migration_empties_an_index_written_before(run):
    """Documents indexed before the bigram split are dropped, so the run is indexed again."""
    assert found(run, "天气") == ["zh"]
    assert SearchIndexState.objects.filter(indexed_upto__gt=0).exists()
    migration = importlib.import_module("apps.evals.migrations.0021_search_cjk_bigrams")
    with connection.schema_editor() as editor:  # a transaction=True test: no atomic block around it
        migration.reset_search_index(django_apps, editor)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {FTS_TABLE}")
        assert cursor.fetchone()[0] == 0
    assert not SearchIndexState.objects.exists()
    assert found(run, "公园") == ["zh"]  # scanned meanwhile (a search never writes the index)
    assert not SearchIndexState.objects.exists()
    assert index_pending() == [run[0].pk]  # indexed again by the next sweep
    assert SearchIndexState.objects.filter(indexed_upto__gt=0).exists()
    assert found(run, "公园") == ["zh"]
