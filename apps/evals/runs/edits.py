"""What people change on a stored eval run (writes): its name and notes, the pinned baseline of
its set and target, and deleting it with its results and traces."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet

from apps.core.storable import unstorable_reason
from apps.evals.models import EvalResult, EvalRun, EvalRunStatus
from apps.evals.results.search_index import forget
from apps.evals.runs.naming import check_name, default_run_name
from apps.traces.models import Run
from evalcore.errors import ConflictError, InvalidInputError

MAX_NOTES_CHARS = 10_000


def edit_eval_run(eval_run: EvalRun, *, name: str | None = None, notes: str | None = None) -> EvalRun:
    """Set the run's name and / or notes (``None`` leaves one as it is; text is stripped). A blank
    name gives the run its made name back (:func:`apps.evals.runs.naming.default_run_name`).

    Raises:
        InvalidInputError: A name over 200 characters or notes over 10,000, or either holding a NUL
            character or a lone surrogate (naming the field).
    """
    changed = []
    for field, text in (("name", name), ("notes", notes)):
        if text is not None and (reason := unstorable_reason(text)) is not None:
            raise InvalidInputError(f"{field} {reason}", field=field)
    if name is not None:
        eval_run.name = check_name(name) or default_run_name(eval_run)
        changed.append("name")
    if notes is not None:
        if len(notes) > MAX_NOTES_CHARS:
            raise InvalidInputError(f"notes are over {MAX_NOTES_CHARS} characters", field="notes")
        eval_run.notes = notes.strip()
        changed.append("notes")
    if changed:
        eval_run.save(update_fields=changed)
    return eval_run


def pin_baseline(eval_run: EvalRun, pinned: bool = True) -> EvalRun:
    """Pin the run as the baseline of its set and target (the previously pinned one is unpinned,
    in the same transaction), or unpin it. Compare suggests the pinned run as the partner.

    Raises:
        ConflictError: Pinning a run that is still queued or running (a baseline is a whole run).
    """
    if pinned and eval_run.status in (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING):
        raise ConflictError(f"eval run {eval_run.pk} is {eval_run.status}: pin it as a baseline once it has ended")
    with transaction.atomic():
        if pinned:
            EvalRun.objects.filter(eval_set_id=eval_run.eval_set_id, target_id=eval_run.target_id, pinned=True).exclude(
                pk=eval_run.pk
            ).update(pinned=False)
        EvalRun.objects.filter(pk=eval_run.pk).update(pinned=pinned)
    eval_run.pinned = pinned
    return eval_run


@dataclass(slots=True, frozen=True)
class Deleted:
    """What deleting a run removed: its results (with their reviews) and the traces only it used."""

    results: int
    traces: int


def deletion_preview(eval_run: EvalRun) -> Deleted:
    """What :func:`delete_eval_run` would remove, for the confirmation page."""
    results = EvalResult.objects.filter(eval_run=eval_run)
    return Deleted(results.count(), _own_traces(eval_run).count())


def _own_traces(eval_run: EvalRun) -> QuerySet[Run]:
    """Traces of this run's results that no other eval run's result annotates (a rescored run
    annotates its source's traces: those stay while it exists)."""
    used = EvalResult.objects.filter(eval_run=eval_run).values("run_id")
    shared = EvalResult.objects.filter(run_id__in=used).exclude(eval_run=eval_run).values("run_id")
    return Run.objects.filter(pk__in=used).exclude(pk__in=shared)


def delete_eval_run(eval_run: EvalRun) -> Deleted:
    """Delete the run, its results and reviews, and the traces (runs and events) only it used, in
    one transaction. Runs rescored from it keep their results (their source link is cleared).

    Raises:
        ConflictError: The run is queued or running (cancel or wait for it first).
    """
    if eval_run.status in (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING):
        raise ConflictError(f"eval run {eval_run.pk} is {eval_run.status}: wait for it to end before deleting it")
    with transaction.atomic():
        trace_ids = list(_own_traces(eval_run).values_list("pk", flat=True))
        results = EvalResult.objects.filter(eval_run=eval_run)
        n_results = results.count()
        forget(results.values_list("pk", flat=True))  # out of the full-text index
        results.delete()  # reviews and their history go with them (cascade)
        Run.objects.filter(pk__in=trace_ids).delete()  # events go with them (cascade)
        EvalRun.objects.filter(pk=eval_run.pk).delete()
    return Deleted(results=n_results, traces=len(trace_ids))
