"""Which scorers a spec can name: the built-ins, listed once, plus those user code registers.

A stored spec ``{name, args, version}`` becomes a scorer again through :func:`scorer_from_spec`.
The built-ins are an explicit tuple (:data:`BUILTIN_SCORERS`), not a side effect of importing
their modules; a scorer defined outside the engine joins with
:func:`evalcore.scorers.base.register`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from evalcore.judge.rubric import RubricJudge
from evalcore.rules.scorer import RuleAdherence
from evalcore.scorers.base import (
    SCORERS,
    Scorer,
    ScorerSpec,
    ScorerSpecError,
    parse_scorer_spec,
)
from evalcore.scorers.builtin import Contains, ExactMatch, Predicate, Regex
from evalcore.scorers.citations import CitationSet
from evalcore.scorers.jsonmatch import JsonMatch
from evalcore.scorers.numbers import NumericMatch
from evalcore.scorers.trajectory import ToolCalls

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
)
"""Every scorer the engine ships, by class (each names itself with its ``name``)."""


def known_scorers() -> dict[str, type[Scorer]]:
    """Scorer name -> class: the built-ins, then the user-registered (which win on a clash)."""
    return {**{cls.name: cls for cls in BUILTIN_SCORERS}, **SCORERS}


def scorer_from_spec(spec: ScorerSpec | dict[str, Any] | str) -> Scorer:
    """Build a scorer from a spec object, a ``{name, args}`` dict or a CLI string.

    CLI strings: ``"exact_match"``, ``"numeric_match:tolerance=0.01"``,
    ``"citation_set:min_recall=0.5,min_precision=0.3"``, or a JSON object
    ``'{"name": "regex", "args": {"pattern": "^yes"}}'``. Values are parsed as JSON when
    they parse (numbers, booleans), else kept as strings.

    Raises:
        ScorerSpecError: Unknown scorer name, arguments it does not accept, or an argument
            holding NaN / infinity (a spec is stored as JSON, which has neither).
    """
    if isinstance(spec, str):
        spec = parse_scorer_spec(spec)
    if isinstance(spec, dict):
        spec = ScorerSpec(spec["name"], dict(spec.get("args") or {}), str(spec.get("version", "1")))
    for key, value in spec.args.items():
        if _has_non_finite(value):
            raise ScorerSpecError(f"scorer {spec.name!r}: {key}={value!r} is not a finite number")
    known_classes = known_scorers()
    cls = known_classes.get(spec.name)
    if cls is None:
        known = ", ".join(sorted(known_classes))
        raise ScorerSpecError(f"unknown scorer {spec.name!r} (known: {known})")
    try:
        return cls(**spec.args)
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
