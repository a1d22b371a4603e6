"""The rubric judge over a whole conversation: ``conversation_rubric``, ``goal_completion``, ``knowledge_retention``.

Each is the rubric judge (:class:`~evalcore.judge.rubric.RubricJudge`: same axes, thresholds,
samples with per-axis majority vote and the instability flag, retries through
:func:`~evalcore.judge.ask.ask_judge`, judge cache, and a judge failure recorded as an *error*,
never a 0) asked once per conversation (a conversation-level scorer,
:mod:`evalcore.scorers.conversation`) with the conversation rendered as data:

* the question: the user's messages in order;
* the answer: the transcript, one ``{"turn", "user", "assistant", "tool_calls"}`` per turn
  (:func:`~evalcore.scorers.conversation.render_transcript`);
* the reference, when the case states any: ``{"final_responses": [per turn, null where none],
  "final_state": {...}}``.

``goal_completion`` and ``knowledge_retention`` add their grading guide (:data:`GOAL_GUIDE`,
:data:`RETENTION_GUIDE`) before the scorer's own ``rubric`` notes; ``conversation_rubric`` has
only the notes it is given. Scores: ``<name>`` (the verdict) and ``<name>.<axis>``, as the
rubric judge's. A single-turn case is judged as a one-turn conversation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from evalcore.conversations import ConversationError
from evalcore.jsonvalue import MISSING
from evalcore.judge.outcome import JUDGE_SCORE
from evalcore.judge.parsing import AXES
from evalcore.judge.prompt import rubric_text
from evalcore.judge.rubric import RubricJudge
from evalcore.scorers.base import ScoreContext
from evalcore.scorers.conversation import CONVERSATION_SCOPE, conversation_view, render_transcript
from evalcore.types import JSON, Score

GOAL_GUIDE = (
    "The answer is a whole conversation between a user and an assistant. Grade goal completion: "
    "did the assistant, by the last turn, achieve what the user set out to do (every request "
    "handled, the task finished, not merely discussed)? Accuracy and completeness are about the "
    "user's goal over the whole conversation, not any single reply."
)
"""The grading guide of ``goal_completion``."""

RETENTION_GUIDE = (
    "The answer is a whole conversation between a user and an assistant. Grade knowledge "
    "retention: does every assistant turn use what the user said in earlier turns (names, "
    "numbers, preferences, constraints, corrections) without asking for it again, forgetting it "
    "or contradicting it? A reply that ignores or contradicts an earlier fact is inaccurate."
)
"""The grading guide of ``knowledge_retention``."""


@dataclass
class ConversationRubric(RubricJudge):
    """The rubric judge asked once about a whole conversation (see the module docstring).

    Takes every option of :class:`~evalcore.judge.rubric.RubricJudge` (``rubric`` notes,
    ``samples``, thresholds, ``on_empty``...). An empty transcript (no turn answered) is the
    judge error ``empty_output`` as for a single-turn case; a malformed conversation is an error
    naming its JSON path.
    """

    name: ClassVar[str] = "conversation_rubric"
    version: ClassVar[str] = "1"
    scope: ClassVar[str] = CONVERSATION_SCOPE
    guide: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        notes = "\n\n".join(part for part in (self.guide, self.rubric) if part)
        self._rubric_text = rubric_text(AXES, notes or None)

    @property
    def score_names(self) -> list[str]:
        """``<name>`` then ``<name>.<axis>`` for each axis."""
        return [self.name, *(f"{self.name}.{axis}" for axis in AXES)]

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """Judge the conversation once; never raises for anything the judge model does."""
        try:
            view = conversation_view(ctx)
        except ConversationError as exc:
            return [Score.failure(name, f"ConversationError: {exc}") for name in self.score_names]
        transcript = render_transcript(view)
        answered = any(t["assistant"] not in (None, "") or t["tool_calls"] for t in transcript)
        reference: dict[str, JSON] = {}
        responses = [turn.final_response for turn in view.conversation.turns]
        if any(r is not None for r in responses):
            reference["final_responses"] = responses
        if view.conversation.final_state is not None:
            reference["final_state"] = view.conversation.final_state
        case = dataclasses.replace(
            ctx.case,
            input=[turn.user for turn in view.conversation.turns],
            expected=reference if reference else MISSING,
        )
        judged = dataclasses.replace(ctx, case=case, output=transcript if answered else [])
        return [self._renamed(score) for score in await super().score(judged)]

    def _renamed(self, score: Score) -> Score:
        if score.name == JUDGE_SCORE or score.name.startswith(f"{JUDGE_SCORE}."):
            score.name = self.name + score.name[len(JUDGE_SCORE) :]
        return score


@dataclass
class GoalCompletion(ConversationRubric):
    """``goal_completion``: did the assistant achieve the user's goal by the end (:data:`GOAL_GUIDE`)."""

    name: ClassVar[str] = "goal_completion"
    guide: ClassVar[str | None] = GOAL_GUIDE


@dataclass
class KnowledgeRetention(ConversationRubric):
    """``knowledge_retention``: does each turn keep what earlier turns said (:data:`RETENTION_GUIDE`)."""

    name: ClassVar[str] = "knowledge_retention"
    guide: ClassVar[str | None] = RETENTION_GUIDE


CONVERSATION_JUDGES: tuple[type[ConversationRubric], ...] = (ConversationRubric, GoalCompletion, KnowledgeRetention)
"""The conversation-level judges, for the scorer registry."""
