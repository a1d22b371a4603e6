"""Which scorers a spec can name: the built-ins, listed once, plus those user code registers.

A stored spec ``{name, args, version}`` becomes a scorer again through :func:`scorer_from_spec`.
The built-ins are an explicit tuple (:data:`BUILTIN_SCORERS`), not a side effect of importing
their modules; a scorer defined outside the engine joins with
:func:`evalcore.scorers.base.register`.

It sits above :mod:`evalcore.scorers`, :mod:`evalcore.judge` and :mod:`evalcore.rules` (it lists
their scorers) and none of them imports it: the imports go one way (an import-linter contract).

:class:`CaseScorers` lives here, not in a module of its own, because it builds scorers from the
specs a case carries (``metadata.scorers``) through :func:`scorer_from_spec`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from evalcore.judge.conversation import ConversationRubric, GoalCompletion, KnowledgeRetention
from evalcore.judge.rubric import RubricJudge
from evalcore.rules.scorer import RuleAdherence
from evalcore.scorers.adk_metrics import ResponseMatchScore, ToolTrajectoryAvgScore
from evalcore.scorers.base import (
    SCORERS,
    ScoreContext,
    Scorer,
    ScorerServices,
    ScorerSpec,
    ScorerSpecError,
    parse_scorer_spec,
)
from evalcore.scorers.builtin import Contains, ExactMatch, Predicate, Regex
from evalcore.scorers.citations import CitationSet
from evalcore.scorers.conversation import CONVERSATION_SCOPE, FinalState
from evalcore.scorers.jsonmatch import JsonMatch
from evalcore.scorers.libraries import AutoevalsMetric, DeepEvalMetric, RagasMetric
from evalcore.scorers.numbers import NumericMatch
from evalcore.scorers.trajectory import ToolCalls
from evalcore.scoring import score_run
from evalcore.types import Score

CASE_SCORE_ROOT = "case"
"""The first part of every score :class:`CaseScorers` gives (``case.contains``, ``case.rubric_judge``)."""

CASE_SPECS_KEY = "scorers"
"""The case metadata key holding the case's own scorer specs (a list of ``{name, args}``)."""

UNCHECKED_KEY = "unscored_assertions"
"""The case metadata key naming checks the case asked for that no scorer can make (promptfoo's
assertions without an Evalsite equivalent, :mod:`evalcore.loaders.promptfoo_asserts`)."""

SAFE_PREDICATES: frozenset[str] = frozenset(
    {"evalcore.loaders.promptfoo_asserts.is_json", "evalcore.loaders.promptfoo_asserts.contains_json"}
)
"""The only functions a ``predicate`` spec read from case data may name: a case bank is data
(an upload, another tool's file) and must not choose code to import and run."""


