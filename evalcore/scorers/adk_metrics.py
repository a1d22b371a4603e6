"""Google ADK's per-invocation metrics, computed as ADK computes them: ``tool_trajectory_avg_score``
and ``response_match_score``.

Both are conversation-level scorers (:mod:`evalcore.scorers.conversation`): an ADK eval case is
a conversation whose turns are ADK's *invocations*. Each invocation gets a score in 0..1; the
case's value is their mean over every invocation (ADK's ``overall_score``) and its verdict is
``mean >= threshold`` (ADK's ``_get_eval_status``), the threshold coming from ADK's
``test_config.json`` (:func:`evalcore.loaders.adk_config.criteria_specs`) or the scorer's
argument. ``metadata["invocations"]`` holds every invocation's score.

* ``tool_trajectory_avg_score`` (ADK's ``TrajectoryEvaluator``): 1.0 when the invocation's tool
  calls match the expected ones, else 0.0. ``match_type`` ``EXACT`` (default: same calls, same
  order, nothing extra), ``IN_ORDER`` (the expected calls appear in order, others may come
  between) or ``ANY_ORDER`` (each expected call appears, once each, in any order); a call
  matches on its name and, unless ``ignore_args``, on arguments equal as JSON objects. A turn
  that states no tool calls expects none.
* ``response_match_score`` (ADK's ``RougeEvaluator``, ``final_response_match_v1``): the ROUGE-1
  F-measure (Lin, 2004, "ROUGE: A Package for Automatic Evaluation of Summaries") between the
  expected and the actual final response, by Google's ``rouge-score`` package (Porter stemmer
  on) with ADK's Unicode-aware tokenizer (:func:`adk_tokens`: NFKC, lower case, CJK characters
  and Thai/Lao/Khmer/Myanmar grapheme clusters as tokens, ASCII words through ``rouge-score``'s
  own tokenizer). As in ADK, a turn with no expected response is compared with the empty text
  (its score is 0). Needs ``rouge-score`` (``pip install 'evalsite[adk]'``); without it every
  score is an error naming the missing package, never a 0.

A case that states nothing the metric reads (no turn's tool calls, no turn's final response)
gets no score from it (unscored, never passed).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from evalcore.conversations import ConversationError
from evalcore.scorers.base import ScoreContext, Scorer
from evalcore.scorers.conversation import CONVERSATION_SCOPE, ConversationView, conversation_view
from evalcore.types import JSON, Score

TOOL_TRAJECTORY = "tool_trajectory_avg_score"
RESPONSE_MATCH = "response_match_score"
MATCH_TYPES: tuple[str, ...] = ("EXACT", "IN_ORDER", "ANY_ORDER")


def _check_threshold(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"threshold must be a finite number, got {value!r}")
    return float(value)


def normalize_match_type(value: Any) -> str:
    """ADK's spelling rules for a match type (``"in-order"``, ``"In Order"``, ``1`` → ``IN_ORDER``).

    Raises:
        ValueError: Not one of :data:`MATCH_TYPES` (or its index, as ADK's enum values).
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(MATCH_TYPES):
        return MATCH_TYPES[value]
    if isinstance(value, str):
        normalized = value.strip().upper().replace("-", "_").replace(" ", "_")
        if normalized in MATCH_TYPES:
            return normalized
    raise ValueError(f"match_type must be one of {', '.join(MATCH_TYPES)}, got {value!r}")


def _same_call(actual: Any, expected: Any, ignore_args: bool) -> bool:
    if not isinstance(actual, dict) or not isinstance(expected, dict):
        return False
    if actual.get("name") != expected.get("name"):
        return False
    return ignore_args or (actual.get("arguments") or {}) == (expected.get("arguments") or {})


def trajectory_matches(actual: Sequence[Any], expected: Sequence[Any], match_type: str, ignore_args: bool) -> bool:
    """Whether one invocation's ``actual`` calls match the ``expected`` ones (``{"name", "arguments"}``).

    ``match_type``: ``EXACT``, ``IN_ORDER`` or ``ANY_ORDER`` (see the module docstring); the
    rules of ADK's ``TrajectoryEvaluator._are_tool_calls_*_match``.
    """
    if match_type == "EXACT":
        return len(actual) == len(expected) and all(
            _same_call(a, e, ignore_args) for a, e in zip(actual, expected, strict=True)
        )
    if not expected:
        return True
    if match_type == "IN_ORDER":
        position = 0
        for call in actual:
            if _same_call(call, expected[position], ignore_args):
                position += 1
                if position == len(expected):
                    return True
        return False
    left = list(actual)
    for want in expected:
        index = next((i for i, call in enumerate(left) if _same_call(call, want, ignore_args)), None)
        if index is None:
            return False
        left.pop(index)
    return True


def _is_cjk(code: int) -> bool:
    return 0x4E00 <= code <= 0x9FFF or 0x3040 <= code <= 0x309F or 0x30A0 <= code <= 0x30FF or 0xAC00 <= code <= 0xD7AF


def _is_non_spaced(code: int) -> bool:
    return 0x0E00 <= code <= 0x0E7F or 0x0E80 <= code <= 0x0EFF or 0x1780 <= code <= 0x17FF or 0x1000 <= code <= 0x109F


class _AdkTokenizer:
    """ADK's ``_UnicodeAwareTokenizer`` (final_response_match_v1.py), over ``rouge-score``'s own."""

    def __init__(self) -> None:
        from rouge_score import tokenizers

        self._default = tokenizers.DefaultTokenizer(use_stemmer=True)

    def tokenize(self, text: str) -> list[str]:
        return adk_tokens(text, self._default.tokenize)


def adk_tokens(text: str, ascii_tokens: Any) -> list[str]:
    """``text`` split into ROUGE tokens as ADK splits it (see the module docstring).

    Args:
        text: Any text.
        ascii_tokens: Tokenizes one ASCII word (``rouge-score``'s stemming tokenizer).
    """
    text = unicodedata.normalize("NFKC", text).lower()
    chars: list[str] = []
    for char in text:
        code = ord(char)
        if _is_cjk(code):
            chars.extend((" ", char, " "))
        elif _is_non_spaced(code):
            if unicodedata.category(char).startswith("M"):
                chars.append(char)
            else:
                chars.extend((" ", char))
        elif char.isalnum() or unicodedata.category(char).startswith("M"):
            chars.append(char)
        else:
            chars.append(" ")
    tokens: list[str] = []
    for word in "".join(chars).split():
        if word.isascii():
            tokens.extend(ascii_tokens(word))
        else:
            tokens.append(word)
    return tokens


_SCORER: Any = None


def rouge1_fmeasure(candidate: str, reference: str) -> float:
    """ROUGE-1 F-measure of ``candidate`` against ``reference`` as ADK's ``response_match_score`` computes it.

    Raises:
        ImportError: ``rouge-score`` is not installed (``pip install 'evalsite[adk]'``).
    """
    global _SCORER
    if _SCORER is None:
        try:
            from rouge_score import rouge_scorer
        except ImportError as exc:
            raise ImportError(
                "response_match_score needs the rouge-score package: pip install 'evalsite[adk]'"
            ) from exc
        _SCORER = rouge_scorer.RougeScorer(["rouge1"], tokenizer=_AdkTokenizer())
    return float(_SCORER.score(reference, candidate)["rouge1"].fmeasure)


def response_text(value: Any) -> str:
    """A final response as ADK's text: ``None`` is ``""``, text as is, anything else its ``str``."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _averaged(name: str, per: list[float], threshold: float, what: str) -> Score:
    mean = sum(per) / len(per)
    passed = mean >= threshold
    low = [str(i + 1) for i, s in enumerate(per) if s < threshold]
    why = f"mean {what} {mean:.3f} over {len(per)} invocation(s) {'>=' if passed else '<'} threshold {threshold:g}"
    if low and not passed:
        why += f" (below it: invocation {', '.join(low)})"
    metadata: dict[str, JSON] = {"invocations": list(per), "threshold": threshold, "n": len(per)}
    return Score(name, mean, passed=passed, explanation=why, metadata=metadata)


def _view(ctx: ScoreContext, name: str) -> ConversationView | Score:
    try:
        return conversation_view(ctx)
    except ConversationError as exc:
        return Score.failure(name, f"ConversationError: {exc}")


@dataclass
class ToolTrajectoryAvgScore(Scorer):
    """ADK's ``tool_trajectory_avg_score`` (see the module docstring).

    Attributes:
        threshold: The verdict's minimum mean (ADK's default criterion: 1.0).
        match_type: ``EXACT``, ``IN_ORDER`` or ``ANY_ORDER`` (ADK's spellings accepted).
        ignore_args: Compare tool names only.

    Raises:
        ValueError: At construction, on a non-finite threshold or an unknown match type.
    """

    name: ClassVar[str] = TOOL_TRAJECTORY
    version: ClassVar[str] = "1"
    scope: ClassVar[str] = CONVERSATION_SCOPE
    threshold: float = 1.0
    match_type: str = "EXACT"
    ignore_args: bool = False

    def __post_init__(self) -> None:
        self.threshold = _check_threshold(self.threshold)
        self.match_type = normalize_match_type(self.match_type)

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """The mean per-invocation trajectory match and its verdict; none when no turn states tool calls."""
        view = _view(ctx, self.name)
        if isinstance(view, Score):
            return [view]
        turns = view.conversation.turns
        if all(turn.tool_calls is None for turn in turns):
            return []
        per = [
            1.0
            if trajectory_matches(
                answer.get("tool_calls") or [], turn.tool_calls or [], self.match_type, self.ignore_args
            )
            else 0.0
            for turn, answer in zip(turns, view.answers, strict=True)
        ]
        return [_averaged(self.name, per, self.threshold, "trajectory match")]


@dataclass
class ResponseMatchScore(Scorer):
    """ADK's ``response_match_score`` (see the module docstring).

    Attributes:
        threshold: The verdict's minimum mean ROUGE-1 F-measure (ADK's default criterion: 0.8).

    Raises:
        ValueError: At construction, on a non-finite threshold.
    """

    name: ClassVar[str] = RESPONSE_MATCH
    version: ClassVar[str] = "1"
    scope: ClassVar[str] = CONVERSATION_SCOPE
    threshold: float = 0.8

    def __post_init__(self) -> None:
        self.threshold = _check_threshold(self.threshold)

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """The mean per-invocation ROUGE-1 F-measure and its verdict; none when no turn states a response."""
        view = _view(ctx, self.name)
        if isinstance(view, Score):
            return [view]
        turns = view.conversation.turns
        if all(turn.final_response is None for turn in turns):
            return []
        per = [
            rouge1_fmeasure(response_text(answer.get("final_response")), response_text(turn.final_response))
            for turn, answer in zip(turns, view.answers, strict=True)
        ]
        return [_averaged(self.name, per, self.threshold, "ROUGE-1 F")]
