"""Scorers: the contract (``base``), the built-ins, and the registry that names them (``registry``)."""

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
