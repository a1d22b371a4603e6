"""Runs of chosen cases only: "re-run this case" from a case page, "save and run it" after
capturing a playground conversation. Executed by the task worker like any portal run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from apps.agents.registry import discovered_targets, load_target
from apps.evals.models import EvalCase, EvalRun, EvalSet
from apps.evals.runs import prepare
from apps.evals.runs.config import RunConfig
from apps.evals.worker.tasks import EXECUTOR, QueueUnavailable, enqueue_eval_run
from evalcore.discovery import UnknownVariantError
from evalcore.errors import InvalidInputError
from evalcore.splits import HeldOutError


class CaseRunRefused(InvalidInputError):
    """A one-case run that cannot start; the message says why (shown as is on the page)."""


@dataclass(frozen=True, slots=True)
class TargetHere:
    """Whether a run's target (and variant) can run from this portal: "Re-run this case" and
    "Open in playground" are offered only then, and ``reason`` says why not otherwise."""

    available: bool
    reason: str = ""


def target_here(target_id: str, variant: str) -> TargetHere:
    """Whether ``target_id`` with ``variant`` is declared in the agents folder this portal serves.

    A run imported from elsewhere, or made by ``evalsite demo`` in an ``evalsite init``
    project, names targets that folder may not have: offering to run them would only end in a
    refused form.
    """
    targets, problems = discovered_targets()
    spec = targets.get(target_id)
    folder = settings.EVALSITE_AGENTS_DIR
    if spec is None:
        broken = f"; {len(problems)} module(s) there failed to load (see the playground)" if problems else ""
        where = f"the agents folder this portal serves ({folder})"
        return TargetHere(False, f"target {target_id!r} is not in {where}{broken}")
    if spec.variants and variant and variant not in spec.variants:
        known = ", ".join(spec.variants)
        return TargetHere(False, f"target {target_id!r} here has no variant {variant!r} (variants: {known})")
    return TargetHere(True)


def start_case_run(*, eval_set: EvalSet, case_id: str, target_id: str, variant: str, user: Any) -> EvalRun:
    """Queue a run of one case of ``eval_set`` against a target/variant; returns the queued run.

    The run's split is the case's split (so a test case still needs the lockbox opt-in) and
    ``config["case_ids"]`` holds the one case id.

    Raises:
        CaseRunRefused: No such case in the set, the target is not declared anymore, the case is
            in the held-out test split, or the variant is not one the target declares, or the
            run queue is unreachable (the run is then not created).
    """
    try:
        return _start_case_run(eval_set=eval_set, case_id=case_id, target_id=target_id, variant=variant, user=user)
    except (LookupError, HeldOutError, UnknownVariantError, ValueError, QueueUnavailable) as exc:
        raise CaseRunRefused(str(exc)) from exc  # QueueUnavailable: the run was deleted again


def _start_case_run(*, eval_set: EvalSet, case_id: str, target_id: str, variant: str, user: Any) -> EvalRun:
    case = EvalCase.objects.filter(eval_set=eval_set, case_id=case_id).only("split").first()
    if case is None:
        raise LookupError(f"set {eval_set.name} has no case {case_id!r}")
    spec = load_target(target_id)
    eval_run = prepare.prepare_eval_run(
        eval_set=eval_set,
        spec=spec,
        variant=variant or None,
        split=case.split,
        allow_test=False,
        user=user,
        config=RunConfig(executor=EXECUTOR, case_ids=[case_id]),
    )
    enqueue_eval_run(eval_run)
    return eval_run
