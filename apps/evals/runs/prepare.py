"""Before a run executes: pick its target (CLI), check the request, create its ``EvalRun`` row.

Every entry point that starts a run (the ``eval`` command, the API, the start-run form, a one-case
re-run) goes through :func:`prepare_eval_run`, so a request is checked in one place, before
anything is written.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Q

from apps.evals.models import EvalCase, EvalRun, EvalRunStatus, EvalSet
from apps.evals.results.executor import executor_fields
from apps.evals.runs.config import RunConfig
from apps.evals.runs.naming import check_name, create_numbered_run
from apps.evals.sets.versions import current_version
from evalcore.discovery import TargetSpec
from evalcore.errors import InvalidInputError
from evalcore.gates import Gate, GateError
from evalcore.provenance import git_provenance
from evalcore.rules import bind_target_rules, target_rules
from evalcore.scorer_registry import CASE_SCORE_ROOT, CASE_SPECS_KEY, UNCHECKED_KEY, CaseScorers, resolve_scorers
from evalcore.scorers.base import Scorer
from evalcore.serial import to_record
from evalcore.splits import guard_split


class EmptySplitError(InvalidInputError):
    """A run asked of a split that holds no case of its set; nothing was written.

    ``field`` names the request field at fault (``split``) for the API's error body.
    """

    field = "split"


def ensure_split_has_cases(eval_set: EvalSet, split: str) -> int:
    """How many cases ``split`` of ``eval_set`` holds (``all``: every split), at least one.

    The one check that a run has something to run, made before its row is written by every
    entry point (CLI, API, start-run form, one-case re-runs) through :func:`prepare_eval_run`.

    Raises:
        EmptySplitError: The split holds no case (the message names the set and the split).
    """
    cases = EvalCase.objects.filter(eval_set=eval_set)
    if split != "all":
        cases = cases.filter(split=split)
    count = cases.count()
    if count == 0:
        raise EmptySplitError(f"eval set {eval_set.name!r} has no cases in split {split!r}")
    return count


def prepare_eval_run(
    *,
    eval_set: EvalSet,
    spec: TargetSpec,
    variant: str | None,
    split: str,
    allow_test: bool,
    scorers: list[Any] | None = None,
    config: RunConfig | None = None,
    user: Any = None,
    status: str = EvalRunStatus.QUEUED,
    name: str | None = None,
) -> EvalRun:
    """Validate a run request and create its ``EvalRun`` row (not yet executed).

    ``config`` (default: every parameter's default) is stored with the target's kind and agents
    folder; its ``case_ids`` make a run of those cases only (``n_total`` counts them). Its values
    were checked when it was built (:class:`~apps.evals.runs.config.RunConfig`). ``name`` (blank
    or ``None``: made from set, target, variant, split and the run's number) is checked first.

    Raises:
        InvalidInputError: A name over 200 characters or holding a NUL (``field="name"``).
        EmptySplitError: The split holds no case of the set (nothing is written).
        HeldOutError: The test split without ``allow_test``.
        UnknownVariantError: A variant the target does not declare.
        ScorerSpecError: A bad scorer spec.
        RuleError: The target's rules (``TargetSpec.rules`` or ``rules.toml`` beside its module)
            are malformed; bound into any ``rule_adherence`` scorer built without rules.
        ValueError: A bad split.
    """
    config = config or RunConfig()
    if name is not None:
        name = check_name(name)
    guard_split(split, allow_test)
    n_cases = ensure_split_has_cases(eval_set, split)
    if config.case_ids:
        n_cases = len(config.case_ids)
    resolved, label = spec.resolve(variant)
    scorer_objs = with_case_scorers(resolve_scorers(scorers or spec.scorers), eval_set)
    bind_target_rules(scorer_objs, target_rules(spec.id, spec.rules, Path(spec.module).parent if spec.module else None))
    sha, dirty = git_provenance(Path(spec.module).parent if spec.module else settings.BASE_DIR)
    return create_numbered_run(
        name=name,
        eval_set=eval_set,
        target_id=spec.id,
        variant=label,
        split=split,
        model=spec.model or "",
        git_sha=sha,
        git_dirty=dirty,
        scorer_specs=[to_record(s.spec()) for s in scorer_objs],
        config=config.updated(
            target_kind=resolved.kind, agents_dir=str(Path(spec.module).parent) if spec.module else ""
        ).stored(),
        set_hash=eval_set.content_hash,
        set_version=current_version(eval_set),
        status=status,
        n_total=n_cases * config.repeat,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        # a run created running is executed by this process: its heartbeat starts now
        **(executor_fields() if status == EvalRunStatus.RUNNING else {}),
    )


def set_uses_case_scorers(eval_set: EvalSet) -> bool:
    """Whether a case of the set carries its own scorer specs or unchecked assertions (one query)."""
    cases = EvalCase.objects.filter(eval_set=eval_set)
    return cases.filter(Q(metadata__has_key=CASE_SPECS_KEY) | Q(metadata__has_key=UNCHECKED_KEY)).exists()


def with_case_scorers(scorers: list[Scorer], eval_set: EvalSet) -> list[Scorer]:
    """``scorers``, plus :class:`~evalcore.scorer_registry.CaseScorers` when a case of the set
    carries its own specs (a promptfoo import) and it is not there yet. The same list when
    nothing is added; a new one otherwise (its spec is stored with the run, so a resumed or
    re-scored run applies the cases' specs too)."""
    if any(isinstance(s, CaseScorers) for s in scorers) or not set_uses_case_scorers(eval_set):
        return scorers
    return [*scorers, CaseScorers()]


def cli_executor_config() -> dict[str, Any]:
    """Who executes a CLI run (recorded in its config so a dead process can be detected)."""
    return {"executor": "cli", "pid": os.getpid(), "host": socket.gethostname()}


class TargetChoiceError(LookupError):
    """No target, or several, fit the request (the message lists the declared ids)."""


def choose_target(
    targets: Mapping[str, TargetSpec], target_id: str | None, set_arg: str, *, agents_dir: str | Path
) -> TargetSpec:
    """The target a CLI run means: the one named, else the only one declared, else the one whose
    ``default_set`` has the file name of ``set_arg``.

    Raises:
        TargetChoiceError: The named target is not declared, or no single target fits.
    """
    if target_id:
        if target_id not in targets:
            known = ", ".join(targets) or "none"
            raise TargetChoiceError(f"--target {target_id!r}: not declared in {agents_dir} (targets: {known})")
        return targets[target_id]
    if len(targets) == 1:
        return next(iter(targets.values()))
    set_name = Path(set_arg).name
    matching = [t for t in targets.values() if t.default_set and Path(t.default_set).name == set_name]
    if len(matching) == 1:
        return matching[0]
    if not targets:
        raise TargetChoiceError(
            f"no targets declared in {agents_dir}: declare one with @target(id=...) or a TargetSpec "
            "(evalcore.discovery); plain functions are not picked up"
        )
    known = ", ".join(targets)
    raise TargetChoiceError(f"several targets in {agents_dir}; pick one with --target (targets: {known})")


def check_gate_metrics(gates: Iterable[Gate], scorers: Iterable[Scorer]) -> None:
    """A ``score:NAME`` / ``coverage:NAME`` gate must name a score some scorer emits (a typo is
    not a regression). A plain-function scorer's score goes by the function's name.

    Raises:
        GateError: A gate names a score no scorer emits (the message lists the scores).
    """
    names = {name for scorer in scorers for name in scorer.score_names}
    # roots of the emitted names, not scorer kinds: "predicate" names no score anyone sees; a
    # case's own scores (case.NAME) are known only once the set is read, after this check
    roots = {name.split(".")[0] for name in names} | {CASE_SCORE_ROOT}
    for gate in gates:
        prefix, _, wanted = gate.metric.partition(":")
        if prefix not in ("score", "coverage"):
            continue
        if wanted not in names and wanted.split(".")[0] not in roots:
            known = ", ".join(sorted(names)) or "none"
            raise GateError(f"gate {gate.text!r}: no scorer of this run emits {wanted!r} (scores: {known})")
