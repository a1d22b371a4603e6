"""The full-text index of results (writes): each result's case input, expected value and output as
one document, in SQLite's FTS5 (embedded default) or a PostgreSQL ``tsvector`` table with a GIN
index (migration ``0014_search_index``). Reads: :mod:`apps.evals.queries.search`.

Chinese, Japanese and Korean text has no spaces between words, so a tokenizer that splits on
spaces reads a whole sentence (``今天天气很好``) as one token and only its start is found. Each run
of CJK characters is therefore written as its overlapping bigrams plus its last character
(``今天 天天 天气 气很 很好 好``), the way Lucene's CJK bigram filter indexes it, on both backends,
and a query is split the same way (:func:`search_terms`): a CJK word is the phrase of its bigrams,
a single CJK character a prefix. Other scripts are indexed as they were (migration
``0021_search_cjk_bigrams`` re-indexes what was written before).

Documents and queries are folded alike on both backends (:func:`fold`: case, accents and Unicode
compatibility forms, so fullwidth ``ＡＢ`` finds ``abc`` and ``ＡＢＣ`` is found by ``ab``, on
SQLite as on PostgreSQL; migration ``0023_search_fold_sqlite`` re-indexes what SQLite held). A
query with no word at all (only emoji or punctuation) does not use the index: it is looked for
as it is, folded the same way, by the scan of :func:`unindexed_matches`.

A run is indexed off the request path (a read never writes): by the task worker as the run
ends, and by the sweeper (:mod:`apps.evals.worker.sweeper`) for any run no longer live whose
results are not all indexed yet (:class:`~apps.evals.models.SearchIndexState` keeps how far it
got), so writing results costs nothing extra. Indexing a 100,000-case run takes a few seconds
once; until then a search scans the results the index lacks (:func:`unindexed_matches`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
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
    configuration keeps accents. Like unicode61, a mark that is not an accent (Thai vowel and
    tone marks, Devanagari signs) separates tokens, so both backends find the same words."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(_fold_char(c) for c in decomposed).lower()


# combining diacritical marks (and their extended / supplement / for-symbols / half-mark
# blocks) and the kana voicing marks: accents, dropped
_ACCENTS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f\u3099\u309a]")


def _fold_char(c: str) -> str:
    if _ACCENTS.match(c):
        return ""
    return " " if unicodedata.category(c) in ("Mn", "Mc", "Me") else c


# Han (with extensions and compatibility ideographs), kana, Hangul syllables and jamo, the
# iteration marks and the prolonged sound mark: scripts written without spaces between words.
_CJK_RUN = re.compile(
    "[\u1100-\u11ff\u3005-\u3007\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]+"
)


def _bigrams(run: str) -> list[str]:
    """A CJK run's overlapping bigrams (``今天天气`` -> ``今天 天天 天气``); a single character alone."""
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


def cjk_split(text: str) -> str:
    """``text`` with each CJK run written as its bigrams and its last character, space-separated
    (``今天天气`` -> `` 今天 天天 天气 气 ``); other text unchanged. The last character makes a
    one-character query (a prefix of a bigram or that character) find every character."""
    return _CJK_RUN.sub(_split_run, text)


def _split_run(match: re.Match[str]) -> str:
    run = match.group()
    tokens = _bigrams(run) if len(run) == 1 else [*_bigrams(run), run[-1]]
    return " " + " ".join(tokens) + " "


def search_terms(words: Iterable[str]) -> list[SearchTerm]:
    """The query words as index terms: a word of other scripts as itself (a prefix), a CJK run as
    the phrase of its bigrams (a prefix when it is one character); a word mixing both gives a
    term per part (``Tokyo東京`` -> ``tokyo``, ``東京``)."""
    terms: list[SearchTerm] = []
    for word in words:
        start = 0
        for match in _CJK_RUN.finditer(word):
            if match.start() > start:
                terms.append(SearchTerm((word[start : match.start()],), prefix=True))
            run = match.group()
            terms.append(SearchTerm(tuple(_bigrams(run)), prefix=len(run) == 1))
            start = match.end()
        if start < len(word):
            terms.append(SearchTerm((word[start:],), prefix=True))
    return terms