@dataclass
class CaseScorers(Scorer):
    """The checks each case carries itself: the scorer specs in its ``metadata.scorers``.

    A promptfoo test's assertions import as such specs (``{"name": "contains", "args":
    {"value": "bonjour", "casefold": true}}``). For every case this scorer builds the case's
    specs (:func:`scorer_from_spec`, each distinct spec built once and reused) and scores the
    case with them, as one scorer call bounded by the run's scorer timeout. Each score is named
    ``case.`` + the built scorer's score name (``case.contains``; ``case.contains_2`` for the
    second ``contains`` of the same case), so every one is a verdict like any scorer's and the
    case passes only when all of them pass. A spec that cannot be built (unknown scorer, bad
    arguments, a ``predicate`` naming a function outside :data:`SAFE_PREDICATES`) gives that
    score an error naming the spec. The checks the case names in ``metadata.unscored_assertions``
    give one label score, ``case.unchecked`` (value: their names), which is no verdict: a case
    with nothing else to check stays unscored. A case without specs gets no score from it.

    A run of a set whose cases carry specs or unchecked assertions adds it to the target's
    scorers (``apps.evals.runs.prepare.with_case_scorers``).
    """

    name: ClassVar[str] = "case_scorers"
    version: ClassVar[str] = "1"
    # once per conversation: the score_run below splits a conversation case into turns itself
    scope: ClassVar[str] = CONVERSATION_SCOPE

    def __post_init__(self) -> None:
        self._built: dict[str, Scorer | ScorerSpecError] = {}

    @property
    def score_names(self) -> list[str]:
        """``["case"]``: the root of every score it gives (what a gate on ``score:case.NAME`` checks)."""
        return [CASE_SCORE_ROOT]

    def _build(self, spec: Any) -> Scorer:
        key = json.dumps(spec, sort_keys=True, default=repr)
        found = self._built.get(key)
        if found is None:
            try:
                found = scorer_from_spec(_checked_case_spec(spec))
            except ScorerSpecError as exc:
                found = exc
            self._built[key] = found
        if isinstance(found, ScorerSpecError):
            raise found
        return found

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """The case's own scores (none when it carries no specs)."""
        metadata = ctx.case.metadata if isinstance(ctx.case.metadata, dict) else {}
        specs = metadata.get(CASE_SPECS_KEY)
        scores: list[Score] = []
        if specs is not None:
            if not isinstance(specs, list):
                specs = [specs]
            built: list[Scorer] = []
            for spec in specs:
                try:
                    built.append(self._build(spec))
                except ScorerSpecError as exc:
                    label = spec.get("name") if isinstance(spec, dict) else None
                    scores.append(Score.failure(str(label or "scorer"), f"ScorerSpecError: {exc}"))
            services = ScorerServices(judge=ctx.judge, judge_cache=ctx.judge_cache)
            # no limit of their own: this whole call is bounded by the run's scorer timeout
            scores[:0] = await score_run(
                ctx.case, ctx.run, built, events=ctx.events, services=services, tracer=ctx.tracer, scorer_timeout_s=None
            )
        unchecked = metadata.get(UNCHECKED_KEY)
        if isinstance(unchecked, list) and unchecked:
            names = ", ".join(dict.fromkeys(str(item) for item in unchecked))
            scores.append(
                Score("unchecked", names, explanation=f"asked for by the case, with no Evalsite equivalent: {names}")
            )
        return _prefixed(scores)


