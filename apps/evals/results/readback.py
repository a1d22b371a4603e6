"""Stored eval runs read back as engine values (cases, run records, a rebuilt report), and the end
of a run written (status and summary). The result writer is ``apps.evals.results.writer``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import batched
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.evals.events import eval_run_finished
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalRunStatus
from apps.evals.results.costs import cost_new_results
from apps.evals.results.digest import store_digest
from evalcore.jsonvalue import MISSING
from evalcore.report import EvalReport, ReportBuilder
from evalcore.serial import from_record, to_record
from evalcore.types import Case, CaseResult, ErrorInfo, RunRecord, Score


def result_score(scores: list[Score]) -> float | None:
    """Mean of the scorers' main scores (bools as 0/1), for "sort by score".

    Sub-scores (``citation_set.recall``, the judge's axes) are left out when the main score is
    there, so a pass/fail scorer and its own parts are not averaged together.
    """
    numeric = [s for s in scores if s.numeric is not None]
    main = [s for s in numeric if "." not in s.name] or numeric
    values = [s.numeric for s in main if s.numeric is not None]
    return sum(values) / len(values) if values else None


def finish_eval_run(eval_run_id: str, report: EvalReport | None, *, status: str = EvalRunStatus.FINISHED) -> None:
    """Mark an eval run finished / failed / interrupted, store its report as the summary, and cost
    the results not costed yet when it finished (``summary["prices"]`` keeps the prices used,
    ``summary["cost_latency"]`` the run's figures). A failed or interrupted run is costed when a
    resume finishes it (or by ``evalsite reprice``): its end is often a database that refuses
    writes (a full disk), where costing would only add a second failure to the first.

    The process ends the run itself here, so no case is in flight any more.
    """
    fields: dict[str, Any] = {"status": status, "finished": timezone.now(), "in_flight": []}
    # each result's cost and latency, priced with the prices the run keeps (apps.evals.results.costs)
    costs = cost_new_results(eval_run_id) if status == EvalRunStatus.FINISHED else None
    if report is not None:
        fields["summary"] = to_record(report, json_mode=True)
    if costs is not None:
        summary = fields.get("summary")
        if summary is None:
            summary = EvalRun.objects.filter(pk=eval_run_id).values_list("summary", flat=True).first() or {}
        fields["summary"] = {**summary, **costs}
    EvalRun.objects.filter(pk=eval_run_id).update(**fields)
    transaction.on_commit(lambda: eval_run_finished.send(sender=EvalRun, eval_run_id=eval_run_id, status=str(status)))
    transaction.on_commit(lambda: store_digest(eval_run_id))  # the compare page's digest (issue 30, floor 5)


def report_from_db(eval_run_id: str, *, chunk_size: int = 2000) -> EvalReport:
    """The aggregate of every stored result of an eval run, rebuilt from the database.

    Used when a run was resumed or sharded (its cases ran in several processes), so the summary
    covers them all; a sharded run's last worker computes it before the run is finished, so its
    time is part of every sharded run's. Streams plain rows from a chunked cursor (no model
    instances, no per-row field converters): memory does not grow with the number of cases.
    A result's scores are parsed once per distinct stored text (a run's results mostly repeat a
    few: 10,000 results took 0.36 s with a parse per row on a busy 2-core machine, 0.13 s so).
    """
    builder = ReportBuilder(eval_run_id)
    rows = (
        EvalResult.objects.filter(eval_run_id=eval_run_id)
        .order_by("id")
        .values_list(
            "case_id",
            "repeat_index",
            "split",
            "scores",
            "run__run_id",
            "run__trace_id",
            "run__error",
            "run__tokens_in",
            "run__tokens_out",
        )
    )
    sql, params = rows.query.sql_with_params()
    parsed: dict[str, list[Score]] = {}  # stored scores text -> its scores (read only here)
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while chunk := cursor.fetchmany(chunk_size):
            for case_id, repeat_index, split, scores_text, run_id, trace_id, error_text, tokens_in, tokens_out in chunk:
                scores = parsed.get(scores_text) if scores_text is not None else []
                if scores is None:
                    scores = [from_record(Score, s) for s in _json(scores_text) or []]
                    if len(parsed) < _PARSED_MAX:
                        parsed[scores_text] = scores
                error = _json(error_text)
                builder.add(
                    CaseResult(
                        case=Case(id=case_id, input=None, split=split or None),
                        run=RunRecord(
                            case_id=case_id,
                            run_id=run_id,
                            trace_id=trace_id,
                            repeat_index=repeat_index,
                            error=ErrorInfo(error["type"], error["message"]) if error else None,
                            tokens_in=tokens_in,
                            tokens_out=tokens_out,
                        ),
                        scores=scores,
                    )
                )
    return builder.build()


_PARSED_MAX = 4096
"""Distinct scores texts :func:`report_from_db` keeps parsed (a run whose every result's scores
differ parses each once, with bounded memory)."""


def _json(value: Any) -> Any:
    """A JSON column's value as read by a raw cursor: text (or already decoded, by a driver that
    decodes JSON itself), ``None`` for SQL NULL."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def iter_stored_runs(eval_run_id: str, *, chunk_size: int = 1000) -> Iterator[tuple[Case, RunRecord]]:
    """Stream an eval run's (case, run record) pairs from the database, for re-scoring.

    Results are read ``chunk_size`` at a time, each chunk's cases in one query: the number of
    queries grows with ``n / chunk_size``, never with the number of cases. A case no longer in
    the set comes back as a bare ``Case`` (id and split, no input).
    """
    eval_run = EvalRun.objects.get(pk=eval_run_id)
    results = EvalResult.objects.filter(eval_run=eval_run).select_related("run").order_by("id")
    for chunk in batched(results.iterator(chunk_size=chunk_size), chunk_size):
        wanted = {result.case_id for result in chunk}
        rows = EvalCase.objects.filter(eval_set_id=eval_run.eval_set_id, case_id__in=wanted)
        cases = {row.case_id: stored_case(row) for row in rows}
        for result in chunk:
            case = cases.get(result.case_id) or Case(id=result.case_id, input=None, split=result.split or None)
            yield case, _run_record(result)


def _run_record(result: EvalResult) -> RunRecord:
    """The engine's record of a stored result's run (output, error, timing, tokens)."""
    run = result.run
    error = run.error or None
    return RunRecord(
        case_id=result.case_id,
        run_id=run.run_id,
        trace_id=run.trace_id,
        repeat_index=result.repeat_index,
        output=run.final_answer,
        error=ErrorInfo(error["type"], error["message"]) if error else None,
        started_at=run.started.timestamp(),
        elapsed_ms=run.elapsed_ms or 0.0,
        model=run.model or None,
        tokens_in=run.tokens_in,
        tokens_out=run.tokens_out,
        metadata=dict(run.metadata or {}),
    )


def stored_case(row: Any) -> Case:
    """An engine ``Case`` from an ``EvalCase`` row."""
    return Case(
        id=row.case_id,
        input=row.input,
        expected=row.expected if row.has_expected else MISSING,
        tags=list(row.tags or []),
        split=row.split,
        metadata=dict(row.metadata or {}),
    )
