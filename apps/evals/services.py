"""Every multi-row write of the evals app: importing case banks, running and re-scoring evals.

Views, the API, admin actions, management commands and tasks all call these functions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Count

from apps.evals.earlystop import EarlyStopError, EarlyStopSink, early_stop_k
from apps.evals.liveness import executor_fields, exit_guard, mark_stale_runs, this_executor
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalRunStatus, EvalSet
from apps.evals.store import DjangoEvalStore, finish_eval_run, iter_stored_runs, report_from_db, stored_case
from apps.traces.models import Event, Run
from evalcore.discovery import TargetSpec, rebind_agents_scorer_specs
from evalcore.loaders import cases_content_hash
from evalcore.report import EvalReport
from evalcore.runner import DEFAULT_SCORER_TIMEOUT_S, check_seconds, make_run_id, rescore, run_eval
from evalcore.scorers.base import Scorer, resolve_scorers
from evalcore.splits import assign_split, guard_split
from evalcore.store import MultiSink
from evalcore.tracing import TraceEvent
from evalcore.types import Case, CaseResult, ErrorInfo, RunRecord, to_jsonable

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ImportSummary:
    """What an import did: the set, and how many cases were created, updated, unchanged, removed."""

    eval_set: EvalSet
    created: int
    updated: int
    removed: int
    split_counts: dict[str, int]
    unchanged: int = 0
    kept_captured: int = 0


def import_cases(
    *,
    name: str,
    cases: list[Case],
    content_hash: str = "",
    source_path: str = "",
    description: str = "",
    split_ratios: tuple[float, float, float] = (0.6, 0.2, 0.2),
    hashed_splits: frozenset[str] | set[str] = frozenset(),
    prune_captured: bool = False,
    legacy_auto_ids: Mapping[str, str] | None = None,
) -> ImportSummary:
    """Create or replace an eval set's cases from a loaded case bank, in one transaction.

    The set afterwards holds ``cases`` (cases absent from the file are removed; their past
    results stay, keyed by case id), plus the cases captured in the portal's playground
    (``metadata["source"] == "playground"``), which a file never holds: they are kept after
    the file's cases (``kept_captured``) unless ``prune_captured``. A case without a split gets one from the stable hash
    of (set name, case id), so it never moves when others are added; a case already stored
    keeps its split unless the file names one (``hashed_splits``: ids whose split the loader
    hashed, i.e. the file gave none).

    ``legacy_auto_ids`` (derived id -> the id the first auto-id scheme gave the same case, from
    :attr:`evalcore.loaders.LoadedCaseBank.legacy_auto_ids`): a set imported before auto ids came
    from the input alone keeps the ids it holds. A derived id the set does not have yet takes
    over the stored case with its old-scheme id, or else a stored ``auto-`` case with the same
    input (its label was corrected), so that case is updated in place, keeping its split and
    its results, instead of being removed and created again.
    """
    with transaction.atomic():
        eval_set, _ = EvalSet.objects.get_or_create(name=name)
        eval_set.source_path = source_path or eval_set.source_path
        existing = {c.case_id: c for c in EvalCase.objects.filter(eval_set=eval_set)}
        if legacy_auto_ids and existing:
            cases, hashed_splits, renamed = _keep_legacy_auto_ids(cases, existing, legacy_auto_ids, hashed_splits)
            if renamed:
                content_hash = cases_content_hash(cases)
        eval_set.content_hash = content_hash
        if description:
            eval_set.description = description
        eval_set.save()
        to_create: list[EvalCase] = []
        to_update: list[EvalCase] = []
        seen: set[str] = set()
        for position, case in enumerate(cases):
            seen.add(case.id)
            row = existing.get(case.id)
            # a file without a split never moves a stored case: a split curated in the admin stays
            if row is not None and (case.split is None or case.id in hashed_splits):
                split = row.split
            else:
                split = case.split or assign_split(name, case.id, split_ratios)
            fields = {
                "input": to_jsonable(case.input),
                "expected": to_jsonable(case.expected) if case.has_expected else None,
                "has_expected": case.has_expected,
                "tags": list(case.tags),
                "split": split,
                "metadata": to_jsonable(case.metadata),
                "position": position,
            }
            if row is None:
                to_create.append(EvalCase(eval_set=eval_set, case_id=case.id, **fields))
            elif any(getattr(row, key) != value for key, value in fields.items()):
                for key, value in fields.items():
                    setattr(row, key, value)
                to_update.append(row)
        EvalCase.objects.bulk_create(to_create, batch_size=1000)
        if to_update:
            EvalCase.objects.bulk_update(
                to_update,
                ["input", "expected", "has_expected", "tags", "split", "metadata", "position"],
                batch_size=500,
            )
        absent = [row for cid, row in existing.items() if cid not in seen]
        captured = [] if prune_captured else [row for row in absent if _captured_in_portal(row)]
        removed_ids = [row.pk for row in absent if row not in captured]
        EvalCase.objects.filter(pk__in=removed_ids).delete()
        if captured:
            for offset, row in enumerate(sorted(captured, key=lambda r: r.position)):
                row.position = len(cases) + offset
            EvalCase.objects.bulk_update(captured, ["position"], batch_size=500)
            refresh_set_hashes([eval_set.pk])  # the set is the file plus the captured cases
    unchanged = len(cases) - len(to_create) - len(to_update)
    return ImportSummary(
        eval_set,
        len(to_create),
        len(to_update),
        len(removed_ids),
        split_counts(eval_set),
        unchanged=unchanged,
        kept_captured=len(captured),
    )


def _captured_in_portal(row: EvalCase) -> bool:
    """A case added in the portal (playground capture), not by a case-bank file."""
    return isinstance(row.metadata, dict) and row.metadata.get("source") == "playground"


def _keep_legacy_auto_ids(
    cases: list[Case],
    existing: dict[str, EvalCase],
    legacy_auto_ids: Mapping[str, str],
    hashed_splits: frozenset[str] | set[str],
) -> tuple[list[Case], set[str], int]:
    """Give derived-id cases the ids a set made with the first auto-id scheme holds for them.

    Returns:
        ``(cases with ids replaced, hashed_splits with the same renames, number renamed)``.
    """
    incoming = {case.id for case in cases}
    free = {cid: row for cid, row in existing.items() if cid.startswith("auto-") and cid not in incoming}
    if not free:
        return cases, set(hashed_splits), 0
    by_input: dict[str, list[str]] = {}
    for cid, row in free.items():
        by_input.setdefault(json.dumps(row.input, sort_keys=True), []).append(cid)
    renamed: list[Case] = []
    splits = set(hashed_splits)
    count = 0
    for case in cases:
        old = legacy_auto_ids.get(case.id)
        if old is None or case.id in existing:
            renamed.append(case)
            continue
        if old not in free:  # the label changed too: the stored case with the same input
            same = [cid for cid in by_input.get(json.dumps(to_jsonable(case.input), sort_keys=True), []) if cid in free]
            old = same[0] if same else None
        if old is None:
            renamed.append(case)
            continue
        del free[old]
        if case.id in splits:
            splits.discard(case.id)
            splits.add(old)
        renamed.append(dataclasses.replace(case, id=old))
        count += 1
    return renamed, splits, count


def refresh_set_hashes(set_ids: Iterable[int]) -> None:
    """Recompute the content hash of sets whose cases changed outside an import (admin edits,
    captured cases), so the next eval run records the set it really ran.

    Same hash as the loader's (``evalcore.loaders.cases_content_hash``), streamed from the
    database.
    """
    for set_id in set(set_ids):
        rows = EvalCase.objects.filter(eval_set_id=set_id).iterator(chunk_size=2000)
        EvalSet.objects.filter(pk=set_id).update(content_hash=cases_content_hash(stored_case(r) for r in rows))


def split_counts(eval_set: EvalSet) -> dict[str, int]:
    """Cases per split, every split present (0 when empty)."""
    counts = {"train": 0, "dev": 0, "test": 0}
    for row in EvalCase.objects.filter(eval_set=eval_set).values("split").annotate(n=Count("id")):
        counts[row["split"]] = row["n"]
    return counts


def set_cases(eval_set: EvalSet, split: str) -> list[Case]:
    """The set's cases as engine cases, filtered by split (``all`` for every split)."""
    rows = EvalCase.objects.filter(eval_set=eval_set).order_by("position", "case_id")
    if split != "all":
        rows = rows.filter(split=split)
    return [stored_case(row) for row in rows]


