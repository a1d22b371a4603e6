"""The full-text index of results (writes): each result's case input, expected value and output as
one document, in SQLite's FTS5 (embedded default) or a PostgreSQL ``tsvector`` table with a GIN
index (migration ``0014_search_index``). Reads: :mod:`apps.evals.queries.search`.

A run is indexed when it is first searched, and again for the results added since
(:class:`~apps.evals.models.SearchIndexState` keeps how far it got), so writing results costs
nothing extra. Indexing a 100,000-case run takes a few seconds once.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction

from apps.evals.models import EvalCase, EvalResult, EvalRun, SearchIndexState
from apps.traces.models import Run

FTS_TABLE = "evals_result_fts"
_BATCH = 2000
_MAX_DOCUMENT_CHARS = 200_000  # a huge output is indexed by its start (PostgreSQL caps a tsvector at 1 MB)


def fold(text: str) -> str:
    """Lower case without accents (``Perú`` -> ``peru``), as SQLite's ``unicode61 remove_diacritics``
    tokenizer reads text; applied to PostgreSQL documents and queries, whose ``simple``
    configuration keeps accents."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)  # JSON columns come back as text from a raw query
        except ValueError:
            return value
        value = decoded
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def ensure_indexed(eval_run: EvalRun) -> None:
    """Index the run's results not indexed yet (none when it is up to date). One transaction."""
    state, _ = SearchIndexState.objects.get_or_create(eval_run=eval_run)
    newest = EvalResult.objects.filter(eval_run=eval_run).order_by("-id").values_list("id", flat=True).first() or 0
    if newest <= state.indexed_upto:
        return
    results, cases, runs = EvalResult._meta.db_table, EvalCase._meta.db_table, Run._meta.db_table
    sql = (
        f"SELECT r.id, c.input, r.expected, t.final_answer FROM {results} r "
        f"JOIN {runs} t ON t.id = r.run_id "
        f"LEFT JOIN {cases} c ON c.eval_set_id = %s AND c.case_id = r.case_id "
        "WHERE r.eval_run_id = %s AND r.id > %s AND r.id <= %s ORDER BY r.id"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [eval_run.eval_set_id, eval_run.pk, state.indexed_upto, newest])
        while rows := cursor.fetchmany(_BATCH):
            _write(
                (
                    result_id,
                    "\n".join(_text(v) for v in (case_input, expected, output))[:_MAX_DOCUMENT_CHARS],
                )
                for result_id, case_input, expected, output in rows
            )
        SearchIndexState.objects.filter(pk=state.pk).update(indexed_upto=newest)


def _write(documents: Iterable[tuple[int, str]]) -> None:
    rows = list(documents)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            rows = [(result_id, fold(document)) for result_id, document in rows]
            cursor.executemany(
                f"INSERT INTO {FTS_TABLE} (result_id, document) VALUES (%s, to_tsvector('simple', %s)) "
                "ON CONFLICT (result_id) DO NOTHING",
                rows,
            )
        else:
            cursor.executemany(f"INSERT OR REPLACE INTO {FTS_TABLE} (rowid, body) VALUES (%s, %s)", rows)


def forget(result_ids: Iterable[int]) -> None:
    """Drop results from the index (when they are deleted)."""
    ids = list(result_ids)
    key = "result_id" if connection.vendor == "postgresql" else "rowid"
    with connection.cursor() as cursor:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            cursor.execute(f"DELETE FROM {FTS_TABLE} WHERE {key} IN ({', '.join(['%s'] * len(chunk))})", chunk)