@dataclass(frozen=True, slots=True)
class SearchTerm:
    """One term of a query: tokens that must appear consecutively in a document.

    Attributes:
        tokens: One word, or a CJK run's bigrams.
        prefix: The (only) token matches as a prefix.
    """

    tokens: tuple[str, ...]
    prefix: bool


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


def _document(case_input: Any, expected: Any, output: Any) -> str:
    """One result's document as it is indexed: input, expected value and output, one per line."""
    return "\n".join(_text(v) for v in (case_input, expected, output))[:_MAX_DOCUMENT_CHARS]


def _documents_sql() -> str:
    results, cases, runs = EvalResult._meta.db_table, EvalCase._meta.db_table, Run._meta.db_table
    return (
        f"SELECT r.id, c.input, r.expected, t.final_answer FROM {results} r "
        f"JOIN {runs} t ON t.id = r.run_id "
        f"LEFT JOIN {cases} c ON c.eval_set_id = %s AND c.case_id = r.case_id "
        "WHERE r.eval_run_id = %s AND r.id > %s AND r.id <= %s ORDER BY r.id"
    )


def indexed_upto(eval_run: EvalRun) -> int:
    """The id up to which the run's results are in the index (0: none). A read."""
    return SearchIndexState.objects.filter(eval_run=eval_run).values_list("indexed_upto", flat=True).first() or 0


def ensure_indexed(eval_run: EvalRun) -> None:
    """Index the run's results not indexed yet (none when it is up to date). One transaction.

    A write: called by the worker and the sweeper, never on a request (see the module's note).
    """
    state, _ = SearchIndexState.objects.get_or_create(eval_run=eval_run)
    newest = EvalResult.objects.filter(eval_run=eval_run).order_by("-id").values_list("id", flat=True).first() or 0
    if newest <= state.indexed_upto:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_documents_sql(), [eval_run.eval_set_id, eval_run.pk, state.indexed_upto, newest])
        while rows := cursor.fetchmany(_BATCH):
            _write(
                (result_id, cjk_split(_document(case_input, expected, output)))
                for result_id, case_input, expected, output in rows
            )
        SearchIndexState.objects.filter(pk=state.pk).update(indexed_upto=newest)


SCAN_LIMIT = 10_000
"""How many results past the index one search scans at most (:func:`unindexed_matches`; about
0.5 s on SQLite). The sweeper indexes a run no longer live within a sweep or two."""


@dataclass(frozen=True, slots=True)
class TailMatches:
    """What a scan of the results past the index found.

    Attributes:
        ids: The scanned results holding every word.
        scanned: How many results past the index were read (0: the index covers the run).
        complete: Every result past the index was read (``False``: more than :data:`SCAN_LIMIT`).
    """

    ids: list[int]
    scanned: int
    complete: bool


def unindexed_matches(eval_run: EvalRun, words: Iterable[str], upto: int | None = None) -> TailMatches:
    """The run's results past the index (id above ``upto``, default :func:`indexed_upto`) whose
    document holds every word, read without writing anything: each word and each document folded
    as the index folds them (case and accents ignored), a word matched anywhere in the text (the
    index matches it as a word prefix, so a scan may find a little more). At most
    :data:`SCAN_LIMIT` results are read."""
    start = indexed_upto(eval_run) if upto is None else upto
    folded = [fold(word) for word in words if word]
    ids: list[int] = []
    scanned = 0
    with connection.cursor() as cursor:
        cursor.execute(_documents_sql(), [eval_run.eval_set_id, eval_run.pk, start, 2**62])
        while scanned < SCAN_LIMIT and (rows := cursor.fetchmany(min(_BATCH, SCAN_LIMIT - scanned))):
            scanned += len(rows)
            for result_id, case_input, expected, output in rows:
                document = fold(_document(case_input, expected, output))
                if all(word in document for word in folded):
                    ids.append(result_id)
        complete = scanned < SCAN_LIMIT or not cursor.fetchone()
    return TailMatches(ids, scanned, complete)


def _write(documents: Iterable[tuple[int, str]]) -> None:
    # folded on both backends (and the queries with them): compatibility forms (fullwidth ＡＢ,
    # the ﬁ ligature) are their plain letters on SQLite as on PostgreSQL (migration 0023)
    rows = [(result_id, fold(document)) for result_id, document in documents]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
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