def test_split_runs(eval_set: EvalSet, *, variant: str | None = None, target_id: str | None = None) -> int:
    """How many eval runs touched the test split of a set (``all`` includes test)."""
    runs = EvalRun.objects.filter(eval_set=eval_set, split__in=["test", "all"], source_eval_run__isnull=True)
    if variant is not None:
        runs = runs.filter(variant=variant)
    if target_id is not None:
        runs = runs.filter(target_id=target_id)
    return runs.count()


def git_provenance(path: Path | None = None) -> tuple[str, bool]:
    """(commit sha, dirty flag) of the checkout holding ``path``; ("", False) outside git."""
    cwd = str(path or settings.BASE_DIR)
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=5,
                check=True,
            ).stdout.strip()
        )
    except (OSError, subprocess.SubprocessError):
        return "", False
    return sha, dirty


@dataclass(slots=True)
class EvalRunOutcome:
    """A finished eval run and its report."""

    eval_run: EvalRun
    report: EvalReport


def prepare_eval_run(
    *,
    eval_set: EvalSet,
    spec: TargetSpec,
    variant: str | None,
    split: str,
    allow_test: bool,
    scorers: list[Any] | None = None,
    concurrency: int = 8,
    timeout_s: float | None = 60.0,
    repeat: int = 1,
    user: Any = None,
    status: str = EvalRunStatus.QUEUED,
    extra_config: dict[str, Any] | None = None,
) -> EvalRun:
    """Validate a run request and create its ``EvalRun`` row (not yet executed).

    Raises:
        HeldOutError: The test split without ``allow_test``.
        UnknownVariantError: A variant the target does not declare.
        ScorerSpecError: A bad scorer spec.
        ValueError: Bad concurrency / repeat / split, or a timeout (``timeout_s``, or
            ``scorer_timeout_s`` in ``extra_config``) that is not ``None`` or a finite number > 0.
    """
    guard_split(split, allow_test)
    if concurrency < 1 or repeat < 1:
        raise ValueError("concurrency and repeat must be >= 1")
    check_seconds("timeout_s", timeout_s)
    check_seconds("scorer_timeout_s", (extra_config or {}).get("scorer_timeout_s"))
    resolved, label = spec.resolve(variant)
    scorer_objs = resolve_scorers(scorers or spec.scorers)
    sha, dirty = git_provenance(Path(spec.module).parent if spec.module else None)
    cases = EvalCase.objects.filter(eval_set=eval_set)
    if split != "all":
        cases = cases.filter(split=split)
    return EvalRun.objects.create(
        eval_set=eval_set,
        target_id=spec.id,
        variant=label,
        split=split,
        model=spec.model or "",
        git_sha=sha,
        git_dirty=dirty,
        scorer_specs=[s.spec().to_dict() for s in scorer_objs],
        config={
            "concurrency": concurrency,
            "timeout_s": timeout_s,
            "repeat": repeat,
            "target_kind": resolved.kind,
            "agents_dir": str(Path(spec.module).parent) if spec.module else "",
            **(extra_config or {}),
        },
        set_hash=eval_set.content_hash,
        status=status,
        n_total=cases.count() * repeat,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        # a run created running is executed by this process: its heartbeat starts now
        **(executor_fields() if status == EvalRunStatus.RUNNING else {}),
    )


