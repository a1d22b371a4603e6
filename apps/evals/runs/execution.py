"""Executing eval runs: a prepared run against its target (:func:`execute_eval_run`), or a stored
run's outputs scored again (:func:`rescore_eval_run`). Both write each case as it finishes and
end the same way (:func:`_finish`): the run is never left ``running``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import DatabaseError
from django.utils import timezone

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus
from apps.evals.results.executor import executor_fields, this_executor
from apps.evals.results.readback import finish_eval_run, iter_stored_runs, report_from_db
from apps.evals.results.writer import DjangoEvalStore
from apps.evals.runs.casestream import CaseStream
from apps.evals.runs.config import JudgeConfig, RunConfig, read_run_config
from apps.evals.runs.earlystop import EarlyStopError, EarlyStopSink, early_stop_k
from apps.evals.runs.liveness import exit_guard
from apps.evals.runs.naming import create_numbered_run
from apps.evals.runs.plan import RunPlan
from apps.evals.sets.cases import set_cases, split_size
from apps.traces.models import Event, Run
from evalcore.discovery import TargetSpec, rebind_agents_scorer_specs
from evalcore.report import EvalReport
from evalcore.runner import rescore
from evalcore.scorer_registry import resolve_scorers
from evalcore.scorers.base import Scorer, ScorerServices
from evalcore.scoring import DEFAULT_SCORER_TIMEOUT_S
from evalcore.serial import to_record
from evalcore.simulator import UserSimulator
from evalcore.store import MultiSink
from evalcore.tracing import TraceEvent
from evalcore.types import Case, CaseResult

log = logging.getLogger(__name__)


@dataclass(slots=True)
class EvalRunOutcome:
    """A finished eval run and its report."""

    eval_run: EvalRun
    report: EvalReport


def execute_eval_run(
    eval_run: EvalRun,
    spec: TargetSpec,
    *,
    scorers: list[Scorer] | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    services: ScorerServices | None = None,
    resume: bool = False,
    on_self_exit: Callable[[str], None] | None = None,
    user_simulator: UserSimulator | None = None,
) -> EvalRunOutcome:
    """Run a prepared eval run to the end, writing each case as it finishes.

    ``user_simulator`` plays the user of scenario cases without a script (an
    :class:`evalcore.simulator.LLMUser`; ``None``: such cases are errored).

    ``on_self_exit`` is told the reason recorded on the run when a target ends the process with
    ``os._exit`` (see :func:`apps.evals.runs.liveness.exit_guard`), just before it ends.

    Never leaves the eval run ``running``: on an exception it is marked ``failed`` (or
    ``interrupted`` on Ctrl-C) and every finished case stays stored. With ``resume``, the
    cases that already have a result are skipped (a case in flight when the run stopped is run
    again, its partial trace replaced) and the summary is rebuilt over every stored result.
    """
    plan = RunPlan.of(eval_run, spec, scorers=scorers)
    repeat = plan.config.repeat
    cases: list[Case] | CaseStream
    if plan.config.case_ids:  # a run of chosen cases only (e.g. "re-run this case")
        cases = set_cases(eval_run.eval_set, eval_run.split, case_ids=sorted(set(plan.config.case_ids)))
        n_cases = len(cases)
    else:  # the whole split, streamed from the database: memory O(chunk), not O(cases)
        n_cases = split_size(eval_run.eval_set_id, eval_run.split)
        cases = CaseStream(eval_run.eval_set_id, eval_run.split)
    done: set[tuple[str, int]] = set()
    suspects: list[tuple[Case, int]] = []
    culprits: list[tuple[Case, int]] = []
    if resume:
        from apps.evals.runs.resume import crash_suspects, in_flight_case_ids  # a resume's own code

        done = set(EvalResult.objects.filter(eval_run=eval_run).values_list("case_id", "repeat_index"))
        # runs that were in flight: no result, a partial trace; they run again under the same id
        Run.objects.filter(run_id__startswith=f"{eval_run.id}:", eval_results__isnull=True).delete()
        candidates = set_cases(eval_run.eval_set, eval_run.split, case_ids=in_flight_case_ids(eval_run, repeat))
        suspects, culprits = crash_suspects(eval_run, candidates, repeat, done)
    executor = this_executor()
    EvalRun.objects.filter(pk=eval_run.pk).update(
        status=EvalRunStatus.RUNNING,
        started=eval_run.started or timezone.now(),
        finished=None,
        error="",
        n_total=n_cases * repeat,
        **executor_fields(executor),
    )
    if isinstance(cases, CaseStream):
        cases.prefetch()  # the first chunk is read while the writer starts and the loop is set up
    # a resumed run may have died of a case that kills the process: its marks are committed
    # before each target call, so such a case is named on the run (and isolated, then errored)
    try:
        store = DjangoEvalStore(target_id=spec.id, eval_run_id=eval_run.id, executor=executor, durable_starts=resume)
        store.start()
    except BaseException:
        if isinstance(cases, CaseStream):
            cases.close()
        raise
    # after the store: the cases that decided an early stop are kept
    early_stop = EarlyStopSink(spec.id, early_stop_k(plan.config))
    sink = MultiSink(store, _CallbackSink(on_result) if on_result else None, early_stop)

    def work() -> EvalReport:
        started = time.perf_counter()
        try:
            with exit_guard(eval_run.id, announce=on_self_exit, store=store):
                report = asyncio.run(
                    plan.run(
                        cases,
                        sink=sink,
                        done=done,
                        suspects=suspects,
                        culprits=culprits,
                        services=services,
                        user_simulator=user_simulator,
                    )
                )
        finally:
            if isinstance(cases, CaseStream):
                cases.close()
        if resume:
            # the whole resume's time: the suspects' own run first, then the rest (the second
            # run's report alone said 0.0 s when only suspects were left)
            elapsed = time.perf_counter() - started
            report = report_from_db(eval_run.id)
            report.elapsed_s = elapsed
        return report

    return _run_to_end(eval_run, store, work)


def _run_to_end(eval_run: EvalRun, store: DjangoEvalStore, work: Callable[[], EvalReport]) -> EvalRunOutcome:
    """Run ``work`` (the cases) and end the eval run, whatever happens: the one finish block of
    :func:`execute_eval_run` and :func:`rescore_eval_run`.

    The result writer stops first (no write of this thread races its transactions), then the run
    is marked ``finished``, ``failed`` (with the error, unless the writer's own failure is the
    root) or ``interrupted`` (Ctrl-C), with the report as its summary when there is one; a model
    reported by its runs is recorded when the run names none.

    Raises:
        StorageError: The result writer failed (the run is marked ``failed`` first).
        BaseException: Whatever ``work`` raised, after the run is ended.
    """
    report: EvalReport | None = None
    status: str = EvalRunStatus.FINISHED
    error = ""
    try:
        report = work()
    except KeyboardInterrupt:
        status = EvalRunStatus.INTERRUPTED
        raise
    except EarlyStopError as exc:  # the target cannot take this set's input: a plain sentence
        status = EvalRunStatus.FAILED
        error = str(exc)  # written once the result writer has stopped (below)
        raise
    except BaseException as exc:
        status = EvalRunStatus.FAILED
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        closed = _close_store(store, eval_run.id, status)
        if error and closed == status:  # a writer failure keeps its own (root) error
            try:
                EvalRun.objects.filter(pk=eval_run.pk).update(error=error)
            except DatabaseError:
                # the database that failed the run (a full disk) fails this too: the caller's one
                # line says why; the traceback only at debug level, as the writer's own
                log.debug("could not record the error on eval run %s", eval_run.id, exc_info=True)
        finish_eval_run(eval_run.id, report, status=closed)
        _record_reported_model(eval_run, store)
    eval_run.refresh_from_db()
    store.raise_if_failed()
    return EvalRunOutcome(eval_run, report)


def _close_store(store: DjangoEvalStore, eval_run_id: str, status: str) -> str:
    """Stop the result writer; a writer failure makes the run ``failed`` (never left ``running``)."""
    try:
        store.close()
    except RuntimeError as exc:
        cause = exc.__cause__ or exc
        try:
            EvalRun.objects.filter(pk=eval_run_id).update(
                error=f"result writer failed: {type(cause).__name__}: {cause}"
            )
        except DatabaseError:
            # the same database failed the writer (a full disk): the caller reports it in one line
            log.debug("could not record the writer failure on eval run %s", eval_run_id, exc_info=True)
        return EvalRunStatus.FAILED
    return status


def _record_reported_model(eval_run: EvalRun, store: DjangoEvalStore) -> None:
    """When the target declares no model, record the one its runs reported (first found): the
    writer's, or, when it wrote none of the runs with a model (a resume, a re-score), the stored
    runs' (a query over every result: skipped when this writer wrote them all)."""
    if eval_run.model:
        return
    reported: str | None = store.reported_model
    if not reported and (store.rescore or eval_run.results.count() != store.written):
        reported = (
            Run.objects.filter(eval_results__eval_run=eval_run)
            .exclude(model="")
            .values_list("model", flat=True)
            .first()
        )
    if reported:
        EvalRun.objects.filter(pk=eval_run.pk).update(model=reported)


