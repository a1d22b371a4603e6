"""``DjangoEvalStore``: the engine's ``EvalStore`` on the Django models.

The runner calls ``on_event`` / ``on_result`` from its event loop; both only enqueue. One writer
thread drains the queue in small batches, each batch one transaction, so a case is in the
database within milliseconds of finishing and a crash loses only the cases in flight. Events
create their ``Run`` row (status ``running``) as they arrive, so a slow case's trace can be
watched while it runs; the result completes the row.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from django.db import close_old_connections, connection, transaction
from django.db.models import F
from django.utils import timezone

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, new_eval_run_id
from apps.traces.models import Event, Run
from apps.traces.services import RunAggregate, event_row, run_fields, ts_to_datetime
from evalcore.report import EvalReport, report_to_dict
from evalcore.store import EvalRunInfo
from evalcore.tracing import TraceEvent
from evalcore.types import (
    Case,
    CaseResult,
    CaseStatus,
    ErrorInfo,
    RunRecord,
    Score,
    expected_hash,
    to_jsonable,
)

log = logging.getLogger(__name__)

_BATCH = 500
_FLUSH = object()
_STOP = object()


def result_score(scores: list[Score]) -> float | None:
    """Mean of the scorers' main scores (bools as 0/1), for "sort by score".

    Sub-scores (``citation_set.recall``, the judge's axes) are left out when the main score is
    there, so a pass/fail scorer and its own parts are not averaged together.
    """
    numeric = [s for s in scores if s.numeric is not None]
    main = [s for s in numeric if "." not in s.name] or numeric
    values = [s.numeric for s in main]
    return sum(values) / len(values) if values else None


class DjangoEvalStore:
    """Persists eval runs, runs, events and results through the Django ORM.

    Args:
        target_id: Stamped on every ``Run`` row.
        eval_run_id: Results go to this eval run (default: the id in each run's metadata).
        rescore: Results annotate runs that are already stored (a re-scored eval run); run
            rows are linked, never written again.

    Use as a context manager (or call :meth:`close`) so the writer thread finishes.
    """

    def __init__(self, *, target_id: str = "", eval_run_id: str | None = None, rescore: bool = False) -> None:
        self.target_id = target_id
        self.eval_run_id = eval_run_id
        self.rescore = rescore
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._run_pks: dict[str, int] = {}
        self._aggregates: dict[str, RunAggregate] = defaultdict(RunAggregate)
        self._lock = threading.Lock()

    # -- EvalStore protocol -------------------------------------------------------------------

    def start_eval_run(self, info: EvalRunInfo, *, eval_set_id: int | None = None, n_total: int = 0) -> str:
        """Create the ``EvalRun`` row (status running) and return its id."""
        from apps.evals.models import EvalSet

        if eval_set_id is None:
            eval_set_id = EvalSet.objects.get(name=info.set_name).pk
        eval_run = EvalRun.objects.create(
            id=new_eval_run_id(),
            eval_set_id=eval_set_id,
            target_id=info.target_id,
            variant=info.variant,
            split=info.split,
            model=info.model or "",
            git_sha=info.git_sha or "",
            git_dirty=info.git_dirty,
            scorer_specs=info.scorer_specs,
            config=info.config,
            set_hash=info.set_hash,
            status=EvalRunStatus.RUNNING,
            started=timezone.now(),
            n_total=n_total,
            source_eval_run_id=info.source_eval_run_id,
        )
        self.target_id = self.target_id or info.target_id
        self.eval_run_id = self.eval_run_id or eval_run.id
        return eval_run.id

    def on_event(self, event: TraceEvent) -> None:
        self._ensure_thread()
        self._queue.put(("event", event))

    def on_result(self, result: CaseResult) -> None:
        if self._error is not None:
            # stop the run: results after a failed write could not be stored
            raise RuntimeError("the result writer failed; the run stops here") from self._error
        self._ensure_thread()
        self._queue.put(("result", result))

    def flush(self) -> None:
        """Block until everything queued so far is committed.

        Raises:
            RuntimeError: The writer thread failed (its error is chained).
        """
        if self._thread is None:
            return
        done = threading.Event()
        self._queue.put((_FLUSH, done))
        while not done.wait(0.2):
            if self._thread is None or not self._thread.is_alive():
                break
        if self._error is not None:
            raise RuntimeError("the result writer failed") from self._error

    def close(self) -> None:
        """Flush and stop the writer thread (stopped even when the flush reports a failure).

        Raises:
            RuntimeError: The writer thread failed (its error is chained).
        """
        if self._thread is None:
            return
        try:
            self.flush()
        finally:
            self._queue.put((_STOP, None))
            self._thread.join()
            self._thread = None

    def __enter__(self) -> DjangoEvalStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def finish_eval_run(self, eval_run_id: str, report: EvalReport, *, status: str = "finished") -> None:
        self.flush()
        finish_eval_run(eval_run_id, report, status=status)

    def iter_runs(self, eval_run_id: str) -> Iterator[tuple[Case, RunRecord]]:
        return iter_stored_runs(eval_run_id)

    # -- writer thread ------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._writer, name="evalsite-result-writer", daemon=True)
                self._thread.start()

    def _writer(self) -> None:
        close_old_connections()
        try:
            while True:
                items = [self._queue.get()]
                while len(items) < _BATCH:
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                data = [i for i in items if i[0] in ("event", "result")]
                if data and self._error is None:
                    try:
                        self._write_batch(data)
                    except BaseException as exc:
                        log.exception("result writer failed")
                        self._error = exc
                for kind, payload in items:
                    if kind is _FLUSH:
                        payload.set()
                if any(kind is _STOP for kind, _ in items):
                    return
        finally:
            connection.close()

    def _write_batch(self, items: list[tuple[str, Any]]) -> None:
        finished = {item[1].run.run_id for item in items if item[0] == "result"}
        with transaction.atomic():
            # Runs whose first event is in this batch and that do not finish in it get a
            # "running" row now, so their trace is visible while they run.
            pending_events: dict[str, list[TraceEvent]] = defaultdict(list)
            for kind, obj in items:
                if kind == "event":
                    self._aggregates[obj.run_id].add(obj)
                    pending_events[obj.run_id].append(obj)
            if self.rescore:
                unknown = [rid for rid in pending_events if rid not in self._run_pks]
                self._run_pks.update(Run.objects.filter(run_id__in=unknown).values_list("run_id", "pk"))
            new_running = [rid for rid in pending_events if rid not in self._run_pks and rid not in finished]
            if new_running:
                rows = [
                    Run(
                        run_id=rid,
                        trace_id=pending_events[rid][0].trace_id,
                        target_id=self.target_id,
                        started=ts_to_datetime(pending_events[rid][0].ts),
                        metadata={},
                    )
                    for rid in new_running
                ]
                for row in Run.objects.bulk_create(rows):
                    self._run_pks[row.run_id] = row.pk

            results: list[CaseResult] = [obj for kind, obj in items if kind == "result"]
            if self.rescore:
                ids = [r.run.run_id for r in results]
                self._run_pks.update(Run.objects.filter(run_id__in=ids).values_list("run_id", "pk"))
                results_to_store: list[CaseResult] = []
            else:
                results_to_store = results
            to_create: list[Run] = []
            for result in results_to_store:
                record = result.run
                fields = run_fields(record, self._aggregates.get(record.run_id), target_id=self.target_id)
                pk = self._run_pks.get(record.run_id)
                if pk is None:
                    to_create.append(Run(run_id=record.run_id, **fields))
                else:
                    Run.objects.filter(pk=pk).update(**fields)
            for row in Run.objects.bulk_create(to_create):
                self._run_pks[row.run_id] = row.pk

            Event.objects.bulk_create(
                [event_row(self._run_pks[rid], e) for rid, events in pending_events.items() for e in events]
            )

            counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
            rows = []
            for result in results:
                eval_run_id = self.eval_run_id or str(result.run.metadata.get("eval_run_id"))
                outcome = result.outcome
                status = outcome.status.value
                counts[eval_run_id][status] += 1
                rows.append(
                    EvalResult(
                        eval_run_id=eval_run_id,
                        case_id=result.case.id,
                        repeat_index=result.run.repeat_index,
                        split=result.case.split or "",
                        run_id=self._run_pks[result.run.run_id],
                        scores=[s.to_dict() for s in result.scores],
                        passed=status == CaseStatus.PASSED,
                        status=status,
                        reason=outcome.reason.value,
                        # what the scorers compared with, kept whatever later happens to the set
                        expected=to_jsonable(result.case.expected),
                        expected_hash=expected_hash(result.case.expected),
                        score=result_score(result.scores),
                    )
                )
            EvalResult.objects.bulk_create(rows)
            for eval_run_id, by_status in counts.items():
                EvalRun.objects.filter(pk=eval_run_id).update(
                    n_done=F("n_done") + sum(by_status.values()),
                    n_passed=F("n_passed") + by_status.get("passed", 0),
                    n_failed=F("n_failed") + by_status.get("failed", 0),
                    n_errored=F("n_errored") + by_status.get("errored", 0),
                    n_unscored=F("n_unscored") + by_status.get("unscored", 0),
                )
        for rid in finished:
            self._run_pks.pop(rid, None)
            self._aggregates.pop(rid, None)
        self._notify({str(eval_run_id) for eval_run_id in counts})

    @staticmethod
    def _notify(eval_run_ids: set[str]) -> None:
        """Wake live pages now (Redis channel layer only; without it they tail the database)."""
        from apps.evals.consumers import notify_eval_run

        for eval_run_id in eval_run_ids:
            try:
                notify_eval_run(eval_run_id)
            except Exception:  # a push is an optimisation; the database tail still delivers
                log.warning("could not notify live pages of eval run %s", eval_run_id, exc_info=True)


def finish_eval_run(eval_run_id: str, report: EvalReport | None, *, status: str = "finished") -> None:
    """Mark an eval run finished / failed / interrupted and store its report as the summary."""
    fields: dict[str, Any] = {"status": status, "finished": timezone.now()}
    if report is not None:
        fields["summary"] = report_to_dict(report)
    EvalRun.objects.filter(pk=eval_run_id).update(**fields)


def report_from_db(eval_run_id: str, *, chunk_size: int = 2000) -> EvalReport:
    """The aggregate of every stored result of an eval run, rebuilt from the database.

    Used when a run was resumed (its cases ran in several processes), so the summary covers
    them all. Streams the rows: memory does not grow with the number of cases.
    """
    from evalcore.report import ReportBuilder

    builder = ReportBuilder(eval_run_id)
    rows = (
        EvalResult.objects.filter(eval_run_id=eval_run_id)
        .select_related("run")
        .only(
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
        .order_by("id")
    )
    for row in rows.iterator(chunk_size=chunk_size):
        error = row.run.error or None
        builder.add(
            CaseResult(
                case=Case(id=row.case_id, input=None, split=row.split or None),
                run=RunRecord(
                    case_id=row.case_id,
                    run_id=row.run.run_id,
                    trace_id=row.run.trace_id,
                    repeat_index=row.repeat_index,
                    error=ErrorInfo(error["type"], error["message"]) if error else None,
                    tokens_in=row.run.tokens_in,
                    tokens_out=row.run.tokens_out,
                ),
                scores=[Score.from_dict(s) for s in row.scores or []],
            )
        )
    return builder.build()


def iter_stored_runs(eval_run_id: str, *, chunk_size: int = 1000) -> Iterator[tuple[Case, RunRecord]]:
    """Stream an eval run's (case, run record) pairs from the database, for re-scoring."""
    from apps.evals.models import EvalCase

    eval_run = EvalRun.objects.get(pk=eval_run_id)
    results = EvalResult.objects.filter(eval_run=eval_run).select_related("run").order_by("id")
    case_cache: dict[str, Case] = {}
    for result in results.iterator(chunk_size=chunk_size):
        case = case_cache.get(result.case_id)
        if case is None:
            row = EvalCase.objects.filter(eval_set_id=eval_run.eval_set_id, case_id=result.case_id).first()
            case = stored_case(row) if row else Case(id=result.case_id, input=None, split=result.split or None)
            if len(case_cache) < 64:
                case_cache[result.case_id] = case
        run = result.run
        error = run.error or None
        yield (
            case,
            RunRecord(
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
            ),
        )


def stored_case(row: Any) -> Case:
    """An engine ``Case`` from an ``EvalCase`` row."""
    from evalcore.types import MISSING

    return Case(
        id=row.case_id,
        input=row.input,
        expected=row.expected if row.has_expected else MISSING,
        tags=list(row.tags or []),
        split=row.split,
        metadata=dict(row.metadata or {}),
    )
