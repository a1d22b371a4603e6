"""Trajectory scoring: the tool calls an agent made against the calls a case expects.

The ``tool_calls`` scorer compares a list of *actual* calls with a list of *expected* calls and
reports a verdict (per ``mode``) plus precision / recall / F1 over calls, with per-argument
detail for the portal.

Where the actual calls come from, first found wins:
    1. ``ctx.run.metadata["tool_calls"]``: what the agent runtime records, a list of
       ``{"name", "arguments"}`` (``arguments`` may be a JSON string, OpenAI-style
       ``{"function": {...}}`` wrappers and objects with ``name`` / ``arguments`` work too);
    2. the output itself when it holds calls in any shape expected calls are read from (below):
       a list of calls (BFCL's ``[{"func": {"arg": value}}]``, ``[{"name", "arguments"}]``,
       ADK's ``tool_name`` / ``tool_input``), a dict with a ``"tool_calls"`` list, or a list of
       per-turn dicts; so a target returning exactly a case's expected value made those calls;
    3. the trace: ``execute_tool`` spans in ``ctx.events`` (span name = tool name, arguments
       from the ``arguments`` payload key of the ``span_begin``, else of the ``span_end``).

Expected calls come from the case's expected value: a list of calls, a dict with a
``"tool_calls"`` list (ADK-derived cases), or a list of per-turn dicts each with a
``"tool_calls"`` list (read as the turns' calls concatenated in turn order; a conversation
case, :mod:`evalcore.conversations`, is instead scored turn by turn, each turn against its own
calls). One expected call is either

* plain ``{"name": str, "arguments": {...}}`` (``args``, or ADK's ``tool_name`` /
  ``tool_input``, are accepted as aliases): each argument value is the one literal accepted
  value; or
* BFCL's possible answer ``{"func": {"arg": [accepted, ...]}}``: each argument lists its
  accepted values, and ``""`` in that list means the argument may be omitted. As in BFCL's
  ``dict_checker`` / ``list_dict_checker``, a dict inside an accepted value is itself a map of
  key -> accepted values. An empty accepted list ``[]`` is read as "the value is ``[]``" (BFCL's
  own checker can never pass such an argument; a few live answers use it for empty arrays).

How argument values compare: :mod:`evalcore.scorers.values`. How call lists are aligned (the
modes): :mod:`evalcore.scorers.alignment`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from evalcore.scorers.alignment import MODES, compare_calls
from evalcore.scorers.base import ScoreContext, Scorer, ScorerSpecError
from evalcore.scorers.calls import actual_calls, expected_calls
from evalcore.scorers.values import STRING_MODES, ValueRules
from evalcore.types import Score


@dataclass
class ToolCalls(Scorer):
    """Expected vs actual tool calls: a verdict per ``mode`` plus precision / recall / F1.

    Emits ``tool_calls`` (bool verdict), ``tool_calls.precision``, ``tool_calls.recall`` and
    ``tool_calls.f1`` (floats in 0..1, measurements without a verdict). The verdict score's
    metadata holds per-call and per-argument detail; its explanation names the first mismatch.
    See the module docstring for where calls are read from, :mod:`evalcore.scorers.values`
    for how values compare.

    Attributes:
        mode: ``exact``, ``in_order`` or ``any_order``.
        strings: String comparison: ``exact``, ``casefold`` or ``bfcl``.
        coerce_types: Let ``"6"`` equal ``6`` and ``"true"`` equal ``True``.
        loose_names: Treat ``.`` and ``_`` in tool names as the same (BFCL's renaming for APIs
            that forbid dots).
    """

    name: ClassVar[str] = "tool_calls"
    version: ClassVar[str] = "1"
    mode: str = "exact"
    strings: str = "exact"
    coerce_types: bool = False
    loose_names: bool = False

    def __post_init__(self) -> None:
        """Check the options.

        Raises:
            ScorerSpecError: An unknown ``mode`` or ``strings``.
        """
        if self.mode not in MODES:
            raise ScorerSpecError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.strings not in STRING_MODES:
            raise ScorerSpecError(f"strings must be one of {', '.join(STRING_MODES)}, got {self.strings!r}")

    @property
    def score_names(self) -> list[str]:
        """``tool_calls`` and its ``.precision``, ``.recall``, ``.f1`` measurements."""
        return [self.name, f"{self.name}.precision", f"{self.name}.recall", f"{self.name}.f1"]

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """Score one case.

        Raises:
            ValueError: The case has no usable expected calls, or recorded calls are malformed.
        """
        expected = expected_calls(ctx.case.expected)
        actual, source = actual_calls(ctx)
        result = compare_calls(
            actual,
            expected,
            mode=self.mode,
            rules=ValueRules(self.strings, self.coerce_types),
            loose_names=self.loose_names,
        )
        detail = {**result.detail, "actual_source": source}
        return [
            Score(self.name, result.passed, explanation=result.explanation, metadata=detail),
            Score(f"{self.name}.precision", result.precision),
            Score(f"{self.name}.recall", result.recall),
            Score(f"{self.name}.f1", result.f1),
        ]
