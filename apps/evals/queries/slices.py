"""Where did B get worse: two runs' paired verdicts by slice (tag, split, low-cardinality
metadata field), with :func:`evalcore.slices.compare_slices` doing the statistics."""

from __future__ import annotations

from django.db import connection

from apps.evals.models import EvalCase, EvalRun
from apps.evals.queries.cached import while_unchanged
from apps.evals.queries.compare import check_comparable, paired_results_sql
from evalcore.slices import PairedCase, SliceRow, compare_slices


def comparison_slices(run_a: EvalRun, run_b: EvalRun) -> list[SliceRow]:
    """The slices of A vs B (A the baseline), most contributing first; cached while neither run
    changes. A case's tags and metadata are today's in the set (the split: the result's).

    Cost: one SQL join of the two runs' verdicts and one read of the set's tags and metadata.

    Raises:
        CompareError: Runs that cannot be compared.
    """
    check_comparable(run_a, run_b)
    return while_unchanged("slices.v4", (run_a, run_b), lambda: _slices(run_a, run_b))


def _slices(run_a: EvalRun, run_b: EvalRun) -> list[SliceRow]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT a.case_id, a.split, a.passed, b.passed " + paired_results_sql(), [run_b.pk, run_a.pk])
        verdicts = cursor.fetchall()
    cases = {
        case_id: (tags or [], metadata or {})
        for case_id, tags, metadata in EvalCase.objects.filter(eval_set_id=run_a.eval_set_id).values_list(
            "case_id", "tags", "metadata"
        )
    }
    paired = []
    for case_id, split, passed_a, passed_b in verdicts:
        tags, metadata = cases.get(case_id, ([], {}))
        paired.append(
            PairedCase(bool(passed_a), bool(passed_b), tags=tags, split=split or "", metadata=metadata, case_id=case_id)
        )
    return compare_slices(paired)
