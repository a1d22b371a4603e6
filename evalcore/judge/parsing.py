"""Turning a judge model's raw text into per-axis scores, or a typed parse error.

Judge models wrap their JSON in code fences, put prose before and after it, send numbers as
strings, go out of range, drop an axis or stop mid-object. :func:`parse_judge_answer` accepts
what can be read without guessing and rejects the rest with a :class:`JudgeParseError` whose
``kind`` says which failure it was, so a bad answer is retried and, if it stays bad, recorded as
a judge error (never a 0).

The accepted answer shape is one JSON object with one key per axis::

    {"accuracy": {"score": 4, "reason": "matches the reference"}, ..., "pass": true}

An answer holding two different answer objects (``Draft: {...} Final: {...}``) is refused as
``ambiguous``, and an object repeating a key (``{"accuracy": 1, "accuracy": 5}``) as ``schema``:
taking either reading would be a guess, and a guess can turn a fail into a pass.

Leniencies (each one cannot change a reading): a ``{"scores": {...}}`` wrapper, axis keys in any
case or with spaces/hyphens (``"Hazard Avoidance"``), a bare number instead of ``{"score": n}``,
numbers sent as strings (``"4"``) or as integral floats (``4.0``), a missing ``reason`` (taken as
``""``), extra keys (ignored).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, create_model

from evalcore.judge.ask import UnreadableAnswer
from evalcore.strictjson import StrictJSONError, loads_strict

AXES: tuple[str, ...] = ("accuracy", "completeness", "grounding", "hazard_avoidance", "calibration")
"""The rubric axes, in report order. Each is scored 0..5 (integers) by the judge."""

MAX_AXIS_SCORE = 5
"""The top of every axis' integer scale (the bottom is 0)."""


class ParseErrorKind(StrEnum):
    """Why a judge answer could not be read. Each kind is retried the same way but reported apart."""

    EMPTY = "empty"
    """The model returned no text at all (or only whitespace, or only tool calls)."""
    NO_JSON = "no_json"
    """Text without any JSON object in it (prose only)."""
    TRUNCATED = "truncated"
    """A JSON object starts but never closes (the answer was cut off, e.g. by ``max_tokens``)."""
    INVALID_JSON = "invalid_json"
    """Balanced braces that are not valid JSON (single quotes, trailing commas, comments)."""
    SCHEMA = "schema"
    """Valid JSON that breaks the answer schema: a missing axis, a score out of 0..5, a non-integer,
    a key given twice in one object."""
    AMBIGUOUS = "ambiguous"
    """Two or more answer objects that differ (a draft and a revision, two readings): which one
    the judge meant would be a guess."""


TEMPLATE_REASONS = frozenset({"...", "…"})
"""Reasons that are the prompt template's placeholder, not a judgement: an answer whose every
axis reason is one of these is refused (an echoed prompt scored every case 0 before)."""


class JudgeParseError(UnreadableAnswer):
    """A judge answer that cannot be read as per-axis scores (the ask loop retries it at once).

    Attributes:
        kind: The :class:`ParseErrorKind`.
        raw: The model's text exactly as received (kept on the error score's metadata).
        detail: A short human-readable reason (which axis, which value).
    """

    kind: ParseErrorKind
    raw: str

    def __init__(self, kind: ParseErrorKind, raw: str, detail: str = "") -> None:
        super().__init__(kind, detail or kind.value, raw)


@dataclass(slots=True)
class JudgeVerdict:
    """The judge's parsed answer: one integer score and one reason per axis.

    This is what the judge *said*, before any threshold is applied (the pass/fail verdict is
    derived from ``scores`` by :mod:`evalcore.judge.verdict`, so it can be recomputed when the
    thresholds change without calling the model again).

    Attributes:
        scores: Axis name -> integer score in 0..5, for every axis in :data:`AXES`.
        reasons: Axis name -> the judge's short reason (``""`` when it gave none).
        judge_pass: The judge's own ``"pass"`` field if it sent a boolean one, else ``None``.
            Kept for the record only; it never decides the verdict.
    """

    scores: dict[str, int]
    reasons: dict[str, str] = field(default_factory=dict)
    judge_pass: bool | None = None

    @classmethod
    def from_record(cls, data: Any) -> JudgeVerdict:
        """A verdict from its stored record (``evalcore.serial.to_record`` of one: the judge cache).

        The record is validated like a fresh answer, by the same pydantic model.

        Raises:
            JudgeParseError: ``schema`` when the stored dict lacks an axis or has a bad score
                (a corrupt cache entry is treated like a bad answer, not trusted).
        """
        raw = json.dumps(data, sort_keys=True, default=str)
        scores = data.get("scores") if isinstance(data, dict) else None
        if not isinstance(scores, dict):
            raise JudgeParseError(ParseErrorKind.SCHEMA, raw, "stored verdict has no 'scores' object")
        reasons = data.get("reasons") or {}
        answer = {axis: {"score": scores.get(axis), "reason": reasons.get(axis, "")} for axis in scores}
        verdict = _validate(answer, raw)
        judge_pass = data.get("judge_pass")
        verdict.judge_pass = judge_pass if isinstance(judge_pass, bool) else None
        return verdict