def _checked_case_spec(spec: Any) -> dict[str, Any]:
    """A spec from case data, refused when it could run code the data chose (see :data:`SAFE_PREDICATES`)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ScorerSpecError(f"a case's scorer spec must be an object with a 'name', got {spec!r}")
    if spec["name"] == CaseScorers.name:
        raise ScorerSpecError("a case cannot name case_scorers among its own scorers")
    if spec["name"] == "predicate":
        fn = (spec.get("args") or {}).get("fn")
        if fn not in SAFE_PREDICATES:
            raise ScorerSpecError(
                f"a case's predicate may only name one of {', '.join(sorted(SAFE_PREDICATES))}, not {fn!r}"
            )
    return spec


def _prefixed(scores: list[Score]) -> list[Score]:
    """The scores renamed ``case.NAME``; a name given twice gets ``_2``, ``_3``..."""
    seen: dict[str, int] = {}
    for score in scores:
        name = f"{CASE_SCORE_ROOT}.{score.name}"
        count = seen[name] = seen.get(name, 0) + 1
        score.name = name if count == 1 else f"{name}_{count}"
    return scores


BUILTIN_SCORERS: tuple[type[Scorer], ...] = (
    ExactMatch,
    Contains,
    Regex,
    NumericMatch,
    JsonMatch,
    CitationSet,
    Predicate,
    ToolCalls,
    RubricJudge,
    RuleAdherence,
    CaseScorers,
    FinalState,
    ConversationRubric,
    GoalCompletion,
    KnowledgeRetention,
    ToolTrajectoryAvgScore,
    ResponseMatchScore,
    RagasMetric,
    DeepEvalMetric,
    AutoevalsMetric,
)
"""Every scorer the engine ships, by class (each names itself with its ``name``)."""


def known_scorers() -> dict[str, type[Scorer]]:
    """Scorer name -> class: the built-ins, then the user-registered (which win on a clash)."""
    return {**{cls.name: cls for cls in BUILTIN_SCORERS}, **SCORERS}


def scorer_from_spec(spec: ScorerSpec | dict[str, Any] | str) -> Scorer:
    """Build a scorer from a spec object, a ``{name, args}`` dict or a CLI string.

    A spec object, or a dict with a ``version`` (what a run stores), rebuilds the scorer as that
    version scored (:meth:`~evalcore.scorers.base.Scorer.stored_args`: e.g. an ``exact_match``
    stored before ``normalize`` existed compares code points as given); a CLI string or a dict
    without a version is a new spec, with today's defaults.

    CLI strings: ``"exact_match"``, ``"numeric_match:tolerance=0.01"``,
    ``"citation_set:min_recall=0.5,min_precision=0.3"``, or a JSON object
    ``'{"name": "regex", "args": {"pattern": "^yes"}}'``. Values are parsed as JSON when
    they parse (numbers, booleans), else kept as strings.

    Raises:
        ScorerSpecError: Unknown scorer name, arguments it does not accept, or an argument
            holding NaN / infinity (a spec is stored as JSON, which has neither).
    """
    # a spec that records its version was stored by a run: rebuilt to score as it did then
    # (Scorer.stored_args); a CLI string or a {name, args} dict is a new spec, with today's defaults
    stored = not isinstance(spec, str) and (not isinstance(spec, dict) or "version" in spec)
    if isinstance(spec, str):
        spec = parse_scorer_spec(spec)
    if isinstance(spec, dict):
        name, args = spec.get("name"), spec.get("args")
        if not isinstance(name, str) or not name.strip():
            raise ScorerSpecError(f"a scorer spec object names its scorer: 'name' is a string, not {name!r}")
        if args is not None and not isinstance(args, dict):
            raise ScorerSpecError(f"scorer {name!r}: 'args' is an object, not {type(args).__name__}")
        spec = ScorerSpec(name, dict(args or {}), str(spec.get("version", "1")))
    if not isinstance(spec, ScorerSpec):
        raise ScorerSpecError(
            f"a scorer spec is a name (e.g. 'exact_match') or a {{name, args}} object, not {type(spec).__name__}"
        )
    for key, value in spec.args.items():
        if _has_non_finite(value):
            raise ScorerSpecError(f"scorer {spec.name!r}: {key}={value!r} is not a finite number")
    known_classes = known_scorers()
    cls = known_classes.get(spec.name)
    if cls is None:
        known = ", ".join(sorted(known_classes))
        raise ScorerSpecError(f"unknown scorer {spec.name!r} (known: {known})")
    args = cls.stored_args(spec.args, spec.version) if stored else spec.args
    try:
        return cls(**args)
    except ScorerSpecError:
        raise
    except (TypeError, ValueError) as exc:  # a scorer's own argument checks, named as a spec error
        raise ScorerSpecError(f"scorer {spec.name!r}: {exc}") from None


def resolve_scorers(scorers: Sequence[Scorer | ScorerSpec | dict[str, Any] | str | Callable[..., Any]]) -> list[Scorer]:
    """Turn a mixed list (scorers, specs, CLI strings, plain predicate functions) into scorers."""
    resolved: list[Scorer] = []
    for item in scorers:
        if isinstance(item, Scorer):
            resolved.append(item)
        elif callable(item) and not isinstance(item, type):
            resolved.append(Predicate(fn=item))
        else:
            resolved.append(scorer_from_spec(item))  # type: ignore[arg-type]
    return resolved


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_non_finite(v) for v in value)
    return False
