"""Who may read a traced run: the one rule every page and API route applies.

A run is as private as what produced it. Eval runs are team work: any viewer reads them. A
playground turn is a private conversation: only its owner and staff read it (``Run.private``
with ``Run.owner``, stamped by the playground when it stores the turn). A private run whose
owner was deleted is left to staff.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from apps.traces.models import Run


def run_visibility(user: Any, prefix: str = "") -> Q:
    """The filter selecting the runs ``user`` may read; ``prefix`` is the path to the run
    (``"run__"`` to filter eval results by their run). Staff: no restriction."""
    if getattr(user, "is_staff", False):
        return Q()
    owner = getattr(user, "pk", None)
    public = Q(**{f"{prefix}private": False})
    return public | Q(**{f"{prefix}owner_id": owner}) if owner is not None else public


def readable_runs(user: Any, runs: QuerySet[Run] | None = None) -> QuerySet[Run]:
    """``runs`` (default: all) narrowed to those ``user`` may read."""
    runs = Run.objects.all() if runs is None else runs
    return runs.filter(run_visibility(user))


def can_read_run(user: Any, run: Run | None) -> bool:
    """Whether ``user`` may read ``run`` (``None``, a result without a run, is readable).

    The role check (viewer) is the caller's; this only adds the privacy of the run itself.
    """
    if run is None or not run.private or getattr(user, "is_staff", False):
        return True
    return run.owner_id is not None and run.owner_id == getattr(user, "pk", None)
