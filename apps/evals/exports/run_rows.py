"""What a run export holds, read a chunk of results at a time: one row per result.

A row is the case's canonical record (:func:`evalcore.tables.case_record`) as the result's run
was scored against it: its set version's snapshot (:func:`scored_cases`), so a case edited or
removed since keeps the input, expected value, tags, split and metadata the run saw; and, under
``evalsite``, the result: status, verdict, the expected value it was scored against, scores,
output, timings, the trace's run id and people's reviews. Memory stays flat: :data:`CHUNK`
results (with their cases and reviews, a few more queries) are held at a time, read by primary
key (keyset), so the export never keeps a database cursor open between chunks.

The comparison and review-queue exports (:mod:`apps.evals.exports.pairs`) reuse these pieces.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from apps.evals.models import (
    CaseSnapshot,
    EvalCase,
    EvalResult,
    EvalRun,
    Review,
    ReviewVerdict,
    SetVersionCase,
)
from apps.evals.queries.results import RESULT_ROW_FIELDS
from evalcore.conversations import report_turns
from evalcore.jsonvalue import MISSING
from evalcore.tables import CASE_COLUMNS, Column, case_record, columns

CHUNK = 500
"""Results read per query."""

ROOT = ("evalsite",)

RESULT_FIELDS = (*RESULT_ROW_FIELDS, "expected", "expected_hash", "run__final_answer", "run__error", "run__metadata")
"""A result row as the tables show it, plus what an export adds: the expected value it was scored
against, the output, the error and the run's metadata (a conversation case's turns)."""


@dataclass(slots=True)
class ExportTable:
    """An export ready to write: its columns (CSV / Parquet), its rows (read once), a file name stem."""

    columns: list[Column]
    rows: Iterator[dict[str, Any]]
    name: str


def result_chunks(eval_run: EvalRun, visible: Q | None = None) -> Iterator[list[EvalResult]]:
    """The run's results in storage order, :data:`CHUNK` at a time (``visible``: a filter on them)."""
    results = EvalResult.objects.filter(eval_run=eval_run).select_related("run").only(*RESULT_FIELDS)
    if visible is not None:
        results = results.filter(visible)
    last = 0
    while True:
        chunk = list(results.filter(pk__gt=last).order_by("pk")[:CHUNK])
        if not chunk:
            return
        yield chunk
        last = chunk[-1].pk


def cases_by_id(eval_set_id: int, case_ids: Iterable[str]) -> dict[str, EvalCase]:
    """The set's cases among ``case_ids``, by id (one query)."""
    rows = EvalCase.objects.filter(eval_set_id=eval_set_id, case_id__in=set(case_ids))
    return {case.case_id: case for case in rows}


def case_fields(case: EvalCase | CaseSnapshot | None, case_id: str) -> dict[str, Any]:
    """The case's canonical record; for a case no longer in the set, its id and a null input."""
    if case is None:
        return case_record(case_id, None, MISSING, [], "", {})
    expected = case.expected if case.has_expected else MISSING
    return case_record(case_id, case.input, expected, case.tags or [], case.split, case.metadata or {})


