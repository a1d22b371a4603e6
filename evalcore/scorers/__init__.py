"""Scorers: the contract (``base``) and the built-in ones."""

from evalcore.judge.rubric import RubricJudge as RubricJudge  # registers "rubric_judge"
from evalcore.scorers.base import (
    SCORERS,
    ScoreContext,
    Scorer,
    ScorerSpec,
    ScorerSpecError,
    parse_scorer_spec,
    register,
    resolve_scorers,
    scorer_from_spec,
)
from evalcore.scorers.builtin import (
    CitationSet,
    Contains,
    ExactMatch,
    JsonMatch,
    NumericMatch,
    Predicate,
    Regex,
)
from evalcore.scorers.trajectory import ToolCalls as ToolCalls  # registers "tool_calls"

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
    "ScorerSpec",
    "ScorerSpecError",
    "parse_scorer_spec",
    "register",
    "resolve_scorers",
    "scorer_from_spec",
]
