"""Deterministic targets for the browser tests, copied into a temporary agents folder.

``adder`` has two variants that disagree on many cases (so compare shows flips both ways and a
significant McNemar test); ``slow-adder`` runs its cases one at a time with a short sleep so a
run started from the browser lasts a few seconds and its progress can be watched live. Both
call an ``add`` tool inside an ``execute_tool`` span, so a case's trace is a real span tree.
Input is a case ``{"question", "a", "b"}`` or a playground conversation (a message list).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from evalcore.discovery import TargetSpec
from evalcore.types import TargetOutput

SLOW_CASE_S = 0.06
"""Seconds ``slow-adder`` spends on each case (serialized: 60 cases take about 3.6 s)."""

_SUM = re.compile(r"(-?\d+)\s*\+\s*(-?\d+)")
_locks: dict[int, asyncio.Lock] = {}


def operands(value: Any) -> tuple[int, int]:
    """The two numbers to add, from a case input or the last user message of a conversation.

    Raises:
        ValueError: No ``a + b`` in the text.
    """
    if isinstance(value, dict) and "a" in value and "b" in value:
        return int(value["a"]), int(value["b"])
    if isinstance(value, list):
        text = next((str(m.get("content", "")) for m in reversed(value) if m.get("role") == "user"), "")
    elif isinstance(value, dict):
        text = str(value.get("question", ""))
    else:
        text = str(value)
    match = _SUM.search(text)
    if match is None:
        raise ValueError(f"no 'a + b' in {text!r}")
    return int(match[1]), int(match[2])


def add_with_tool(a: int, b: int, ctx: Any, *, wrong: bool) -> TargetOutput:
    """Call the ``add`` tool in a traced span; ``wrong`` makes it off by one (a failing case).

    The output carries the tool trajectory (``metadata["tool_calls"]``, as the runtime's agents
    record it) and fixed token counts, so pages show tool calls and tokens.
    """
    with ctx.tracer.span("execute_tool", "add", arguments={"a": a, "b": b}) as span:
        result = a + b + (1 if wrong else 0)
        span.set(result=result)
    return TargetOutput(
        output=str(result),
        model="arith-tool",
        tokens_in=12,
        tokens_out=3,
        metadata={"tool_calls": [{"name": "add", "arguments": {"a": a, "b": b}}]},
    )


class Adder:
    """An agent adding two numbers, wrong on the cases ``wrong_on(a)`` picks."""

    kind = "agent"

    def __init__(self, name: str, wrong_on: Callable[[int], bool]) -> None:
        self.name = name
        self.wrong_on = wrong_on

    async def run(self, value: Any, ctx: Any) -> TargetOutput:
        a, b = operands(value)
        return add_with_tool(a, b, ctx, wrong=self.wrong_on(a))


class SlowAdder(Adder):
    """An :class:`Adder` that takes :data:`SLOW_CASE_S` per case, one case at a time."""

    async def run(self, value: Any, ctx: Any) -> TargetOutput:
        # One lock per event loop: whatever the run's concurrency, cases finish one by one.
        lock = _locks.setdefault(id(asyncio.get_running_loop()), asyncio.Lock())
        async with lock:
            await asyncio.sleep(SLOW_CASE_S)
        return await super().run(value, ctx)


adder = TargetSpec(
    id="adder",
    # v1 fails a % 4 == 0 (15 of 60 dev cases), v2 fails a % 15 == 1 (4): 14 fixed, 3 broken.
    variants={"v1": Adder("adder-v1", lambda a: a % 4 == 0), "v2": Adder("adder-v2", lambda a: a % 15 == 1)},
    default_variant="v2",
    scorers=["exact_match"],
    description="adds two numbers with an add tool (two variants for A/B)",
)

slow_adder = TargetSpec(
    id="slow-adder",
    target=SlowAdder("slow-adder", lambda a: a % 10 == 3),
    scorers=["exact_match"],
    description="adds two numbers slowly, one case at a time (live progress)",
)


class JsonAdder:
    """A pipeline step taking a case object ``{"question", ...}`` (JSON input, like most demo
    targets): it reads the sum from the question text and refuses anything but an object."""

    kind = "agent"
    name = "json-adder"

    async def run(self, value: Any, ctx: Any) -> TargetOutput:
        if not isinstance(value, dict):
            raise TypeError(f"json-adder takes an object with a question, got {type(value).__name__}")
        a, b = operands(str(value.get("question", "")))
        return add_with_tool(a, b, ctx, wrong=False)


json_adder = TargetSpec(
    id="json-adder",
    target=JsonAdder(),
    input_kind="json",
    scorers=["exact_match"],
    default_set="e2e_arith.jsonl",
    description="adds the two numbers of a JSON case's question (plain text fills the question)",
)
