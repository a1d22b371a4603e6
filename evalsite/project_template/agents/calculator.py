"""An example target: a calculator that answers arithmetic questions ("What is 12 + 7 * 2?").

It needs no model, no key and no network, so the project's first eval runs at once:

    evalsite eval agents --set sets/example.jsonl --target calculator --variant careful
    evalsite eval agents --set sets/example.jsonl --target calculator --variant hasty

Two variants of one target, compared on the same cases in the portal (Compare):

* ``careful`` reads the expression with Python's own grammar (``*`` and ``/`` before ``+`` and
  ``-``, brackets honoured), never ``eval``;
* ``hasty`` reads it left to right, as a pocket calculator does, so ``2 + 3 * 4`` gives 20.

Scorers: ``numeric_match`` (the number after ``A:`` against the case's expected number: the
verdict) and ``shows_working``, a plain function as a scorer (``True`` passes, ``False`` fails).

Replace it with your own agent: a function (sync or async) taking the case's ``input`` and
returning the output, declared with ``@target(id=..., scorers=[...])`` (from
``evalcore.discovery``), or a ``TargetSpec`` with variants, as here; an undeclared function is
not a target. Every ``*.py`` file in this folder is read; ``evalsite targets agents`` lists what
it declares.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from evalcore.discovery import TargetSpec

OPERATORS: dict[type[ast.operator], Callable[[Decimal, Decimal], Decimal]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
"""The operations the calculator knows (exact decimal arithmetic: 0.1 + 0.2 is 0.3)."""

OPERATOR_SIGNS: dict[str, type[ast.operator]] = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "/": ast.Div}

_EXPRESSION = re.compile(r"[\d.\s+\-*/()]+")
_TOKEN = re.compile(r"\d+(?:\.\d+)?|[-+*/]")


def expression_of(question: Any) -> str:
    """The arithmetic in a question: ``"What is 12 + 7?"`` gives ``"12 + 7"``.

    Raises:
        ValueError: The question holds no arithmetic expression.
    """
    text = question.get("question") if isinstance(question, dict) else question
    if isinstance(text, list):  # a playground conversation: its last user message
        users = [m.get("content") for m in text if isinstance(m, dict) and m.get("role") == "user"]
        text = users[-1] if users else None
    if not isinstance(text, str):
        raise ValueError(f"expected a question as text, got {type(question).__name__}")
    parts: list[str] = [p.strip().rstrip(".").strip() for p in _EXPRESSION.findall(text) if any(c.isdigit() for c in p)]
    if not parts:
        raise ValueError(f"no arithmetic in {text!r}")
    longest: str = max(parts, key=len)
    return longest


def _evaluate(node: ast.AST) -> Decimal:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return Decimal(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError(f"not arithmetic: {ast.dump(node)}")


def _answer(expression: str, value: Decimal) -> str:
    shown = value.quantize(Decimal("0.01")).normalize() if value != value.to_integral() else value.to_integral()
    return f"{expression} = {shown}\nA: {shown}"


def careful(question: Any) -> str:
    """Answer with the usual precedence (``*`` and ``/`` first); ends with ``A: <number>``.

    Raises:
        ValueError: No arithmetic in the question, or something other than arithmetic.
        ZeroDivisionError: A division by zero (the case is then errored, not failed).
    """
    expression = expression_of(question)
    return _answer(expression, _evaluate(ast.parse(expression, mode="eval")))


def hasty(question: Any) -> str:
    """Answer left to right, ignoring precedence and brackets (the weaker variant).

    Raises:
        ValueError: No arithmetic in the question.
        ZeroDivisionError: A division by zero.
    """
    expression = expression_of(question)
    tokens = _TOKEN.findall(expression)
    if tokens[0] in OPERATOR_SIGNS:  # "-3 + 5": start from zero
        tokens.insert(0, "0")
    value = Decimal(tokens[0])
    for op, number in zip(tokens[1::2], tokens[2::2], strict=False):
        value = OPERATORS[OPERATOR_SIGNS[op]](value, Decimal(number))
    return _answer(expression, value)


def shows_working(output: Any, expected: Any) -> bool:
    """A scorer written as a plain function: the answer shows the expression it computed."""
    return isinstance(output, str) and "=" in output.split("A:")[0]


calculator = TargetSpec(
    id="calculator",
    variants={"careful": careful, "hasty": hasty},
    default_variant="careful",
    scorers=["numeric_match", shows_working],
    description="Example: arithmetic questions; `hasty` ignores operator precedence",
    input_kind="text",
    default_set="../sets/example.jsonl",
)
