"""Scorers: the contract (``base``) and the built-in ones."""

from evalcore.scorers.base import (
    SCORERS,
    Scorer,
    ScoreContext,
    ScorerSpec,
    ScorerSpecError,
    parse_scorer_spec,
    register,
    resolve_scorers,
    scorer_from_spec,
)
from evalcore.scorers.builtin import ExactMatch, Predicate

__all__ = [
    "SCORERS",
    "ExactMatch",
    "Predicate",
    "ScoreContext",
    "Scorer",
    "ScorerSpec",
    "ScorerSpecError",
    "parse_scorer_spec",
    "register",
    "resolve_scorers",
    "scorer_from_spec",
]