_FENCE = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)


def parse_judge_answer(text: str | None, axes: tuple[str, ...] = AXES) -> JudgeVerdict:
    """Read a judge answer into a :class:`JudgeVerdict`.

    The JSON object that looks like a judge answer (it has an axis key or a ``scores`` key) is
    taken, found by brace matching that respects JSON strings, so prose or other text before or
    after it is ignored. The same object repeated (inside a code fence and around it, or echoed)
    is one answer; two different ones are ``ambiguous``. Text inside code fences is searched first
    for a non-answer object.

    Args:
        text: The model's answer text (``None`` when it sent none).
        axes: The axes that must all be present.

    Returns:
        The per-axis scores and reasons.

    Raises:
        JudgeParseError: With kind ``empty`` (no text), ``no_json`` (no object at all),
            ``truncated`` (an object that never closes), ``invalid_json`` (balanced but not
            JSON), ``schema`` (JSON that breaks the answer schema, or repeats a key) or
            ``ambiguous`` (two different answer objects).
    """
    raw = text or ""
    if not raw.strip():
        raise JudgeParseError(ParseErrorKind.EMPTY, raw, "the judge returned no text")
    regions = [m.group(1) for m in _FENCE.finditer(raw)]
    regions.append(raw)
    saw_truncated = saw_invalid = False
    other_object: dict[str, Any] | None = None
    answers: list[dict[str, Any]] = []
    for region in regions:
        scan = _scan_objects(region)
        saw_truncated = saw_truncated or scan.truncated
        saw_invalid = saw_invalid or scan.invalid
        if scan.refused:
            raise JudgeParseError(ParseErrorKind.SCHEMA, raw, scan.refused)
        answers.extend(answer for answer in scan.answers if answer not in answers)
        if other_object is None:
            other_object = scan.other
    if len(answers) > 1:
        raise JudgeParseError(
            ParseErrorKind.AMBIGUOUS, raw, f"{len(answers)} different answer objects; which one is meant is a guess"
        )
    if answers:
        return _validate(answers[0], raw, axes)
    if saw_truncated:
        raise JudgeParseError(ParseErrorKind.TRUNCATED, raw, "a JSON object starts but never closes")
    if other_object is not None:
        return _validate(other_object, raw, axes)
    if saw_invalid:
        raise JudgeParseError(ParseErrorKind.INVALID_JSON, raw, "braces enclose text that is not valid JSON")
    raise JudgeParseError(ParseErrorKind.NO_JSON, raw, "no JSON object in the answer")


@dataclass(slots=True)
class _Scan:
    answers: list[dict[str, Any]] = field(default_factory=list)
    other: dict[str, Any] | None = None
    truncated: bool = False
    invalid: bool = False
    refused: str = ""  # why a balanced JSON object is not strict JSON (a repeated key, NaN)


def _scan_objects(text: str) -> _Scan:
    """Try every ``{`` in order; collect every balanced object that looks like an answer (the
    objects nested inside one are part of it, not answers of their own)."""
    result = _Scan()
    start = text.find("{")
    while start != -1:
        end = _match_braces(text, start)
        if end is None:
            # Keep looking: a stray "{" in prose must not hide a complete object after it.
            result.truncated = True
        else:
            try:
                json.loads(text[start:end])
                value = loads_strict(text[start:end])
            except json.JSONDecodeError:
                result.invalid = True
            except StrictJSONError as exc:  # JSON, but read last-wins it could flip a verdict
                result.refused = str(exc)
                return result
            else:
                if isinstance(value, dict):
                    if _looks_like_answer(value):
                        result.answers.append(value)
                        start = text.find("{", end)
                        continue
                    if result.other is None:
                        result.other = value
        start = text.find("{", start + 1)
    return result


