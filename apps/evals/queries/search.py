"""Search and filter a run's results (issue 13 §2): full text over input, expected and output
(SQLite FTS5 / PostgreSQL full-text search, :mod:`apps.evals.results.search_index`), by tag, by a metadata
``key=value``, and by ranges of score (0..1), latency (ms) and tokens (in + out). Every filter is
a URL parameter, so a link shares the view.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import F, Max, Q, QuerySet
from django.db.models.expressions import RawSQL

from apps.evals.models import EvalCase, EvalResult, EvalRun
from apps.evals.queries.tags import has_tag
from apps.evals.results.search_index import (
    FTS_TABLE,
    SCAN_LIMIT,
    SearchTerm,
    fold,
    indexed_upto,
    search_terms,
    unindexed_matches,
)
from evalcore.errors import InvalidInputError

_KEY = re.compile(r"^[A-Za-z0-9_\-]{1,100}$")
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(slots=True, frozen=True)
class ResultQuery:
    """What to keep of a run's results; empty fields do not filter.

    Attributes:
        text: Words that must all appear in the case's input, expected value or output (any order,
            case and accents ignored; a word matches as a prefix on SQLite).
        tag: A tag the case carries (today's set).
        meta: ``key=value`` on the case's metadata (the value read as JSON when it parses:
            ``level=3`` matches the number 3, ``ok=true`` the boolean; else as text).
        score_min, score_max: Range of the result's mean numeric score (0..1).
        latency_min_ms, latency_max_ms: Range of the target's wall time.
        tokens_min, tokens_max: Range of tokens in + out.
    """

    text: str = ""
    tag: str = ""
    meta: str = ""
    score_min: float | None = None
    score_max: float | None = None
    latency_min_ms: float | None = None
    latency_max_ms: float | None = None
    tokens_min: int | None = None
    tokens_max: int | None = None

    @property
    def active(self) -> bool:
        """Whether any filter is set."""
        return any(
            value not in (None, "")
            for value in (
                self.text,
                self.tag,
                self.meta,
                self.score_min,
                self.score_max,
                self.latency_min_ms,
                self.latency_max_ms,
                self.tokens_min,
                self.tokens_max,
            )
        )

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> ResultQuery:
        """From cleaned form or API data (missing keys: no filter)."""
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names and v not in (None, "")})


def _meta_filter(meta: str) -> Q:
    key, sep, raw = meta.partition("=")
    key = key.strip()
    if not sep or not _KEY.match(key) or "__" in key:
        raise InvalidInputError(
            "meta must be key=value with a key of letters, digits, - and _ (e.g. difficulty=hard)", field="meta"
        )
    raw = raw.strip()
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    match = Q(**{f"metadata__{key}": value})
    if not isinstance(value, str):
        match |= Q(**{f"metadata__{key}": raw})
    return match


def _words(text: str) -> list[str]:
    """The query's words the index holds: runs of letters and digits (``_`` alone is no word: the
    index splits on it)."""
    return [word for word in _WORD.findall(text) if any(char.isalnum() for char in word)][:20]


def _text_filter(eval_run: EvalRun, text: str) -> Q | None:
    """The results holding every word of ``text``: the index's matches up to where it reaches, and
    a scan of the results past it (a run not indexed yet, or the newest results of a live one);
    nothing is written here, the worker and the sweeper index (``apps.evals.worker.sweeper``).

    A text with no word the index holds (only emoji or punctuation: ``🙃``, ``，``, ``...``,
    ``%``) is looked for as it is, by the same scan from the run's first result (at most
    :data:`~apps.evals.results.search_index.SCAN_LIMIT` results, the page says so): it used to
    filter nothing and show every case. ``None`` when the text is blank."""
    words = _words(text)
    terms = search_terms(words)
    if not terms:
        if not text.strip():
            return None
        if not fold(text).strip():  # only accents or marks, which search ignores: nothing to find
            return Q(pk__in=[])
        return Q(pk__in=unindexed_matches(eval_run, [text.strip()], 0).ids)
    upto = indexed_upto(eval_run)
    if not upto:
        found = Q(pk__in=[])
    else:
        few = _few_matching_ids(terms, upto)
        found = Q(pk__in=few) if few is not None else Q(pk__in=_matching_ids(terms), pk__lte=upto)
    # the scan's join plans badly on PostgreSQL even with nothing to read (1.3 s at a million
    # results): it runs only when a result is past the index
    if _newest_id(eval_run) <= upto:
        return found
    tail = unindexed_matches(eval_run, words, upto)
    return found | Q(pk__in=tail.ids) if tail.scanned else found


@dataclass(frozen=True, slots=True)
class IndexState:
    """How far a run's full-text index reaches, for the page's "indexing…" note.

    Attributes:
        behind: How many of the run's results are past the index (0: searches use it alone).
    """

    behind: int
    unindexable: bool = False

    @property
    def ready(self) -> bool:
        """Whether the index covers every result (a text with no indexable word never uses it)."""
        return self.behind == 0 and not self.unindexable

    @property
    def scanned(self) -> int:
        """How many of the results past the index a search reads (at most ``SCAN_LIMIT``)."""
        return min(self.behind, SCAN_LIMIT)


def index_state(eval_run: EvalRun, text: str = "") -> IndexState:
    """How many of ``eval_run``'s results a search for ``text`` has to scan (two small reads):
    those past the index, or every result when ``text`` has no word the index holds
    (``unindexable``: only emoji or punctuation)."""
    if text.strip() and not search_terms(_words(text)):
        return IndexState(EvalResult.objects.filter(eval_run=eval_run).count(), unindexable=True)
    upto = indexed_upto(eval_run)
    if _newest_id(eval_run) <= upto:  # one index probe; the count walks every result past the index
        return IndexState(0)
    return IndexState(EvalResult.objects.filter(eval_run=eval_run, pk__gt=upto).count())


def _newest_id(eval_run: EvalRun) -> int:
    """The run's highest result id (0: none), one probe of its ``(eval_run, id)`` index (an
    ``EXISTS(id > n)`` walked PostgreSQL's primary key through later runs' rows instead)."""
    return EvalResult.objects.filter(eval_run=eval_run).aggregate(newest=Max("id"))["newest"] or 0


def search_results(results: QuerySet[EvalResult], eval_run: EvalRun, query: ResultQuery) -> QuerySet[EvalResult]:
    """``results`` (of ``eval_run``) narrowed by ``query``.

    Raises:
        InvalidInputError: A malformed ``meta`` or a range whose minimum exceeds its maximum.
    """
    for low, high, field in (
        (query.score_min, query.score_max, "score"),
        (query.latency_min_ms, query.latency_max_ms, "latency"),
        (query.tokens_min, query.tokens_max, "tokens"),
    ):
        if low is not None and high is not None and low > high:
            raise InvalidInputError(f"{field}: the minimum {low} is above the maximum {high}", field=f"{field}_min")
    if query.tag or query.meta:
        cases = EvalCase.objects.filter(eval_set_id=eval_run.eval_set_id)
        if query.tag:
            cases = cases.filter(has_tag(query.tag))
        if query.meta:
            cases = cases.filter(_meta_filter(query.meta))
        results = results.filter(case_id__in=cases.values("case_id"))
    if query.score_min is not None:
        results = results.filter(score__gte=query.score_min)
    if query.score_max is not None:
        results = results.filter(score__lte=query.score_max)
    if query.latency_min_ms is not None:
        results = results.filter(run__elapsed_ms__gte=query.latency_min_ms)
    if query.latency_max_ms is not None:
        results = results.filter(run__elapsed_ms__lte=query.latency_max_ms)
    if query.tokens_min is not None or query.tokens_max is not None:
        results = results.annotate(tokens_total=F("run__tokens_in") + F("run__tokens_out"))
        if query.tokens_min is not None:
            results = results.filter(tokens_total__gte=query.tokens_min)
        if query.tokens_max is not None:
            results = results.filter(tokens_total__lte=query.tokens_max)
    if query.text:
        matches = _text_filter(eval_run, query.text)
        if matches is not None:
            results = results.filter(matches)
    return results


FEW_MATCHES = 5000
"""Up to this many indexed matches, a search filters the run's results by the list of their ids."""