def execute_eval_run(
    eval_run: EvalRun,
    spec: TargetSpec,
    *,
    scorers: list[Scorer] | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    services: dict[str, Any] | None = None,
    resume: bool = False,
) -> EvalRunOutcome:
    """Run a prepared eval run to the end, writing each case as it finishes.

    Never leaves the eval run ``running``: on an exception it is marked ``failed`` (or
    ``interrupted`` on Ctrl-C) and every finished case stays stored. With ``resume``, the
    cases that already have a result are skipped (a case in flight when the run stopped is run
    again, its partial trace replaced) and the summary is rebuilt over every stored result.
    """
    resolved, label = spec.resolve(eval_run.variant or None)
    stored = eval_run.scorer_specs
    if stored and spec.module:  # predicates declared in the agents folder: rebuilt from it
        stored = rebind_agents_scorer_specs(stored, Path(spec.module).parent)
    scorer_objs = scorers or resolve_scorers(stored or spec.scorers)
    config = eval_run.config
    repeat = config.get("repeat", 1)
    cases = set_cases(eval_run.eval_set, eval_run.split)
    if config.get("case_ids"):  # a run of chosen cases only (e.g. "re-run this case")
        chosen = set(config["case_ids"])
        cases = [case for case in cases if case.id in chosen]
    done: set[tuple[str, int]] = set()
    suspects: list[tuple[Case, int]] = []
    culprits: list[tuple[Case, int]] = []
    if resume:
        done = set(EvalResult.objects.filter(eval_run=eval_run).values_list("case_id", "repeat_index"))
        # runs that were in flight: no result, a partial trace; they run again under the same id
        Run.objects.filter(run_id__startswith=f"{eval_run.id}:", eval_results__isnull=True).delete()
        suspects, culprits = _crash_suspects(eval_run, cases, repeat, done)
    executor = this_executor()
    EvalRun.objects.filter(pk=eval_run.pk).update(
        status=EvalRunStatus.RUNNING,
        started=eval_run.started or _now(),
        finished=None,
        error="",
        n_total=len(cases) * repeat,
        **executor_fields(executor),
    )
    store = DjangoEvalStore(target_id=spec.id, eval_run_id=eval_run.id, executor=executor)
    store.start()

    # after the store: the cases that decided an early stop are kept
    early_stop = EarlyStopSink(spec.id, early_stop_k(config))
    sink = MultiSink(store, _CallbackSink(on_result) if on_result else None, early_stop)
    report: EvalReport | None = None
    status = EvalRunStatus.FINISHED
    error = ""
    options = {
        "timeout_s": config.get("timeout_s", 60.0),
        "repeat": repeat,
        "sink": sink,
        "eval_run_id": eval_run.id,
        "variant": label,
        "services": services,
        "run_metadata": {"target_id": spec.id},
        "scorer_timeout_s": config.get("scorer_timeout_s", DEFAULT_SCORER_TIMEOUT_S),
    }

    async def run_all() -> EvalReport:
        for case, index in culprits:
            sink.on_result(_process_ended_result(eval_run.id, case, index, repeat, label, spec.id))
            done.add((case.id, index))
        if suspects:
            # cases in flight when the process died run first, one at a time: if one ends the
            # process again, it is the only case in flight and the next resume errors it
            wanted = {(c.id, i) for c, i in suspects}
            first = {c.id: c for c, _ in suspects}
            others = {(cid, i) for cid in first for i in range(repeat)} - wanted
            await run_eval(first.values(), resolved, scorer_objs, concurrency=1, skip=others | done, **options)
            done.update(wanted)
        return await run_eval(
            cases, resolved, scorer_objs, concurrency=config.get("concurrency", 8), skip=done, **options
        )

    try:
        with exit_guard(eval_run.id):
            report = asyncio.run(run_all())
        if resume:
            elapsed = report.elapsed_s
            report = report_from_db(eval_run.id)
            report.elapsed_s = elapsed
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
        # the writer stops first: no write of this thread races its transactions
        closed = _close_store(store, eval_run.id, status)
        if error and closed == status:  # a writer failure keeps its own (root) error
            try:
                EvalRun.objects.filter(pk=eval_run.pk).update(error=error)
            except DatabaseError:
                log.warning("could not record the error on eval run %s", eval_run.id, exc_info=True)
        finish_eval_run(eval_run.id, report, status=closed)
        _record_reported_model(eval_run)
    eval_run.refresh_from_db()
    if store.failure is not None:
        store.raise_if_failed()
    return EvalRunOutcome(eval_run, report)