def _match_braces(text: str, start: int) -> int | None:
    """The index just past the ``}`` closing the ``{`` at ``start``, or ``None`` if it never closes.

    Braces inside JSON strings (including escaped quotes) do not count.
    """
    depth = 0
    in_string = False
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _norm_key(key: str) -> str:
    return re.sub(r"[\s\-]+", "_", key.strip().lower())


def _looks_like_answer(value: dict[str, Any]) -> bool:
    keys = {_norm_key(str(k)) for k in value}
    return "scores" in keys or bool(keys & set(AXES))


def _score_value(value: Any) -> int:
    """An integer 0..5 from an int, an integral float or a numeric string; else a ``ValueError``."""
    number: float | None = None
    if isinstance(value, bool):
        number = None  # true/false is not a score, although Python treats it as an int
    elif isinstance(value, int | float):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise ValueError(f"score {value!r} is not a number")
    if number != int(number):
        raise ValueError(f"score {value!r} is not an integer")
    score = int(number)
    if not 0 <= score <= MAX_AXIS_SCORE:
        raise ValueError(f"score {score} is outside 0..{MAX_AXIS_SCORE}")
    return score


def _reason_text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value)


def _entry(value: Any) -> Any:
    return value if isinstance(value, dict) else {"score": value}  # a bare number is the score


class AxisAnswer(BaseModel):
    """One axis of a judge answer: ``{"score": 0..5, "reason": str}`` (other keys ignored)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)  # its schema is built on first use, not at import

    score: Annotated[int, BeforeValidator(_score_value)]
    reason: Annotated[str, BeforeValidator(_reason_text)] = ""


@cache
def answer_model(axes: tuple[str, ...] = AXES) -> type[BaseModel]:
    """The pydantic model of a whole judge answer: one :class:`AxisAnswer` per axis, all required."""
    entry = Annotated[AxisAnswer, BeforeValidator(_entry)]
    fields: dict[str, Any] = {axis: (entry, ...) for axis in axes}
    return create_model("JudgeAnswer", __config__=ConfigDict(extra="ignore"), **fields)


def _schema_detail(exc: ValidationError) -> str:
    """The first problem, in the words the judge error shows (the first axis in order is named)."""
    error = exc.errors()[0]
    loc = error["loc"]
    axis = str(loc[0])
    if error["type"] == "missing":
        return f"missing axis {axis!r}" if len(loc) == 1 else f"axis {axis!r} has no 'score'"
    cause = error.get("ctx", {}).get("error")
    return f"axis {axis!r}: {cause if cause is not None else error['msg']}"


def _validate(data: dict[str, Any], raw: str, axes: tuple[str, ...] = AXES) -> JudgeVerdict:
    """Check the answer schema with :func:`answer_model` (see the module docstring's leniencies)."""
    normalised = {_norm_key(str(k)): v for k, v in data.items()}
    judge_pass = normalised.get("pass")
    body = normalised
    if isinstance(normalised.get("scores"), dict):
        body = {_norm_key(str(k)): v for k, v in normalised["scores"].items()}
        judge_pass = body.get("pass", judge_pass)
    try:
        answer = answer_model(axes).model_validate({axis: body[axis] for axis in axes if axis in body})
    except ValidationError as exc:
        raise JudgeParseError(ParseErrorKind.SCHEMA, raw, _schema_detail(exc)) from None
    entries: dict[str, AxisAnswer] = {axis: getattr(answer, axis) for axis in axes}
    if all(entry.reason.strip() in TEMPLATE_REASONS for entry in entries.values()):
        # the prompt's own answer template (every reason "...", every score 0) read back: an
        # endpoint echoing its input, or a model copying the instructions, is no verdict
        raise JudgeParseError(
            ParseErrorKind.SCHEMA,
            raw,
            "the answer is the prompt's answer template (every reason a placeholder): "
            "the judge echoed its instructions",
        )
    return JudgeVerdict(
        {axis: entry.score for axis, entry in entries.items()},
        {axis: entry.reason for axis, entry in entries.items()},
        judge_pass if isinstance(judge_pass, bool) else None,
    )
