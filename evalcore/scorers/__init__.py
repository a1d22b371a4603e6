"""Scorers: the contract (``base``), the built-ins, and the registry that names them (``registry``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalcore._util.lazy import lazy_exports

# Names are imported on first use (PEP 562), so ``evalcore.scorers.base`` (which the judge and
# the rules import) never pulls in the registry, and with it the judge, half-initialised.
_EXPORTS: dict[str, str] = {
    "BUILTIN_SCORERS": "evalcore.scorers.registry",
    "CitationSet": "evalcore.scorers.citations",
    "Contains": "evalcore.scorers.builtin",
    "ExactMatch": "evalcore.scorers.builtin",
    "JsonMatch": "evalcore.scorers.jsonmatch",
    "NumericMatch": "evalcore.scorers.numbers",
    "Predicate": "evalcore.scorers.builtin",
    "Regex": "evalcore.scorers.builtin",
    "RubricJudge": "evalcore.judge.rubric",
    "RuleAdherence": "evalcore.rules.scorer",
    "SCORERS": "evalcore.scorers.base",
    "ScoreContext": "evalcore.scorers.base",
    "Scorer": "evalcore.scorers.base",
    "ScorerServices": "evalcore.scorers.base",
    "ScorerSpec": "evalcore.scorers.base",
    "ScorerSpecError": "evalcore.scorers.base",
    "ToolCalls": "evalcore.scorers.trajectory",
    "known_scorers": "evalcore.scorers.registry",
    "parse_scorer_spec": "evalcore.scorers.base",
    "register": "evalcore.scorers.base",
    "resolve_scorers": "evalcore.scorers.registry",
    "scorer_from_spec": "evalcore.scorers.registry",
}


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)


if TYPE_CHECKING:
    from evalcore.judge.rubric import RubricJudge
    from evalcore.rules.scorer import RuleAdherence
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
    from evalcore.scorers.registry import BUILTIN_SCORERS, known_scorers, resolve_scorers, scorer_from_spec
    from evalcore.scorers.trajectory import ToolCalls

__all__ = [
    "BUILTIN_SCORERS",
    "SCORERS",
    "CitationSet",
    "Contains",
    "ExactMatch",
    "JsonMatch",
    "NumericMatch",
    "Predicate",
    "Regex",
    "RubricJudge",
    "RuleAdherence",
    "ScoreContext",
    "Scorer",
    "ScorerServices",
    "ScorerSpec",
    "ScorerSpecError",
    "ToolCalls",
    "known_scorers",
    "parse_scorer_spec",
    "register",
    "resolve_scorers",
    "scorer_from_spec",
]