def _few_matching_ids(terms: list[SearchTerm], upto: int) -> list[int] | None:
    """The ids (up to ``upto``) of the indexed results holding every term when there are at most
    :data:`FEW_MATCHES` of them (one read of the index), else ``None``.

    Both databases plan ``id IN (subquery)`` beside ``eval_run_id = ?`` and ``ORDER BY id LIMIT
    50`` as a walk of the run's results in id order probing the subquery: SQLite walks its whole
    ``(eval_run, id)`` index (0.1-0.9 s on a million-result run, for the count and again for the
    page), PostgreSQL merge-joins the primary key with the index table (2-3 s). A list of
    constants is a probe per id on both."""
    subquery = _matching_ids(terms)
    column = "result_id" if connection.vendor == "postgresql" else "rowid"
    with connection.cursor() as cursor:
        cursor.execute(f"{subquery.sql} AND {column} <= %s LIMIT %s", [*subquery.params, upto, FEW_MATCHES + 1])
        ids = [row[0] for row in cursor.fetchall()]
    return ids if len(ids) <= FEW_MATCHES else None


def _matching_ids(terms: list[SearchTerm]) -> RawSQL:
    """A subquery of the ids of indexed results holding every term (no id list in Python): a
    word as a prefix, a CJK run as the phrase of its bigrams."""
    if connection.vendor == "postgresql":
        # each token folded like the documents and quoted (no tsquery syntax reaches the parser)
        def lexeme(token: str) -> str:
            return "'" + fold(token).replace("'", "''").replace("\\", "") + "'"

        query = " & ".join(
            f"{lexeme(term.tokens[0])}:*"
            if term.prefix
            else "(" + " <-> ".join(lexeme(token) for token in term.tokens) + ")"
            for term in terms
        )
        return RawSQL(f"SELECT result_id FROM {FTS_TABLE} WHERE document @@ to_tsquery('simple', %s)", [query])
    # each term quoted (no FTS5 syntax reaches the engine): a phrase of its tokens, a prefix when
    # marked; each token folded as the documents are (search_index.fold: fullwidth ＡＢ is ab)
    match = " ".join(
        '"' + " ".join(fold(token).replace('"', "") for token in term.tokens) + '"' + ("*" if term.prefix else "")
        for term in terms
    )
    return RawSQL(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", [match])