def version_cases(eval_set_id: int, version_id: int, case_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{case id: canonical record}`` of ``case_ids`` as set version ``version_id`` held them,
    from its :class:`~apps.evals.models.CaseSnapshot` rows (two queries); a case with no snapshot
    (a version recorded before snapshots were kept) is left out."""
    wanted = set(case_ids)
    if not wanted:
        return {}
    prints = dict(
        SetVersionCase.objects.filter(version_id=version_id, case_id__in=wanted).values_list("case_id", "fingerprint")
    )
    snapshots = CaseSnapshot.objects.filter(eval_set_id=eval_set_id, fingerprint__in=set(prints.values()))
    by_print = {snapshot.fingerprint: snapshot for snapshot in snapshots}
    return {
        case_id: case_fields(by_print[fingerprint], case_id)
        for case_id, fingerprint in prints.items()
        if fingerprint in by_print
    }


def as_scored_today(case: EvalCase | None, result: EvalResult) -> dict[str, Any]:
    """The record of a case its run's version kept no snapshot of: the set's case as it is now
    (a null input when it is gone), with what the result itself recorded of the case it was scored
    against: its expected value (when recorded) and, for a case gone, its split."""
    if case is None:
        record = case_record(result.case_id, None, MISSING, [], result.split or "", {})
    else:
        record = case_fields(case, result.case_id)
    if result.expected_recorded:
        expected = scored_expected(result)
        record = case_record(
            record["id"], record["input"], expected, record["tags"], record["split"], record["metadata"]
        )
    return record


def scored_cases(eval_set_id: int, results: Iterable[EvalResult]) -> dict[tuple[str, str], dict[str, Any]]:
    """``{(eval run id, case id): canonical record}``: each result's case as its run's set version
    held it (:func:`version_cases`; results of several runs, as a set's review queue has), else
    :func:`as_scored_today` (a run older than set versions, or a version older than snapshots).
    Each record is a new dict the caller may extend."""
    results = list(results)
    versions = dict(EvalRun.objects.filter(pk__in={r.eval_run_id for r in results}).values_list("pk", "set_version_id"))
    wanted: dict[int | None, set[str]] = defaultdict(set)
    for result in results:
        wanted[versions.get(result.eval_run_id)].add(result.case_id)
    held = {
        version: version_cases(eval_set_id, version, ids) if version is not None else {}
        for version, ids in wanted.items()
    }
    unheld = {r.case_id for r in results if r.case_id not in held[versions.get(r.eval_run_id)]}
    today = cases_by_id(eval_set_id, unheld) if unheld else {}
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for result in results:
        record = held[versions.get(result.eval_run_id)].get(result.case_id)
        key = (result.eval_run_id, result.case_id)
        found[key] = dict(record) if record is not None else as_scored_today(today.get(result.case_id), result)
    return found


def scored_expected(result: EvalResult) -> Any:
    """The expected value ``result`` was scored against; :data:`~evalcore.jsonvalue.MISSING`
    when the case had none, or for a result stored before it was recorded."""
    if not result.expected_recorded or result.expected_missing:
        return MISSING
    return result.expected


def reviews_by_result(result_ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """People's reviews of the results, oldest first, as plain dicts (one query)."""
    found: dict[int, list[dict[str, Any]]] = defaultdict(list)
    rows = Review.objects.filter(result_id__in=list(result_ids)).select_related("reviewer").order_by("created", "pk")
    for review in rows:
        found[review.result_id].append(
            {
                "reviewer": review.reviewer.get_username(),
                "verdict": review.verdict or None,  # None: a comment or axis scores alone
                "axis_scores": review.axis_scores or {},
                "comment": review.comment,
                "created": review.created.isoformat(),
                "updated": review.updated.isoformat(),
            }
        )
    return found


def human_label(reviews: list[dict[str, Any]]) -> str | None:
    """``pass`` / ``fail`` by majority of the verdicts (``unsure`` does not vote; a tie: ``None``),
    the rule of :func:`apps.evals.queries.reviews.human_labels`."""
    votes = Counter(review["verdict"] for review in reviews)
    yes, no = votes[ReviewVerdict.PASS], votes[ReviewVerdict.FAIL]
    if yes == no:
        return None
    return ReviewVerdict.PASS.value if yes > no else ReviewVerdict.FAIL.value


def score_values(scores: list[dict[str, Any]] | None) -> dict[str, Any]:
    """``{score name: value}`` of the scores that have one (errors left out)."""
    return {
        str(s.get("name")): s.get("value")
        for s in scores or []
        if isinstance(s, dict) and s.get("error") is None and s.get("value") is not None
    }


def result_data(result: EvalResult, reviews: list[dict[str, Any]]) -> dict[str, Any]:
    """What a result adds to its case's row (the ``evalsite`` object)."""
    run = result.run
    return {
        "eval_run": result.eval_run_id,
        "repeat": result.repeat_index,
        "status": result.status,
        "reason": result.outcome.reason.value,
        "passed": result.passed,
        "score": result.score,
        **({} if (expected := scored_expected(result)) is MISSING else {"expected": expected}),
        "output": run.final_answer,
        "error": run.error,
        "elapsed_ms": run.elapsed_ms,
        "tokens_in": run.tokens_in,
        "tokens_out": run.tokens_out,
        "trace": run.run_id,
        "human_label": human_label(reviews),
        "reviews": reviews,
        "values": score_values(result.scores),
        "scores": result.scores or [],
        # a conversation case: each turn's answer, tool calls, status and scores (else no key)
        **({} if (turns := report_turns(run.metadata, result.scores)) is None else {"turns": turns}),
    }


RESULT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("status", "text"),
    ("reason", "text"),
    ("passed", "bool"),
    ("score", "float"),
    ("expected", "json"),
    ("output", "json"),
    ("error", "json"),
    ("elapsed_ms", "float"),
    ("tokens_in", "int"),
    ("tokens_out", "int"),
    ("trace", "text"),
    ("human_label", "text"),
    ("reviews", "json"),
    ("scores", "json"),
)
"""A result's flat columns (name, kind), in order, after the run id and repeat."""


def result_columns(under: tuple[str, ...]) -> list[Column]:
    """:data:`RESULT_COLUMNS` under ``under`` (``("evalsite",)``, ``("evalsite", "a")``...)."""
    return [Column((*under, name), kind) for name, kind in RESULT_COLUMNS]


def run_score_names(eval_run: EvalRun, visible: Q | None = None) -> list[str]:
    """Every score name of the run, sorted: from its summary, else read from its results."""
    metrics = (eval_run.summary or {}).get("metrics") if isinstance(eval_run.summary, dict) else None
    if metrics:
        return sorted(metrics)
    results: QuerySet[EvalResult] = EvalResult.objects.filter(eval_run=eval_run)
    if visible is not None:
        results = results.filter(visible)
    names: set[str] = set()
    for scores in results.values_list("scores", flat=True).iterator(chunk_size=CHUNK):
        names.update(score_values(scores))
    return sorted(names)


def run_table(eval_run: EvalRun, *, visible: Q | None = None) -> ExportTable:
    """The run export: one row per result (see the module docstring); ``visible`` filters results
    (the traces a user may read), ``None`` for all."""
    names = run_score_names(eval_run, visible)
    table = [
        *CASE_COLUMNS,
        *columns("eval_run", kind="text", under=ROOT),
        *columns("repeat", kind="int", under=ROOT),
        *result_columns(ROOT),
        # a run of conversation cases: their per-turn results, one JSON column (Parquet)
        *(columns("turns", under=ROOT) if has_conversation_results(eval_run) else []),
        *[Column((*ROOT, "values", name)) for name in names],
    ]
    return ExportTable(table, _run_rows(eval_run, visible), f"run-{eval_run.pk}")


def has_conversation_results(eval_run: EvalRun) -> bool:
    """Whether any result of the run is a conversation case played turn by turn (its run's
    ``metadata["turns"]``, :mod:`evalcore.conversations`)."""
    return EvalResult.objects.filter(eval_run=eval_run, run__metadata__has_key="turns").exists()


def _run_rows(eval_run: EvalRun, visible: Q | None) -> Iterator[dict[str, Any]]:
    for chunk in result_chunks(eval_run, visible):
        cases = scored_cases(eval_run.eval_set_id, chunk)
        reviews = reviews_by_result(r.pk for r in chunk)
        for result in chunk:
            row = cases[(result.eval_run_id, result.case_id)]
            row["evalsite"] = result_data(result, reviews.get(result.pk, []))
            yield row
