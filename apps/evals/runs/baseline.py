"""The baseline of a CI run: which stored run a new one is compared with (``--baseline``), and
the comparison as :class:`evalcore.baseline.BaselineFigures` for the gates and the reports.

``--baseline`` takes:

* ``RUN_ID``: that eval run (any target or variant, but of the same set);
* ``pinned``: the pinned baseline of the set and target (pinned on a run's page, or
  :func:`apps.evals.runs.edits.pin_baseline`);
* ``latest`` / ``latest:VARIANT``: the latest *finished* run of the same set, target and split
  (of that variant when one is named) started before this one.

The comparison is the portal's (:mod:`apps.evals.queries.compare`): results are paired on
``(case_id, repeat_index)``, so only the cases both runs ran are compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from apps.evals.models import EvalRun, EvalRunStatus, EvalSet
from apps.evals.queries.runs import NEWEST_FIRST
from evalcore.errors import InvalidInputError
from evalcore.gates import Gate

if TYPE_CHECKING:
    from evalcore.baseline import BaselineFigures

BASELINE_HELP = (
    "compare with a stored run and allow baseline gates: RUN_ID, 'pinned' (the pinned run of the set and target) "
    "or 'latest[:VARIANT]' (the latest finished run of the set, target and split before this one)"
)


class BaselineError(InvalidInputError):
    """A ``--baseline`` that names no usable run (the message says what was looked for)."""

    field = "baseline"


@dataclass(frozen=True, slots=True)
class Baseline:
    """A resolved ``--baseline``: the run and how it was asked for (``pinned``, ``latest:6b``...)."""

    eval_run: EvalRun
    label: str


def check_baseline_gates(gates: list[Gate], baseline: str | None) -> None:
    """Refuse baseline gates (``regressions``, ``worse_p``, ``delta:pass_rate``...) without a baseline.

    Raises:
        BaselineError: A baseline gate and no ``--baseline``.
    """
    needing = [g.text for g in gates if g.needs_baseline]
    if needing and not baseline:
        raise BaselineError(
            f"gate {needing[0]!r} compares with a baseline: add --baseline RUN_ID, pinned or latest[:VARIANT]"
        )


def resolve_baseline(
    text: str,
    *,
    eval_set: EvalSet,
    target_id: str,
    split: str,
    exclude: EvalRun | None = None,
) -> Baseline:
    """The run ``--baseline text`` names for a run of ``eval_set`` / ``target_id`` / ``split``.

    Args:
        text: ``RUN_ID``, ``pinned``, ``latest`` or ``latest:VARIANT``.
        eval_set, target_id, split: What the new run runs.
        exclude: The new run itself when it exists already (a resume): never its own baseline,
            and ``latest`` looks only before it started.

    Raises:
        BaselineError: No such run; a run of another set; a run not finished; nothing pinned;
            no earlier finished run (each message names the set, target, split and variant looked for).
    """
    text = text.strip()
    runs = EvalRun.objects.filter(eval_set=eval_set)
    if exclude is not None:
        runs = runs.exclude(pk=exclude.pk)
    where = f"set {eval_set.name!r}, target {target_id!r}"
    if text == "pinned":
        found = runs.filter(target_id=target_id, pinned=True).first()
        if found is None:
            raise BaselineError(
                f"--baseline pinned: no run of {where} is pinned (pin one on its page in the portal, "
                "or use --baseline latest or an eval run id)"
            )
        return Baseline(found, "pinned")
    if text == "latest" or text.startswith("latest:"):
        variant = text.partition(":")[2].strip()
        earlier = runs.filter(target_id=target_id, split=split, status=EvalRunStatus.FINISHED)
        if variant:
            earlier = earlier.filter(variant=variant)
        before: datetime | None = exclude.started if exclude is not None else None
        if before is not None:
            earlier = earlier.filter(started__lt=before)
        found = earlier.order_by(NEWEST_FIRST, "-pk").first()
        if found is None:
            of_variant = f", variant {variant!r}" if variant else ""
            raise BaselineError(
                f"--baseline {text}: no finished run of {where}, split {split!r}{of_variant} before this one"
            )
        return Baseline(found, text)
    found = EvalRun.objects.select_related("eval_set").filter(pk=text).first()
    if found is None:
        raise BaselineError(f"--baseline {text!r}: no such eval run (give an eval run id, pinned or latest[:VARIANT])")
    if found.eval_set_id != eval_set.pk:
        raise BaselineError(
            f"--baseline {text}: that run is on set {found.eval_set.name!r}, this one on {eval_set.name!r}; "
            "only runs of the same set are compared case by case"
        )
    if exclude is not None and found.pk == exclude.pk:
        raise BaselineError(f"--baseline {text}: that is this run; pick an earlier one")
    if found.status in (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING):
        raise BaselineError(f"--baseline {text}: that run is {found.status}; wait for it to end")
    return Baseline(found, text)


def baseline_figures(baseline: Baseline, candidate: EvalRun) -> BaselineFigures:
    """Compare ``candidate`` with its baseline on the cases both ran: the 2x2 table, the paired
    tests, every flip (regressions first, largest score change first) and the per-score deltas.

    Raises:
        CompareError: The runs cannot be compared (same run, different sets).
    """
    # imported here: the comparison (and its search and paging code) is loaded by a run that
    # has a baseline, not by every `evalsite eval` (start-up time, issue 30)
    from apps.evals.queries.compare import compare_runs, scorer_deltas
    from evalcore.baseline import BaselineFigures, Flip, ScoreChange

    view = compare_runs(baseline.eval_run, candidate, only="flips", page_size=500)
    flips: list[Flip] = []
    while True:
        for row in view.rows:
            flips.append(
                Flip(
                    case_id=row.case_id,
                    repeat_index=row.repeat_index,
                    kind=row.kind,
                    split=row.b.split,
                    score_a=row.a.score,
                    score_b=row.b.score,
                    status_a=str(row.a.status),
                    status_b=str(row.b.status),
                )
            )
        if view.page >= view.num_pages:
            break
        view = compare_runs(baseline.eval_run, candidate, only="flips", page_size=500, page=view.page + 1)
    changes = [
        ScoreChange(
            name=d.name,
            n=d.n,
            mean_a=d.mean_a,
            mean_b=d.mean_b,
            low=d.interval.low if d.interval else None,
            high=d.interval.high if d.interval else None,
            p_holm=d.p_holm,
            significant=d.significant,
        )
        for d in scorer_deltas(baseline.eval_run, candidate)
    ]
    run = baseline.eval_run
    return BaselineFigures(
        baseline_id=run.pk,
        baseline_label=baseline.label,
        candidate_id=candidate.pk,
        counts=view.counts,
        only_baseline=view.only_a,
        only_candidate=view.only_b,
        interval=view.interval,
        verdict=view.verdict,
        cases=view.cases_in_both,
        case_counts=view.case_counts,
        flips=flips,
        score_changes=changes,
        baseline_info={
            "id": run.pk,
            "name": run.name,
            "target_id": run.target_id,
            "variant": run.variant,
            "split": run.split,
            "git_sha": run.git_sha,
            "pinned": run.pinned,
            "started": run.started.isoformat() if run.started else None,
        },
    )
