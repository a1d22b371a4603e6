"""The latest ended run of each (target, variant) of each set, for the sets list (issue 26):
"where does each variant stand" without opening the set."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import F, OuterRef, Subquery

from apps.evals.queries.figures import finished_runs
from apps.evals.queries.run_table import RunRow, run_rows, run_table


def latest_by_variant(set_ids: list[int]) -> dict[int, list[RunRow]]:
    """Per set id: a :class:`~apps.evals.queries.run_table.RunRow` of the latest ended run
    (finished, failed or interrupted; newest ``started``) of each (target, variant), ordered by
    target and variant. Sets without such a run are missing. One query (a correlated subquery
    on the ``evalrun_set_target_variant`` index)."""
    newest = (
        finished_runs()
        .filter(eval_set=OuterRef("eval_set"), target_id=OuterRef("target_id"), variant=OuterRef("variant"))
        .order_by("-started", "-pk")
        .values("pk")[:1]
    )
    runs = (
        finished_runs()
        .filter(eval_set_id__in=set_ids)
        .annotate(newest_pk=Subquery(newest))
        .filter(pk=F("newest_pk"))
        .defer("summary", "config", "scorer_specs")
    )
    found: dict[int, list[RunRow]] = defaultdict(list)
    rows = run_rows(list(run_table(runs).order_by("eval_set_id", "target_id", "variant")))
    for row in rows:
        found[row.run.eval_set_id].append(row)
    return dict(found)
