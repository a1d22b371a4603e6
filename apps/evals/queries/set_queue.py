"""Which runs a set's review queue spans (``?runs=``): the latest run of each target and variant
(the default), every run, or one chosen run.

Live runs (queued, running) are left out of ``latest`` and ``all``; a chosen run may be any run of
the set. ``latest`` and ``all`` keep the newest runs up to :data:`MAX_SET_QUEUE_RUNS` runs and
:data:`MAX_SET_QUEUE_RESULTS` results (at least one run), so that a set run hundreds of times, or
a set of 100,000 cases, still answers at once; older runs are reached by choosing them.
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.evals.models import EvalRun, EvalSet
from apps.evals.queries.figures import LIVE_STATUSES
from apps.evals.queries.runs import NEWEST_FIRST
from evalcore.errors import NotFoundError

SET_SCOPES: dict[str, str] = {
    "latest": "the latest run of each target and variant",  # one-case re-runs from a case page left out
    "all": "every run",
}
"""The set queue's run choices besides one run's id (the first is the default)."""

MAX_SET_QUEUE_RUNS = 50
"""Runs merged into one set queue at most (the newest)."""

MAX_SET_QUEUE_RESULTS = 100_000
"""Results merged into one set queue at most (whole runs, the newest first; one run may exceed it)."""

RUNS_LISTED = 200
"""Runs offered in the set queue's run picker (the newest)."""


@dataclass(slots=True, frozen=True)
class SetQueueRuns:
    """The runs a set queue spans.

    Attributes:
        choice: ``latest``, ``all`` or the chosen run's id.
        runs: The runs in the queue, newest first.
        listed: Runs to offer in the picker, newest first (at most :data:`RUNS_LISTED`).
        n_runs: The set's runs that are not live.
        capped: More runs qualified than :data:`MAX_SET_QUEUE_RUNS` runs or
            :data:`MAX_SET_QUEUE_RESULTS` results hold; only the newest are in.
    """

    choice: str
    runs: list[EvalRun]
    listed: list[EvalRun]
    n_runs: int
    capped: bool


def set_queue_runs(eval_set: EvalSet, choice: str | None) -> SetQueueRuns:
    """The runs of ``eval_set`` that its review queue spans for ``choice`` (``None`` or ``""``:
    the default, ``latest``). Three small queries over the set's runs, none over results.

    Raises:
        NotFoundError: ``choice`` is neither a scope of :data:`SET_SCOPES` nor a run of this set
            (field ``runs``).
    """
    choice = choice or next(iter(SET_SCOPES))
    settled = EvalRun.objects.filter(eval_set=eval_set).exclude(status__in=LIVE_STATUSES).order_by(NEWEST_FIRST, "-pk")
    listed = list(settled.select_related("eval_set")[:RUNS_LISTED])
    n_runs = len(listed) if len(listed) < RUNS_LISTED else settled.count()
    if choice == "all":
        wanted = list(settled.values_list("pk", flat=True)[: MAX_SET_QUEUE_RUNS + 1])
    elif choice == "latest":
        seen: set[tuple[str, str]] = set()
        wanted = []
        full = settled.exclude(config__has_key="case_ids")  # a one-case re-run supersedes no run
        for pk, target_id, variant in full.values_list("pk", "target_id", "variant").iterator():
            if (target_id, variant) not in seen:
                seen.add((target_id, variant))
                wanted.append(pk)
                if len(wanted) > MAX_SET_QUEUE_RUNS:
                    break
    else:
        chosen = EvalRun.objects.filter(eval_set=eval_set, pk=choice).select_related("eval_set").first()
        if chosen is None:
            raise NotFoundError(f"set {eval_set.name!r} has no eval run {choice!r}", field="runs")
        return SetQueueRuns(choice, [chosen], listed, n_runs, capped=False)
    known = {run.pk: run for run in listed if run.pk in wanted}
    missing = [pk for pk in wanted if pk not in known]
    if missing:
        known.update({run.pk: run for run in EvalRun.objects.filter(pk__in=missing).select_related("eval_set")})
    runs: list[EvalRun] = []
    results = 0
    for pk in wanted[:MAX_SET_QUEUE_RUNS]:
        results += known[pk].n_done
        if runs and results > MAX_SET_QUEUE_RESULTS:
            break
        runs.append(known[pk])
    return SetQueueRuns(choice, runs, listed, n_runs, capped=len(runs) < len(wanted))