class RescoreRefused(Exception):
    """A re-score that cannot start: nothing to score with, or the run's agents folder is gone."""


def rescore_scorers(
    source: EvalRun, specs: list[Any], *, judge_scorers: list[Scorer], agents_dir: str | None = None
) -> list[Scorer]:
    """The scorers to re-score ``source`` with: ``specs`` if given, else the run's own (none when
    the judge is given), predicates rebuilt from the agents folder (``agents_dir``, default the
    one the run recorded); then the judge's.

    Raises:
        ScorerSpecError: A bad spec.
        RescoreRefused: The run is still queued or running; nothing to score with; or the
            agents folder is gone or no longer defines a function the run was scored with.
    """
    if source.status in (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING):
        raise RescoreRefused(
            f"eval run {source.pk} is {source.status} ({source.n_done} of {source.n_total} cases stored): "
            "re-score it once it has ended"
        )
    if not specs:
        specs = [] if judge_scorers else list(source.scorer_specs)
        folder = agents_dir or read_run_config(source.config).agents_dir
        if folder:
            try:
                specs = rebind_agents_scorer_specs(specs, folder)
            except FileNotFoundError:
                raise RescoreRefused(
                    f"the run's scorers use functions from the agents folder {folder}, which is not there any "
                    "more; pass --agents-dir DIR (the folder now) or --scorer SPEC"
                ) from None
            except LookupError as exc:
                raise RescoreRefused(f"{exc}; pass --agents-dir DIR or --scorer SPEC") from None
    folder = agents_dir or read_run_config(source.config).agents_dir
    if folder and Path(folder).is_dir():
        # scorer classes registered by the agents modules (@register) exist once they are imported
        from apps.agents.registry import agents_discovery  # a rescore's: a run never loads it

        agents_discovery(folder)
    scorers = resolve_scorers(specs) + judge_scorers
    if not scorers:
        config = source.config if isinstance(source.config, dict) else {}
        tool = config.get("tool_name") or ("Inspect" if config.get("source") == "inspect_log" else None)
        if tool:
            raise RescoreRefused(
                f"eval run {source.pk} was imported from {tool}: its scores are {tool}'s, and Evalsite re-scores an "
                "imported run only when told how: give --scorer SPEC or --judge (the re-score is a new run beside "
                "it; the imported run stays as it is)"
            )
        raise RescoreRefused("nothing to score with: give --scorer SPEC or --judge")
    return scorers


