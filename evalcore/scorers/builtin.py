"""Built-in deterministic scorers.

Each is a small dataclass: options in fields, one async ``score(ctx)``. Registered by ``name``
so a stored spec ``{name, args, version}`` rebuilds it (see ``evalcore.scorers.base``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from evalcore.scorers.base import Scorer, ScoreContext, register
from evalcore.types import Score


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@register
@dataclass
class ExactMatch(Scorer):
    """Output equals expected. Options: ``strip`` whitespace, ``casefold`` case.

    Non-string values are compared as canonical JSON text.
    """

    name: ClassVar[str] = "exact_match"
    version: ClassVar[str] = "1"
    strip: bool = True
    casefold: bool = False

    def _norm(self, value: Any) -> str:
        text = _as_text(value)
        if self.strip:
            text = text.strip()
        if self.casefold:
            text = text.casefold()
        return text

    async def score(self, ctx: ScoreContext) -> Score:
        if not ctx.case.has_expected:
            raise ValueError(f"case {ctx.case.id!r} has no expected value")
        ok = self._norm(ctx.output) == self._norm(ctx.case.expected)
        return Score(self.name, ok, passed=ok, explanation=None if ok else "output differs from expected")


@register
@dataclass
class Predicate(Scorer):
    """Any user function ``fn(output, expected)`` or ``fn(ctx)`` returning bool, a 0..1 float or a Score."""

    name: ClassVar[str] = "predicate"
    version: ClassVar[str] = "1"
    fn: Callable[..., Any] = lambda output, expected: False  # noqa: E731
    label: str | None = None

    async def score(self, ctx: ScoreContext) -> Score:
        name = self.label or getattr(self.fn, "__name__", self.name)
        params = [p for p in inspect.signature(self.fn).parameters.values() if p.default is p.empty]
        result = self.fn(ctx) if len(params) == 1 else self.fn(ctx.output, ctx.case.expected)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, Score):
            return result
        if isinstance(result, bool):
            return Score(name, result, passed=result)
        if isinstance(result, int | float):
            return Score(name, float(result), passed=None)
        raise TypeError(f"predicate {name!r} returned {type(result).__name__}; expected bool, float or Score")