PROCESS_ENDED = "the process ended while this case ran"


def _crash_suspects(
    eval_run: EvalRun, cases: list[Case], repeat: int, done: set[tuple[str, int]]
) -> tuple[list[tuple[Case, int]], list[tuple[Case, int]]]:
    """The cases in flight when the run's process died: (to run again alone, to error).

    A case is errored (not run again) once it counts two deaths: its own target called
    ``os._exit`` (``liveness.exit_guard`` counts two at once), or the process died while it was
    the only case in flight, twice (a segfault; a death with several cases in flight counts
    against none of them). Running it again would only kill the resumed run too. Every other
    case in flight (a ``kill -9``, several cases running at once) runs again first, one at a
    time, so a crashing case is soon alone. The counts persist on the run (``crash_suspects``);
    ``in_flight`` is cleared.
    """
    in_flight = [rid for rid in eval_run.in_flight or [] if isinstance(rid, str)]
    counts: dict[str, int] = dict(eval_run.crash_suspects or {})
    if len(in_flight) == 1:  # only a death while a case ran alone counts against it
        counts[in_flight[0]] = counts.get(in_flight[0], 0) + 1
    EvalRun.objects.filter(pk=eval_run.pk).update(in_flight=[], crash_suspects=counts)
    if not in_flight:
        return [], []
    wanted = set(in_flight)
    suspects: list[tuple[Case, int]] = []
    culprits: list[tuple[Case, int]] = []
    for case in cases:
        for index in range(repeat):
            rid = make_run_id(eval_run.id, case.id, index, repeat)
            if rid not in wanted or (case.id, index) in done:
                continue
            if counts.get(rid, 0) >= 2:
                culprits.append((case, index))
            else:
                suspects.append((case, index))
    return suspects, culprits


