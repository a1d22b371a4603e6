"""One case across runs (issue 26): every result of a set's case id, newest run first, with the
run's name, variant and the set version it ran against."""

from __future__ import annotations

from django.db.models import F, QuerySet

from apps.evals.models import EvalCase, EvalResult, EvalSet
from apps.traces.access import run_visibility


def case_history(eval_set: EvalSet, case_id: str, user: object) -> QuerySet[EvalResult]:
    """The results of ``case_id`` in every run of ``eval_set`` whose trace ``user`` may read:
    newest run first (never-started runs first, as in the run history), then by repeat.

    Each row joins its run (``eval_run``, with ``set_version``) and its trace (``run``, for the
    privacy filter and the trace link). A case removed from the set keeps its history. Served by
    the ``evalrun_set_started`` index on runs and the unique (eval_run, case_id, repeat) index
    on results.
    """
    results = (
        EvalResult.objects.filter(eval_run__eval_set=eval_set, case_id=case_id)
        .filter(run_visibility(user, "run__"))
        .select_related("eval_run", "eval_run__set_version", "run")
        .defer(
            "eval_run__summary",
            "eval_run__config",
            "eval_run__scorer_specs",
            "expected",
            "run__final_answer",
            "run__metadata",
        )
    )
    return results.order_by(F("eval_run__started").desc(nulls_first=True), "eval_run_id", "repeat_index")


def case_in_set(eval_set: EvalSet, case_id: str) -> EvalCase | None:
    """The set's case of that id today, ``None`` when it was removed (or never existed)."""
    return EvalCase.objects.filter(eval_set=eval_set, case_id=case_id).first()
