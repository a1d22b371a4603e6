"""An N-way comparison (issue 27) as a table: one row per (case, repeat) every compared run holds,
in case order, with each run's status and verdict and how many runs passed it. Written as JSON
Lines, CSV (formula-safe: :func:`evalcore.loaders.neutralise_formula`) or Parquet by
:mod:`evalcore.tables`, as every other export."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from apps.evals.exports.run_rows import ROOT, ExportTable
from apps.evals.queries.compare_many import ManyView, case_table
from evalcore.tables import Column, columns

PAGE = 500
"""Rows read per query (the per-case table's largest page)."""


def many_table(view: ManyView) -> ExportTable:
    """The comparison's cases: ``id``, then under ``evalsite``: ``repeat``, ``n_passed``, ``baseline``,
    and per run (by id) its ``status`` and ``passed``."""
    table = [
        Column(("id",), "text"),
        *columns("repeat", "n_passed", "n_runs", kind="int", under=ROOT),
        *columns("baseline", kind="text", under=ROOT),
    ]
    for run in view.runs:
        table.append(Column((*ROOT, "runs", run.pk, "status"), "text"))
        table.append(Column((*ROOT, "runs", run.pk, "passed"), "bool"))
    return ExportTable(table, _rows(view), "compare-" + "-".join(run.pk for run in view.runs))


def _rows(view: ManyView) -> Iterator[dict[str, Any]]:
    page = 1
    while True:
        found = case_table(view.runs, page=page, page_size=PAGE, sort="case")
        for row in found.rows:
            yield {
                "id": row.case_id,
                "evalsite": {
                    "repeat": row.repeat_index,
                    "n_passed": row.n_passed,
                    "n_runs": len(view.runs),
                    "baseline": view.baseline_run.pk,
                    "runs": {
                        run.pk: {"status": status, "passed": status == "passed"}
                        for run, status in zip(view.runs, row.statuses, strict=True)
                    },
                },
            }
        if page >= found.num_pages:
            return
        page += 1