def _process_ended_result(
    eval_run_id: str, case: Case, index: int, repeat: int, variant: str | None, target_id: str
) -> CaseResult:
    """An errored result for a case that ended its process (see :func:`_crash_suspects`)."""
    import time

    run_id = make_run_id(eval_run_id, case.id, index, repeat)
    message = f"{PROCESS_ENDED} (os._exit, a crash); not run again on resume"
    return CaseResult(
        case=case,
        run=RunRecord(
            case_id=case.id,
            run_id=run_id,
            trace_id=run_id,
            repeat_index=index,
            error=ErrorInfo("ProcessEnded", message),
            started_at=time.time(),
            metadata={"eval_run_id": eval_run_id, "variant": variant, "split": case.split, "target_id": target_id},
        ),
        scores=[],
    )


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
            log.warning("could not record the writer failure on eval run %s", eval_run_id, exc_info=True)
        return EvalRunStatus.FAILED
    return status


def _record_reported_model(eval_run: EvalRun) -> None:
    """When the target declares no model, record the one its runs reported (first found)."""
    if eval_run.model:
        return
    reported = (
        Run.objects.filter(eval_results__eval_run=eval_run).exclude(model="").values_list("model", flat=True).first()
    )
    if reported:
        EvalRun.objects.filter(pk=eval_run.pk).update(model=reported)


