"""Reads for simulated-user cases (scenario cases, :mod:`evalcore.simulator`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from apps.evals.models import EvalResult


def simulated_runs(eval_run_id: str) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """``(case id, repeat index, run metadata)`` of every result of the eval run whose run was
    played by a user simulator (its metadata has a ``simulator`` block), in storage order,
    streamed."""
    rows = (
        EvalResult.objects.filter(eval_run_id=eval_run_id, run__metadata__has_key="simulator")
        .order_by("id")
        .values_list("case_id", "repeat_index", "run__metadata")
    )
    for case_id, repeat_index, metadata in rows.iterator(chunk_size=1000):
        yield case_id, repeat_index, metadata if isinstance(metadata, dict) else {}
