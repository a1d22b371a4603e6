"""``evalsite rejudge``: ask the judge again about a stored run's outputs, into a new linked run.

Two uses, both a re-score (:func:`apps.evals.runs.execution.rescore_eval_run`: the target is not
called, the source run is kept):

* ``--only unstable|missing|errored``: re-ask just those cases with the run's own judge spec (no
  cache: a cached answer would only repeat itself); every other case keeps its source verdict,
  copied and marked ``reused_from`` (its ledger row is ``skipped``: "reused from the source run"),
  so the new run is complete and comparable case by case.
* ``--judge SPEC``: every case judged by another judge spec (an aligned judge ``name@vN``, or a
  spec file); the compare page then shows both judges' verdicts side by side.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from apps.evals.models import EvalResult, EvalRun, JudgeSpecVersion
from apps.evals.queries.flakiness import unstable_keys
from apps.evals.results.ledger import REUSED_KEY
from evalcore.judge import RubricJudge
from evalcore.judge.outcome import JUDGE_SCORE
from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers.base import ScoreContext, Scorer, ScorerSpec
from evalcore.serial import from_record
from evalcore.types import Score

ONLY_CHOICES = ("unstable", "missing", "errored")
_NOT_ASKED = frozenset({"no_model"})  # skipped for want of a judge: "missing", not "errored"
_POINTLESS = frozenset({"empty_output", "empty_input"})  # asking again gives the same: never re-asked


class RejudgeRefused(Exception):
    """A rejudge that cannot start (the message says why and what to pass instead)."""


def select_cases(source: EvalRun, only: Iterable[str]) -> set[tuple[str, int]]:
    """The ``(case id, repeat index)`` results of ``source`` that ``--only`` names.

    ``unstable``: :func:`apps.evals.queries.flakiness.unstable_keys`; ``missing``: no judge verdict
    stored, or the judge was not asked (no judge configured); ``errored``: the judge was asked and
    failed (unreachable, rate-limited, timed out, invalid JSON). Empty inputs/outputs are never
    selected: asking again would give the same.

    Raises:
        RejudgeRefused: An unknown choice.
    """
    wanted = set(only)
    unknown = wanted - set(ONLY_CHOICES)
    if unknown:
        raise RejudgeRefused(f"--only {sorted(unknown)[0]!r}: choose from {', '.join(ONLY_CHOICES)}")
    chosen: set[tuple[str, int]] = set()
    if "unstable" in wanted:
        chosen |= unstable_keys(source)
    if wanted & {"missing", "errored"}:
        rows = EvalResult.objects.filter(eval_run=source).values_list("case_id", "repeat_index", "scores")
        for case_id, repeat, scores in rows.iterator(chunk_size=2000):
            verdict = next((s for s in scores or [] if s.get("name") == JUDGE_SCORE), None)
            kind = str(((verdict or {}).get("metadata") or {}).get("kind") or "")
            if verdict is None or (verdict.get("error") and kind in _NOT_ASKED):
                if "missing" in wanted:
                    chosen.add((case_id, repeat))
            elif verdict.get("error") and kind not in _POINTLESS and "errored" in wanted:
                chosen.add((case_id, repeat))
    return chosen


def stored_judge_spec(source: EvalRun) -> dict[str, Any]:
    """The source run's rubric judge spec record.

    Raises:
        RejudgeRefused: The run was not judged (nothing to re-ask: use ``--judge SPEC``).
    """
    for spec in source.scorer_specs or []:
        if isinstance(spec, dict) and spec.get("name") == JUDGE_SCORE:
            return spec
    raise RejudgeRefused(
        f"eval run {source.pk} was not judged (its scorers: "
        f"{', '.join(str(s.get('name')) for s in source.scorer_specs or []) or 'none'}); "
        "judge it with --judge SPEC, or evalsite rescore RUN --judge"
    )


def resolve_judge_spec(text: str) -> tuple[dict[str, Any], str]:
    """``--judge SPEC`` -> ``(spec record, label)``: ``name@vN`` or ``name`` (its newest version) of a
    stored :class:`JudgeSpecVersion`, or the path of a JSON file holding ``{name, args, version}``.

    Raises:
        RejudgeRefused: No such judge spec or file; the file is not JSON (naming line and column)
            or not a rubric judge spec.
    """
    path = Path(text)
    if text.endswith(".json") or path.is_file():
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RejudgeRefused(f"--judge {text}: no such file") from None
        except json.JSONDecodeError as exc:
            raise RejudgeRefused(
                f"--judge {text}: line {exc.lineno}, column {exc.colno}: not JSON ({exc.msg})"
            ) from None
        if not isinstance(record, dict) or record.get("name") != JUDGE_SCORE:
            raise RejudgeRefused(f"--judge {text}: $.name must be {JUDGE_SCORE!r} (a rubric judge spec)")
        return record, path.name
    name, _, version = text.partition("@v")
    versions = JudgeSpecVersion.objects.filter(name=name)
    if version:
        if not version.isdigit():
            raise RejudgeRefused(f"--judge {text}: the version after '@v' must be a number (e.g. {name}@v1)")
        versions = versions.filter(version=int(version))
    stored = versions.order_by("-version").first()
    if stored is None:
        known = ", ".join(v.label for v in JudgeSpecVersion.objects.all()[:10]) or "none stored yet"
        raise RejudgeRefused(f"--judge {text}: no judge spec of that name (known: {known}) and no such file")
    return dict(stored.spec), stored.label


def judge_from_spec(record: Mapping[str, Any], *, use_cache: bool) -> RubricJudge:
    """A rubric judge built from its stored spec record (``use_cache`` overriding the record's).

    Raises:
        RejudgeRefused: The record does not build a rubric judge (its error named).
    """
    args = {**dict(record.get("args") or {}), "use_cache": use_cache}
    try:
        judge = scorer_from_spec({**dict(record), "args": args})
    except (ValueError, TypeError, KeyError) as exc:
        raise RejudgeRefused(f"the judge spec does not build a rubric judge: {exc}") from None
    if not isinstance(judge, RubricJudge):
        raise RejudgeRefused(f"the judge spec names {record.get('name')!r}, not {JUDGE_SCORE!r}")
    return judge


@dataclass
class ReusingJudge(Scorer):
    """The judge, asked only about ``chosen`` cases; every other case gets its verdict from the
    source run, copied as stored with ``metadata["reused_from"]`` (never asked, never invented:
    a case the source never judged keeps no verdict)."""

    name: ClassVar[str] = JUDGE_SCORE
    inner: RubricJudge = field(default_factory=RubricJudge)
    chosen: frozenset[tuple[str, int]] = frozenset()
    source_id: str = ""
    stored: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict, repr=False)

    def spec(self) -> ScorerSpec:
        """The inner judge's spec: the new run is judged by the same spec as its source."""
        return self.inner.spec()

    @property
    def score_names(self) -> list[str]:
        """The inner judge's score names."""
        return self.inner.score_names

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """Ask the inner judge about a chosen case; copy the source's judge scores for the others."""
        key = (ctx.case.id, ctx.run.repeat_index)
        if key in self.chosen:
            return await self.inner.score(ctx)
        copied = []
        for record in self.stored.get(key, []):
            score = from_record(Score, record)
            score.metadata = {**score.metadata, REUSED_KEY: self.source_id}
            copied.append(score)
        return copied


def reusing_judge(source: EvalRun, inner: RubricJudge, chosen: set[tuple[str, int]]) -> ReusingJudge:
    """A :class:`ReusingJudge` over ``source``'s stored judge scores (one streamed query)."""
    names = set(inner.score_names)
    stored: dict[tuple[str, int], list[dict[str, Any]]] = {}
    rows = EvalResult.objects.filter(eval_run=source).values_list("case_id", "repeat_index", "scores")
    for case_id, repeat, scores in rows.iterator(chunk_size=2000):
        if (case_id, repeat) in chosen:
            continue
        kept = [s for s in scores or [] if s.get("name") in names]
        if kept:
            stored[(case_id, repeat)] = kept
    return ReusingJudge(inner=inner, chosen=frozenset(chosen), source_id=source.pk, stored=stored)