def rescore_eval_run(
    source: EvalRun,
    scorers: list[Any],
    *,
    services: ScorerServices | None = None,
    concurrency: int | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    judge: JudgeConfig | None = None,
    scorer_timeout_s: float | None = DEFAULT_SCORER_TIMEOUT_S,
) -> EvalRunOutcome:
    """Score a stored eval run's outputs again into a new eval run linked to its source.

    The target is not called; the new run keeps the source's target, variant, split, model and
    git provenance (its config is the source's, re-scored with ``judge``), and its results
    annotate the same ``Run`` rows. Each scorer call is bounded by ``scorer_timeout_s`` seconds
    (recorded in the new run's config); ``concurrency`` scorings at once (default: a run's).

    Raises:
        RunConfigError: ``scorer_timeout_s`` is neither ``None`` nor a finite number > 0 (a
            ``ValueError``; nothing is written).
    """
    config = read_run_config(source.config).updated(
        rescored_from=source.id,
        scorer_timeout_s=scorer_timeout_s,
        **({"judge": judge} if judge is not None else {}),
    )

    scorer_objs = resolve_scorers(scorers)
    eval_run = create_numbered_run(
        eval_set=source.eval_set,
        target_id=source.target_id,
        variant=source.variant,
        split=source.split,
        model=source.model,
        git_sha=source.git_sha,
        git_dirty=source.git_dirty,
        scorer_specs=[to_record(s.spec()) for s in scorer_objs],
        config=config.stored(),
        set_hash=source.set_hash,
        set_version_id=source.set_version_id,
        status=EvalRunStatus.RUNNING,
        started=timezone.now(),
        n_total=source.n_done,
        source_eval_run=source,
        **executor_fields(),
    )

    pairs = list(iter_stored_runs(source.id))
    events_by_run = _events_by_run(source)
    store = DjangoEvalStore(target_id=source.target_id, eval_run_id=eval_run.id, rescore=True, executor=this_executor())
    store.start()
    sink = MultiSink(store, _CallbackSink(on_result) if on_result else None)

    def work() -> EvalReport:
        return asyncio.run(
            rescore(
                pairs,
                scorer_objs,
                eval_run_id=eval_run.id,
                sink=sink,
                concurrency=concurrency or RunConfig().concurrency,
                services=services,
                events_for=lambda run_id: events_by_run.get(run_id, []),
                scorer_timeout_s=scorer_timeout_s,
            )
        )

    return _run_to_end(eval_run, store, work)


def _events_by_run(source: EvalRun) -> dict[str, list[TraceEvent]]:
    """The trace events of every run of ``source``, by run id, in ``seq`` order (one query)."""
    by_run: dict[str, list[TraceEvent]] = {}
    rows = (
        Event.objects.filter(run__eval_results__eval_run=source)
        .select_related("run")
        .only("trace_id", "seq", "ts", "type", "name", "payload", "run__run_id")
        .order_by("run_id", "seq")
    )
    for e in rows.iterator(chunk_size=2000):
        run_id = e.run.run_id
        by_run.setdefault(run_id, []).append(
            TraceEvent(e.trace_id, run_id, e.seq, e.ts.timestamp(), e.type, e.name, e.payload)
        )
    return by_run


class _CallbackSink:
    def __init__(self, callback: Callable[[CaseResult], None]) -> None:
        self.callback = callback

    def on_event(self, event: Any) -> None:
        return None

    def on_result(self, result: CaseResult) -> None:
        self.callback(result)

    def flush(self) -> None:
        return None
