"""Inspect logs imported as stored eval runs (``evalsite import-run``): a team's past Inspect runs
beside Evalsite's own on the runs pages, in compare and in trends.

One log becomes one finished :class:`~apps.evals.models.EvalRun` of a set, in one transaction:

* **Set and cases.** The set is ``--set NAME`` (default: the log's dataset name, else its task
  name). Each sample is matched to the set's case of the same id (Inspect ids are text or
  integers; compared as text); a sample whose id is not a case id is matched to the one case
  with the same input, if any (a set imported without ids got ``auto-`` ids from its inputs).
  Samples left over are refused, naming them, unless ``add_cases``: then they become cases
  (input, target as expected value, the sample's metadata), the set is created when it does not
  exist, and the change is recorded as the set's next version.
* **Run.** Target ``inspect:<task>`` and variant ``<model>`` unless given; split: the matched
  cases' split when they share one, else ``all``; started / finished: the log's times; status
  ``finished`` (``failed`` with the log's error when the Inspect eval ended in ``error`` or
  ``cancelled``). Provenance in ``config``: ``source: inspect_log``, the file, its SHA-256, the
  log format and version, inspect_ai's version, task, eval and run ids, epochs, scorers; the
  git revision Inspect recorded goes to ``git_sha`` / ``git_dirty``.
* **Results and traces.** One result per (sample, epoch), epoch ``n`` as repeat ``n - 1``,
  built by :func:`evalcore.loaders.inspect_runs.sample_result` and written by the eval store's
  own batch writer, so they are stored exactly as an Evalsite run's (scores mapped as
  :mod:`evalcore.loaders.inspect_scores` documents).

Importing the same file into the same set again changes nothing: the run's id is derived from
the file's SHA-256 and the set, so the import answers the run already stored (``created``
False), also when two imports race. Like every imported run it has a
:class:`~apps.evals.models.RunSource` row (tool ``inspect``, its version, the file and its hash).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Max

from apps.core.storable import case_bank_nul_refusal
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalRunStatus, EvalSet, RunSource
from apps.evals.results.batches import BatchWriter
from apps.evals.runs.naming import create_numbered_run
from apps.evals.sets.cases import import_cases, refresh_set_hashes
from apps.evals.sets.versions import current_version
from evalcore.errors import InvalidInputError, NotFoundError
from evalcore.jsonvalue import MISSING, to_json
from evalcore.loaders import cases_content_hash, nul_at, surrogate_at
from evalcore.loaders.inspect_log import InspectLog, InspectSample, read_inspect_log
from evalcore.loaders.inspect_runs import sample_result
from evalcore.loaders.inspect_scores import off_scale_names
from evalcore.report import ReportBuilder
from evalcore.serial import to_record
from evalcore.splits import assign_split
from evalcore.tracing import TraceEvent
from evalcore.types import Case, CaseResult

_BATCH = 200  # samples per write: memory stays O(batch), whatever the log's size
_SHOWN = 10  # unmatched sample ids named in the error


class UnmatchedSamplesError(InvalidInputError):
    """Samples of the log have no case in the set (and cases were not to be added)."""

    field = "set"


@dataclass(slots=True)
class InspectImport:
    """What an import did.

    Attributes:
        eval_run: The run (new, or the one this log made before).
        created: False when the same file was imported into this set before (nothing written).
        log: The log read.
        statuses: Results stored by status (``passed``, ``failed``, ``errored``, ``unscored``).
        set_created: The set did not exist and was made from the log's samples.
        cases_added: Cases added to the set from the log's samples.
        matched_by_input: Samples matched to a case of another id by their identical input.
        input_differs: Sample ids whose input differs from their case's (matched by id).
        target_differs: Sample ids whose target (what Inspect scored against, stored as the
            results' expected value) differs from their case's expected value in the set.
    """

    eval_run: EvalRun
    created: bool
    log: InspectLog
    statuses: dict[str, int] = field(default_factory=dict)
    set_created: bool = False
    cases_added: int = 0
    matched_by_input: int = 0
    input_differs: list[str] = field(default_factory=list)
    target_differs: list[str] = field(default_factory=list)


def imported_run_id(sha256: str, set_name: str) -> str:
    """The id of the run a log with this file hash makes in this set (16 hex digits)."""
    return hashlib.blake2b(f"inspect-log\x00{sha256}\x00{set_name}".encode(), digest_size=8).hexdigest()


def import_inspect_log(
    path: str | Path,
    *,
    set_name: str | None = None,
    add_cases: bool = False,
    target_id: str | None = None,
    variant: str | None = None,
    user: Any = None,
) -> InspectImport:
    """Import an Inspect ``.eval`` / ``.json`` log as a finished eval run (see the module doc).

    Raises:
        evalcore.loaders.CaseBankError: The log cannot be read (file, member and field named).
        NotFoundError: No set of that name, and ``add_cases`` is off.
        UnmatchedSamplesError: Samples with no case in the set, and ``add_cases`` is off.
    """
    log = read_inspect_log(path)
    name = set_name or log.spec.dataset or log.spec.task
    run_id = imported_run_id(log.sha256, name)
    found = EvalRun.objects.filter(pk=run_id).first()
    if found is not None:
        return InspectImport(found, False, log)
    try:
        with transaction.atomic():
            return _import(log, name, run_id, add_cases=add_cases, target_id=target_id, variant=variant, user=user)
    except IntegrityError:
        found = EvalRun.objects.filter(pk=run_id).first()
        if found is None:
            raise
        return InspectImport(found, False, log)  # another import of the same log won the race


def _import(
    log: InspectLog, name: str, run_id: str, *, add_cases: bool, target_id: str | None, variant: str | None, user: Any
) -> InspectImport:
    eval_set = EvalSet.objects.filter(name=name).first()
    if eval_set is None and not add_cases:
        raise NotFoundError(
            f"no eval set {name!r}: import the dataset the log was run on first (evalsite import FILE --name {name}), "
            "name another with --set, or pass --add-cases to make the set from the log's samples",
            field="set",
        )
    summary = InspectImport(EvalRun(pk=run_id), True, log)
    matched = _match(log, eval_set)
    cases, off_scale, missing = matched.cases, matched.off_scale, matched.missing
    summary.matched_by_input, summary.input_differs = matched.by_input, matched.input_differs
    summary.target_differs = matched.target_differs
    if missing:
        if not add_cases:
            ids = [sample.id for sample in missing]
            shown = ", ".join(ids[:_SHOWN]) + (f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else "")
            raise UnmatchedSamplesError(
                f"{log.path}: {len(missing)} sample id(s) are not cases of set {name!r}: {shown}. "
                "Import the dataset the log was run on into the set, or pass --add-cases to add them "
                "(a new version of the set)"
            )
        summary.set_created = eval_set is None
        _refuse_nul(log, missing)
        eval_set = _add_cases(name, eval_set, missing, log, cases, user=user)
        summary.cases_added = len(missing)
    assert eval_set is not None
    eval_set.refresh_from_db(fields=["content_hash"])
    splits = {case.split for case in cases.values() if case.split}
    spec = log.spec
    eval_run = create_numbered_run(
        id=run_id,
        eval_set=eval_set,
        target_id=(target_id or f"inspect:{spec.task}")[:200],
        variant=(spec.model if variant is None else variant)[:200],
        split=splits.pop() if len(splits) == 1 else "all",
        model=spec.model[:200],
        git_sha=(spec.git_commit or "")[:64],
        git_dirty=spec.git_dirty,
        scorer_specs=[],
        config=_provenance(log),
        set_hash=eval_set.content_hash,
        set_version=current_version(eval_set),
        status=EvalRunStatus.RUNNING,
        n_total=log.n_samples,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        started=_when(log.started) or spec.created,
    )
    RunSource.objects.create(
        eval_run=eval_run,
        eval_set=eval_set,
        tool="inspect",
        tool_version=(spec.inspect_version or "")[:64],
        file_format=f"Inspect log {log.format} v{log.version}"[:64],
        file_name=Path(log.path).name[:255],
        file_path=str(Path(log.path).resolve()),
        sha256=log.sha256,
        run_key=spec.eval_id[:255] or log.sha256,
        original_ids={"task": spec.task, "task_id": spec.task_id, "eval_id": spec.eval_id, "run_id": spec.run_id},
    )
    builder = ReportBuilder(run_id)
    writer = BatchWriter(target_id=eval_run.target_id, eval_run_id=run_id, rescore=False)
    results: list[CaseResult] = []
    events: list[TraceEvent] = []
    variant_meta = {"variant": eval_run.variant}
    for sample in log.samples():
        case = cases[sample.id]
        result, trace = sample_result(
            sample,
            case,
            eval_run_id=run_id,
            epochs=spec.epochs,
            task=spec.task,
            metadata=variant_meta,
            off_scale=off_scale,
        )
        builder.add(result)
        results.append(result)
        events.extend(trace)
        if len(results) >= _BATCH:
            _write(writer, events, results)
    _write(writer, events, results)
    failed = log.status != "success"
    report = builder.build(elapsed_s=max(0.0, (log.completed or 0.0) - (log.started or 0.0)))
    EvalRun.objects.filter(pk=run_id).update(
        status=EvalRunStatus.FAILED if failed else EvalRunStatus.FINISHED,
        finished=_when(log.completed) or eval_run.started,
        summary=to_record(report, json_mode=True),
        error=(log.error or f"the Inspect eval ended with status {log.status!r}") if failed else "",
        n_total=report.n,
    )
    eval_run.refresh_from_db()
    # the counts printed are the rows stored, so they add up to the run's n_done whatever happened
    summary.statuses = dict(
        EvalResult.objects.filter(eval_run_id=run_id).values_list("status").annotate(n=Count("id")).order_by()
    )
    summary.eval_run = eval_run
    return summary


def _write(writer: BatchWriter, events: list[TraceEvent], results: list[CaseResult]) -> None:
    if results:
        writer.write(events, results)
    events.clear()
    results.clear()


def _key(value: Any) -> str:
    return json.dumps(to_json(value), sort_keys=True, ensure_ascii=False)


@dataclass(slots=True)
class _Matched:
    """A first pass over a log's samples, before anything is written.

    Attributes:
        cases: Each matched sample id's case.
        off_scale: Score names whose numbers leave 0..1 somewhere in the log.
        missing: Samples with no case (each id once).
        by_input: How many matched a case of another id by their identical input.
        input_differs: Sample ids whose input differs from their case's (matched by id).
        target_differs: Sample ids whose target differs from their case's expected value.
    """

    cases: dict[str, Case] = field(default_factory=dict)
    off_scale: set[str] = field(default_factory=set)
    missing: list[InspectSample] = field(default_factory=list)
    by_input: int = 0
    input_differs: list[str] = field(default_factory=list)
    target_differs: list[str] = field(default_factory=list)


def _match(log: InspectLog, eval_set: EvalSet | None) -> _Matched:
    """Each sample's case (by id, else by identical input), and what differs (see :class:`_Matched`)."""
    rows = (
        EvalCase.objects.filter(eval_set=eval_set).values_list("case_id", "input", "split", "expected", "has_expected")
        if eval_set is not None
        else []
    )
    by_id = {case_id: (value, split, expected if has else MISSING) for case_id, value, split, expected, has in rows}
    inputs = Counter(_key(row[0]) for row in by_id.values())
    by_input = {_key(row[0]): case_id for case_id, row in by_id.items() if inputs[_key(row[0])] == 1}
    found = _Matched()
    missing: dict[str, InspectSample] = {}
    for sample in log.samples():
        for score in sample.scores:
            found.off_scale |= off_scale_names(score)
        if sample.id in found.cases or sample.id in missing:
            continue
        case_id = sample.id if sample.id in by_id else by_input.get(_key(sample.input))
        if case_id is None:
            missing[sample.id] = sample
            continue
        value, split, expected = by_id[case_id]
        found.cases[sample.id] = Case(id=case_id, input=value, split=split)
        if case_id != sample.id:
            found.by_input += 1
        elif _key(value) != _key(sample.input):
            found.input_differs.append(sample.id)
        if expected is not MISSING and _key(expected) != _key(sample.target):
            found.target_differs.append(sample.id)
    found.missing = list(missing.values())
    return found


class UnstorableSampleError(InvalidInputError):
    """A sample to add as a case holds text this database cannot store (a NUL character on
    PostgreSQL, a lone UTF-16 surrogate on any), as a case bank holding one is refused."""

    field = "add_cases"


def _refuse_nul(log: InspectLog, samples: list[InspectSample]) -> None:
    """Refuse samples to be added as cases that hold a NUL character where the database cannot
    store one (:func:`apps.core.storable.case_bank_nul_refusal`), or a lone UTF-16 surrogate
    (no database can store one), naming the sample and where.

    Raises:
        UnstorableSampleError: The first such sample.
    """
    why = case_bank_nul_refusal()
    for sample in samples:
        for part, value in (
            ("id", sample.id),
            ("input", sample.input),
            ("target", sample.target),
            ("metadata", sample.metadata),
        ):
            found = surrogate_at(value)
            if found is not None:
                raise UnstorableSampleError(
                    f"{log.path}: sample {sample.id!r}: its {part}{found[0]} holds a lone UTF-16 surrogate "
                    f"(U+{ord(found[1]):04X}), text no database can store; it cannot be added as a case (a run's "
                    "outputs may hold one: they are stored with U+FFFD)"
                )
            where = nul_at(value) if why is not None else None
            if where is not None:
                raise UnstorableSampleError(
                    f"{log.path}: sample {sample.id!r}: its {part}{where} holds a NUL character (U+0000): {why}; "
                    "it cannot be added as a case (a run's outputs may hold one: they are stored with U+FFFD)"
                )


def _add_cases(
    name: str,
    eval_set: EvalSet | None,
    samples: list[InspectSample],
    log: InspectLog,
    cases: dict[str, Case],
    *,
    user: Any,
) -> EvalSet:
    """Add the samples as cases of the set (creating it), recorded as the set's next version;
    ``cases`` gets their engine cases."""
    new = [Case(id=s.id, input=s.input, expected=s.target, metadata=dict(s.metadata)) for s in samples]
    source = f"inspect log {log.path}"
    if eval_set is None:
        summary = import_cases(
            name=name, cases=new, content_hash=cases_content_hash(new), source_path=log.path, user=user
        )
        eval_set = summary.eval_set
    else:
        start = (EvalCase.objects.filter(eval_set=eval_set).aggregate(m=Max("position"))["m"] or 0) + 1
        EvalCase.objects.bulk_create(
            [
                EvalCase(
                    eval_set=eval_set,
                    case_id=case.id,
                    input=to_json(case.input),
                    expected=to_json(case.expected),
                    has_expected=True,
                    split=assign_split(name, case.id),
                    metadata=to_json(case.metadata),
                    position=start + offset,
                )
                for offset, case in enumerate(new)
            ],
            batch_size=500,
        )
        refresh_set_hashes([eval_set.pk], source=source, user=user)
    rows = EvalCase.objects.filter(eval_set=eval_set, case_id__in=[c.id for c in new]).values_list("case_id", "split")
    splits = dict(rows)
    for case in new:
        cases[case.id] = Case(id=case.id, input=case.input, split=splits.get(case.id))
    return eval_set


def _provenance(log: InspectLog) -> dict[str, Any]:
    """What the run's ``config`` records of where it came from."""
    spec = log.spec
    return {
        "source": "inspect_log",
        "file": str(Path(log.path).resolve()),
        "file_name": Path(log.path).name,
        "sha256": log.sha256,
        "log_format": log.format,
        "log_version": log.version,
        "log_status": log.status,
        "inspect_version": spec.inspect_version,
        "task": spec.task,
        "task_id": spec.task_id,
        "eval_id": spec.eval_id,
        "inspect_run_id": spec.run_id,
        "dataset": spec.dataset,
        "epochs": spec.epochs,
        "repeat": spec.epochs,
        "scorers": list(spec.scorers),
        "created": spec.created.isoformat(),
        "inspect_metrics": log.metrics,
    }


def _when(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(ts, tz=UTC) if ts is not None else None
