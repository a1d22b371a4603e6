"""Flakiness of verdicts per set and judge: cases whose verdict flips across repeats (one run's
repeat indexes), judge samples (one verdict's K samples disagree) or identical reruns (runs of the
same target, variant, set version and scorer specs, re-scores of one source included).

A *reading* is one stored ``passed`` of a score name (``rubric_judge``, ``rubric_judge.accuracy``,
``exact_match``...) for a case. A case is *flaky* for a score name when its readings (or its
judge samples) hold both pass and fail. The flip rate of a score name is flaky cases / cases with
at least two readings, with a Wilson 95% interval (Wilson 1927) valid at that n; the coverage
``n = k/N`` says how many of the set's judged cases had two readings at all.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, EvalSet
from evalcore.judge import AXES
from evalcore.judge.outcome import JUDGE_SCORE
from evalcore.stats import wilson_interval

REPEATS = "repeats"
SAMPLES = "samples"
RERUNS = "reruns"
MAX_CASES = 200
"""Flaky cases listed per report (the counts cover them all)."""


@dataclass(slots=True)
class FlipRate:
    """One score name's flip rate.

    Attributes:
        score: The score name (``rubric_judge``, ``rubric_judge.<axis>``, another scorer's name).
        flaky: Cases whose readings hold both pass and fail.
        n: Cases with at least two readings (or K >= 2 judge samples).
        rate: ``flaky / n`` in 0..1 (``None`` when ``n`` is 0).
        low: Wilson 95% lower bound (``None`` when ``n`` is 0).
        high: Wilson 95% upper bound.
        by_source: Flaky cases per source (``repeats`` / ``samples`` / ``reruns``).
    """

    score: str
    flaky: int
    n: int
    rate: float | None
    low: float | None
    high: float | None
    by_source: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class FlakyCase:
    """A case whose verdict flips: which score names, across what, and in which runs."""

    case_id: str
    scores: list[str]
    sources: list[str]
    eval_run_ids: list[str]


@dataclass(slots=True)
class Flakiness:
    """The flakiness report of one set (and judge model, when given).

    Attributes:
        eval_set_id: The set.
        judge_model: The judge model the runs were filtered on ("" = every run).
        runs: Eval runs read (finished ones with results).
        groups: Groups of identical reruns among them.
        cases: Cases with a stored verdict in those runs (N of the coverage).
        covered: Cases with two readings or more of some score (k of the coverage).
        rates: Per score name, verdict first then its axes, then other scorers.
        flaky_cases: Up to :data:`MAX_CASES` flaky cases, in case order.
        n_flaky: Every flaky case.
    """

    eval_set_id: int
    judge_model: str
    runs: int
    groups: int
    cases: int
    covered: int
    rates: list[FlipRate]
    flaky_cases: list[FlakyCase]
    n_flaky: int


def _rerun_key(run: EvalRun) -> str:
    """Runs with this same key are identical reruns: same target, variant, split, set version and
    scorer specs (a re-score of a run keeps all of these, so it joins its source's group only when
    it used the same scorers)."""
    return json.dumps(
        [run.target_id, run.variant, run.split, run.set_hash, run.scorer_specs], sort_keys=True, default=str
    )


def _judge_models(run: EvalRun) -> set[str]:
    return {
        str((spec.get("args") or {}).get("judge_model") or "")
        for spec in run.scorer_specs or []
        if isinstance(spec, dict) and spec.get("name") == JUDGE_SCORE
    }


def _readings(scores: Iterable[dict[str, Any]]) -> tuple[dict[str, bool], dict[str, set[bool]]]:
    """A result's ``{score name: passed}`` and, from a judge verdict's K samples,
    ``{score name: the passes the samples gave}`` (verdict and axes)."""
    passed: dict[str, bool] = {}
    sampled: dict[str, set[bool]] = defaultdict(set)
    for score in scores:
        name = score.get("name")
        if not isinstance(name, str) or score.get("error") or not isinstance(score.get("passed"), bool):
            continue
        passed[name] = score["passed"]
        meta = score.get("metadata") or {}
        if name == JUDGE_SCORE and isinstance(meta.get("samples"), list):
            minimums = meta.get("thresholds") or {}
            for sample in meta["samples"]:
                if not isinstance(sample, dict) or "pass" not in sample:
                    continue
                sampled[name].add(bool(sample["pass"]))
                for axis in AXES:
                    value = (sample.get("scores") or {}).get(axis)
                    if isinstance(value, int) and axis in minimums:
                        sampled[f"{JUDGE_SCORE}.{axis}"].add(value >= minimums[axis])
    return passed, sampled


def _order(name: str) -> tuple[int, str]:
    if name == JUDGE_SCORE:
        return (0, "")
    if name.startswith(JUDGE_SCORE + "."):
        axis = name.split(".", 1)[1]
        return (1, f"{AXES.index(axis):02d}" if axis in AXES else axis)
    return (2, name)


def flakiness(eval_set: EvalSet, *, judge_model: str = "", eval_runs: Iterable[EvalRun] | None = None) -> Flakiness:
    """The flakiness report of ``eval_set``: over its finished runs (or ``eval_runs``), those
    judged by ``judge_model`` when given. One query for the runs, one streamed for their results."""
    if eval_runs is None:
        runs = list(
            EvalRun.objects.filter(eval_set=eval_set, status=EvalRunStatus.FINISHED, n_done__gt=0).only(
                "id", "target_id", "variant", "split", "set_hash", "scorer_specs"
            )
        )
    else:
        runs = list(eval_runs)
    if judge_model:
        runs = [r for r in runs if judge_model in _judge_models(r)]
    group_of = {r.id: _rerun_key(r) for r in runs}
    # (group, case) -> score name -> source -> passes seen; and the runs each case was read in
    seen: dict[tuple[str, str], dict[str, dict[str, set[bool]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(set))
    )
    readings: dict[tuple[str, str], dict[str, dict[tuple[str, int], bool]]] = defaultdict(lambda: defaultdict(dict))
    where: dict[str, set[str]] = defaultdict(set)
    rows = EvalResult.objects.filter(eval_run_id__in=list(group_of)).values_list(
        "eval_run_id", "case_id", "repeat_index", "scores"
    )
    cases: set[str] = set()
    for eval_run_id, case_id, repeat, scores in rows.iterator(chunk_size=2000):
        key = (group_of[eval_run_id], case_id)
        passed, sampled = _readings(scores or [])
        if not passed:
            continue
        cases.add(case_id)
        where[case_id].add(eval_run_id)
        for name, value in passed.items():
            readings[key][name][(eval_run_id, repeat)] = value
        for name, sample_passes in sampled.items():
            seen[key][name][SAMPLES] |= sample_passes
    # a case's readings: across repeats of one run, and across the group's runs (reruns)
    counted: dict[str, set[str]] = defaultdict(set)  # score name -> cases with two readings
    flaky: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))  # name -> case -> sources
    for (group, case_id), by_name in readings.items():
        for name, values in by_name.items():
            runs_read = {run_id for run_id, _ in values}
            samples = seen[(group, case_id)][name].get(SAMPLES, set())
            if len(values) >= 2 or samples:
                counted[name].add(case_id)
            if len(set(values.values())) == 2:
                by_run: dict[str, set[bool]] = defaultdict(set)
                for (run_id, _repeat), value in values.items():
                    by_run[run_id].add(value)
                if any(len(v) == 2 for v in by_run.values()):
                    flaky[name][case_id].add(REPEATS)
                if len(runs_read) >= 2 and len({frozenset(v) for v in by_run.values()}) > 1:
                    flaky[name][case_id].add(RERUNS)
            if len(samples) == 2:
                flaky[name][case_id].add(SAMPLES)
    rates = []
    for name in sorted(set(counted) | set(flaky), key=_order):
        n = len(counted[name])
        k = len(flaky[name])
        interval = wilson_interval(k, n) if n else None
        by_source: dict[str, int] = defaultdict(int)
        for sources in flaky[name].values():
            for source in sources:
                by_source[source] += 1
        rates.append(
            FlipRate(
                score=name,
                flaky=k,
                n=n,
                rate=k / n if n else None,
                low=interval[0] if interval else None,
                high=interval[1] if interval else None,
                by_source=dict(by_source),
            )
        )
    per_case: dict[str, tuple[set[str], set[str]]] = defaultdict(lambda: (set(), set()))
    for name, by_case in flaky.items():
        for case_id, sources in by_case.items():
            per_case[case_id][0].add(name)
            per_case[case_id][1].update(sources)
    flaky_cases = [
        FlakyCase(case_id, sorted(names, key=_order), sorted(sources), sorted(where[case_id]))
        for case_id, (names, sources) in sorted(per_case.items())[:MAX_CASES]
    ]
    covered = set().union(*counted.values()) if counted else set()
    return Flakiness(
        eval_set_id=eval_set.pk,
        judge_model=judge_model,
        runs=len(runs),
        groups=len(set(group_of.values())),
        cases=len(cases),
        covered=len(covered),
        rates=rates,
        flaky_cases=flaky_cases,
        n_flaky=len(per_case),
    )


def unstable_keys(eval_run: EvalRun, *, score: str = JUDGE_SCORE) -> set[tuple[str, int]]:
    """The ``(case id, repeat index)`` results of ``eval_run`` whose ``score`` verdict is unstable:
    its judge samples disagreed, its repeats in this run disagree, or an identical rerun of the
    run (same group as :func:`flakiness`) gave the case the other verdict. What ``evalsite rejudge
    --only unstable`` re-asks."""
    siblings = [
        r
        for r in EvalRun.objects.filter(
            eval_set_id=eval_run.eval_set_id, status=EvalRunStatus.FINISHED, n_done__gt=0
        ).only("id", "target_id", "variant", "split", "set_hash", "scorer_specs")
        if _rerun_key(r) == _rerun_key(eval_run) and r.pk != eval_run.pk
    ]
    others: dict[str, set[bool]] = defaultdict(set)
    rows = EvalResult.objects.filter(eval_run_id__in=[r.pk for r in siblings]).values_list("case_id", "scores")
    for case_id, scores in rows.iterator(chunk_size=2000):
        passed, _ = _readings(scores or [])
        if score in passed:
            others[case_id].add(passed[score])
    mine: dict[tuple[str, int], bool] = {}
    sampled_flip: set[tuple[str, int]] = set()
    own = EvalResult.objects.filter(eval_run=eval_run).values_list("case_id", "repeat_index", "scores")
    for case_id, repeat, scores in own.iterator(chunk_size=2000):
        passed, sampled = _readings(scores or [])
        if score in passed:
            mine[(case_id, repeat)] = passed[score]
        if len(sampled.get(score, set())) == 2:
            sampled_flip.add((case_id, repeat))
    by_case: dict[str, set[bool]] = defaultdict(set)
    for (case_id, _repeat), value in mine.items():
        by_case[case_id].add(value)
    unstable = set(sampled_flip)
    for key, value in mine.items():
        case_id = key[0]
        if len(by_case[case_id]) == 2 or (others.get(case_id, set()) - {value}):
            unstable.add(key)
    return unstable
