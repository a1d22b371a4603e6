"""Pick the diff that understands two values: tool calls, JSON structure, prose or text.

:func:`diff_values` is what the case page (expected vs actual) and the compare case page (A's
output vs B's) show:

==============  ===========================================================================
``kind``        when
==============  ===========================================================================
``identical``   the same JSON value (or the same text)
``shapes``      different shapes (text vs object vs array): never diffed, both shown as they are
``tool_calls``  both hold tool calls (:func:`evalcore.diff.calls.as_calls`), or the expected
                value BFCL's possible answers and the actual calls made
                (:func:`evalcore.diff.calls.as_accepted_calls`): call by call, by the
                ``tool_calls`` scorer's acceptance rule
``json``        both objects or both arrays: the paths added / removed / changed
``prose``       both multi-word running text (:func:`evalcore.diff.prose.is_prose`): word by word
``text``        anything else (code, logs, numbers): lines, then words; coarser past a size
==============  ===========================================================================

A string holding a JSON object or array is read as that structure when the other side is one
(an LLM's JSON answer against a JSON expected value), and two such strings are compared
structurally; :attr:`ValueDiff.note` says so. Every kind is bounded in time (see each module).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from evalcore.diff.calls import CallsDiff, as_accepted_calls, as_calls, diff_calls
from evalcore.diff.prose import diff_prose, is_prose
from evalcore.diff.structural import StructuralDiff, diff_json, same_json
from evalcore.diff.text import LINE_DIFF_MAX_CHARS, TextDiff, diff_texts, shape_of, shown_text
from evalcore.scorers.values import DEFAULT_RULES, ValueRules

__all__ = ["ValueDiff", "diff_values"]


@dataclass(frozen=True, slots=True)
class ValueDiff:
    """The diff of two values, of the kind that suits them.

    Attributes:
        kind: ``identical``, ``shapes``, ``tool_calls``, ``json``, ``prose`` or ``text``.
        text: The text diff (kinds ``text``, ``prose``, ``identical`` of texts, ``shapes``):
            segments, whitespace flags, the shown texts; ``None`` for structures.
        structure: The structural diff (kind ``json``).
        calls: The call-by-call diff (kind ``tool_calls``).
        parsed: Which side was JSON text read as a structure: ``""``, ``expected``, ``actual``
            or ``both``.
        expected_shown, actual_shown: Both values as a page shows them in full (cut past a size).
    """

    kind: str
    text: TextDiff | None = None
    structure: StructuralDiff | None = None
    calls: CallsDiff | None = None
    parsed: str = ""
    expected_shown: str = ""
    actual_shown: str = ""

    @property
    def mode(self) -> str:
        """What the page's ``data-diff-mode`` says: the text diff's mode (``word``, ``line``,
        ``none``, ``shapes``, ``identical``, ``prose``) or ``json`` / ``tool_calls``."""
        if self.kind in ("json", "tool_calls"):
            return self.kind
        return self.text.mode if self.text is not None else self.kind

    @property
    def identical(self) -> bool:
        return self.kind == "identical"

    @property
    def note(self) -> str:
        """Sentences for the page: why the diff is coarser than asked, what was parsed."""
        notes = []
        if self.parsed:
            which = {"expected": "The expected value is", "actual": "The actual value is", "both": "Both are"}
            notes.append(f"{which.get(self.parsed, 'Both are')} JSON text, compared as the structure it holds.")
        if self.text is not None and self.text.note:
            notes.append(self.text.note)
        if self.structure is not None and self.structure.note:
            notes.append(self.structure.note)
        return " ".join(notes)


_LEFT = ("{", "[")


def _parse_json_text(value: Any) -> Any:
    """The object or array a string holds (``None`` when it holds none, or is too long)."""
    if not isinstance(value, str) or len(value) > LINE_DIFF_MAX_CHARS:
        return None
    stripped = value.strip()
    if not stripped.startswith(_LEFT):
        return None
    try:
        parsed = json.loads(stripped)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict | list) else None


def _read_structures(expected: Any, actual: Any) -> tuple[Any, Any, str]:
    """Strings holding JSON structures read as them when the other side is (or holds) one of
    the same shape; ``(expected, actual, parsed)``."""
    structured = (dict, list, tuple)
    if isinstance(expected, structured) and isinstance(actual, structured):
        return expected, actual, ""
    left = expected if isinstance(expected, structured) else _parse_json_text(expected)
    right = actual if isinstance(actual, structured) else _parse_json_text(actual)
    if left is None or right is None or shape_of(left) != shape_of(right):
        return expected, actual, ""
    parsed = {(True, True): "both", (True, False): "expected", (False, True): "actual"}
    which = parsed.get((left is not expected, right is not actual), "")
    return left, right, which


def diff_values(expected: Any, actual: Any, *, call_rules: ValueRules = DEFAULT_RULES) -> ValueDiff:
    """Diff two values with the diff that suits them (see the module docstring's table).

    Args:
        expected: The case's expected value (or run A's output on the compare page); any JSON value.
        actual: The target's output (or run B's).
        call_rules: The ``tool_calls`` scorer's value rules (its ``strings`` / ``coerce_types``)
            for a tool-call diff, so it accepts what the scorer accepts.

    Returns:
        A :class:`ValueDiff`; never raises on JSON values, bounded in time whatever their size.
    """
    left, right, parsed = _read_structures(expected, actual)
    if parsed or (isinstance(left, dict | list | tuple) and shape_of(left) == shape_of(right)):
        shown = (shown_text(expected), shown_text(actual))
        if same_json(left, right):
            return ValueDiff("identical", parsed=parsed, expected_shown=shown[0], actual_shown=shown[1])
        calls = (as_calls(left), as_calls(right))
        pair = (calls[0], calls[1]) if calls[0] is not None and calls[1] is not None else None
        pair = pair or as_accepted_calls(left, right)
        if pair is not None:
            found = diff_calls(pair[0], pair[1], rules=call_rules)
            return ValueDiff("tool_calls", calls=found, parsed=parsed, expected_shown=shown[0], actual_shown=shown[1])
        structure = diff_json(left, right)
        return ValueDiff("json", structure=structure, parsed=parsed, expected_shown=shown[0], actual_shown=shown[1])
    if isinstance(expected, str) and isinstance(actual, str) and expected != actual:
        if is_prose(expected) and is_prose(actual):
            text = diff_prose(expected, actual)
            kind = "prose" if text.mode == "prose" else "text"
            return ValueDiff(kind, text=text, expected_shown=text.expected_shown, actual_shown=text.actual_shown)
    text = diff_texts(expected, actual)
    kind = {"identical": "identical", "shapes": "shapes"}.get(text.mode, "text")
    return ValueDiff(kind, text=text, expected_shown=text.expected_shown, actual_shown=text.actual_shown)
