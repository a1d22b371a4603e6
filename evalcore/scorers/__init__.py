"""Scorers: the contract (``base``) and the built-ins that need no model.

The registry that names every scorer a spec can use (these, the rubric judge, the rule judge)
sits above this package, the judge and the rules: :mod:`evalcore.scorer_registry`. This package
imports neither of them, so the judge and the rules can build on ``base`` one way."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalcore._util.lazy import lazy_exports

# Names are imported on first use (PEP 562): importing ``evalcore.scorers.base`` (as the judge
# and the rules do) does not load every built-in scorer (CLI start-up time).
_EXPORTS: dict[str, str] = {
    "CitationSet": "evalcore.scorers.citations",
    "Contains": "evalcore.scorers.builtin",
    "ExactMatch": "evalcore.scorers.builtin",
    "JsonMatch": "evalcore.scorers.jsonmatch",
    "NumericMatch": "evalcore.scorers.numbers",
    "Predicate": "evalcore.scorers.builtin",
    "Regex": "evalcore.scorers.builtin",
    "SCORERS": "evalcore.scorers.base",
    "ScoreContext": "evalcore.scorers.base",
    "Scorer": "evalcore.scorers.base",
    "ScorerServices": "evalcore.scorers.base",
    "ScorerSpec": "evalcore.scorers.base",
    "ScorerSpecError": "evalcore.scorers.base",
    "ToolCalls": "evalcore.scorers.trajectory",
    "parse_scorer_spec": "evalcore.scorers.base",
    "register": "evalcore.scorers.base",
}


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)


if TYPE_CHECKING:
    from evalcore.scorers.base import (
        SCORERS,
        ScoreContext,
        Scorer,
        ScorerServices,
        ScorerSpec,
        ScorerSpecError,
        parse_scorer_spec,
        register,
    )
    from evalcore.scorers.builtin import Contains, ExactMatch, Predicate, Regex
    from evalcore.scorers.citations import CitationSet
    from evalcore.scorers.jsonmatch import JsonMatch
    from evalcore.scorers.numbers import NumericMatch
    from evalcore.scorers.trajectory import ToolCalls

__all__ = [
    "SCORERS",
    "CitationSet",
    "Contains",
    "ExactMatch",
    "JsonMatch",
    "NumericMatch",
    "Predicate",
    "Regex",
    "ScoreContext",
    "Scorer",
    "ScorerServices",
    "ScorerSpec",
    "ScorerSpecError",
    "ToolCalls",
    "parse_scorer_spec",
    "register",
]