def rescore_eval_run(
    source: EvalRun,
    scorers: list[Any],
    *,
    services: dict[str, Any] | None = None,
    concurrency: int = 8,
    on_result: Callable[[CaseResult], None] | None = None,
    extra_config: dict[str, Any] | None = None,
    scorer_timeout_s: float | None = DEFAULT_SCORER_TIMEOUT_S,
) -> EvalRunOutcome:
    """Score a stored eval run's outputs again into a new eval run linked to its source.

    The target is not called; the new run keeps the source's target, variant, split, model and
    git provenance, and its results annotate the same ``Run`` rows. Each scorer call is
    bounded by ``scorer_timeout_s`` seconds (recorded in the new run's config).

    Raises:
        ValueError: ``scorer_timeout_s`` is neither ``None`` nor a finite number > 0.
    """
    check_seconds("scorer_timeout_s", scorer_timeout_s)

    scorer_objs = resolve_scorers(scorers)
    eval_run = EvalRun.objects.create(
        eval_set=source.eval_set,
        target_id=source.target_id,
        variant=source.variant,
        split=source.split,
        model=source.model,
        git_sha=source.git_sha,
        git_dirty=source.git_dirty,
        scorer_specs=[s.spec().to_dict() for s in scorer_objs],
        config={
            **source.config,
            "rescored_from": source.id,
            "scorer_timeout_s": scorer_timeout_s,
            **(extra_config or {}),
        },
        set_hash=source.set_hash,
        status=EvalRunStatus.RUNNING,
        started=_now(),
        n_total=source.n_done,
        source_eval_run=source,
        **executor_fields(),
    )

    def events_for(run_id: str) -> list[TraceEvent]:
        rows = Event.objects.filter(run__run_id=run_id).order_by("seq")
        return [TraceEvent(e.trace_id, run_id, e.seq, e.ts.timestamp(), e.type, e.name, e.payload) for e in rows]

    pairs = list(iter_stored_runs(source.id))
    events_by_run = {record.run_id: events_for(record.run_id) for _, record in pairs}
    store = DjangoEvalStore(target_id=source.target_id, eval_run_id=eval_run.id, rescore=True, executor=this_executor())
    store.start()
    sink = MultiSink(store, _CallbackSink(on_result) if on_result else None)
    report: EvalReport | None = None
    status = EvalRunStatus.FINISHED
    try:
        report = asyncio.run(
            rescore(
                pairs,
                scorer_objs,
                eval_run_id=eval_run.id,
                sink=sink,
                concurrency=concurrency,
                services=services,
                events_for=events_by_run.get,
                scorer_timeout_s=scorer_timeout_s,
            )
        )
    except KeyboardInterrupt:
        status = EvalRunStatus.INTERRUPTED
        raise
    except BaseException:
        status = EvalRunStatus.FAILED
        raise
    finally:
        status = _close_store(store, eval_run.id, status)
        finish_eval_run(eval_run.id, report, status=status)
    eval_run.refresh_from_db()
    return EvalRunOutcome(eval_run, report)


def cli_executor_config() -> dict[str, Any]:
    """Who executes a CLI run (recorded in its config so a dead process can be detected)."""
    import os
    import socket

    return {"executor": "cli", "pid": os.getpid(), "host": socket.gethostname()}


def mark_dead_cli_runs() -> int:
    """Mark running runs whose process is gone as ``interrupted`` (see ``liveness.mark_stale_runs``).

    Kept for callers of the old name: the PID check of this host is now the fast path of the
    heartbeat check, which covers every executor and host.

    Returns:
        How many eval runs were marked.
    """
    return mark_stale_runs(force=True)


class _CallbackSink:
    def __init__(self, callback: Callable[[CaseResult], None]) -> None:
        self.callback = callback

    def on_event(self, event: Any) -> None:
        return None

    def on_result(self, result: CaseResult) -> None:
        self.callback(result)


def _now() -> Any:
    from django.utils import timezone

    return timezone.now()


def delete_eval_runs(ids: Iterable[str]) -> int:
    """Delete eval runs and their results (runs and traces are kept)."""
    with transaction.atomic():
        deleted, _ = EvalRun.objects.filter(pk__in=list(ids)).delete()
    return deleted
