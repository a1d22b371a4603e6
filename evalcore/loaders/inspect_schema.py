"""The parts of an Inspect log Evalsite reads, as pydantic models (every other field is ignored).

Field names and shapes follow inspect_ai's ``EvalLog`` / ``EvalSample`` (log format version 2;
version 1 logs have the same fields where it matters here). Values whose shape varies (a
sample's id, input and target, a score's value) are taken as any JSON value here and checked by
:mod:`evalcore.loaders.inspect_log`, which words those errors itself.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator, model_validator

from evalcore.loaders.errors import CaseBankError

__all__ = ["Header", "Results", "SampleIn", "Stats", "invalid", "parse_log_json"]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Dataset(_Lenient):
    name: str | None = None
    location: str | None = None


class _Config(_Lenient):
    epochs: int | None = None


class _Revision(_Lenient):
    commit: str | None = None
    dirty: bool | None = None


class _ScorerRef(_Lenient):
    name: str


class _Spec(_Lenient):
    eval_id: str = ""
    run_id: str = ""
    task: str
    task_id: str = ""
    created: datetime
    model: str
    dataset: _Dataset = _Dataset()
    config: _Config = _Config()
    revision: _Revision | None = None
    packages: dict[str, str] = {}
    scorers: list[_ScorerRef] | None = None


class _Error(_Lenient):
    message: str = ""
    traceback: str = ""


class Stats(_Lenient):
    """When the eval ran."""

    started_at: str | None = None
    completed_at: str | None = None


class _Metric(_Lenient):
    value: JsonValue = None


class _EvalScore(_Lenient):
    name: str
    metrics: dict[str, _Metric] = {}


class Results(_Lenient):
    """Inspect's own metrics of the eval (``accuracy``, ``mean``... per score)."""

    scores: list[_EvalScore] = []

    @model_validator(mode="before")
    @classmethod
    def _one_scorer(cls, data: Any) -> Any:
        """Version 1 logs hold one ``scorer`` where later ones hold a list of ``scores``."""
        if isinstance(data, dict) and "scores" not in data and isinstance(data.get("scorer"), dict):
            return {**data, "scores": [data["scorer"]]}
        return data

    def metrics(self) -> dict[str, dict[str, float]]:
        """``{score name: {metric name: value}}``, finite numbers only."""
        out: dict[str, dict[str, float]] = {}
        for score in self.scores:
            for name, metric in score.metrics.items():
                value = metric.value
                if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                    out.setdefault(score.name, {})[name] = float(value)
        return out


class Header(_Lenient):
    """A log without its samples (`header.json`, or a `.json` log's top level)."""

    version: int = 1
    status: str
    eval: _Spec
    error: _Error | None = None
    stats: Stats | None = None
    results: Results | None = None


class _Usage(_Lenient):
    input_tokens: int = 0
    output_tokens: int = 0
    input_tokens_cache_write: int | None = None
    input_tokens_cache_read: int | None = None


class _ScoreIn(_Lenient):
    value: JsonValue
    answer: str | None = None
    explanation: str | None = None
    metadata: dict[str, JsonValue] | None = None


_THINK = re.compile(r"<think([^>]*)>(.*?)</think>", re.DOTALL)


class _Output(_Lenient):
    """A sample's ``output`` (inspect_ai's ``ModelOutput``).

    ``completion`` is written by recent versions; older logs (and any log whose completion is
    empty) keep the answer only in ``choices[0].message.content``, text or a list of content
    parts, which is where inspect_ai itself fills ``completion`` from on reading.
    """

    model: str | None = None
    completion: str | None = None
    choices: list[dict[str, Any]] = []

    def text(self) -> str:
        """The final completion as inspect_ai reads it: ``completion``, else the first choice's
        message text (text parts joined by newlines; images, reasoning, a ``<think>`` block and
        tool calls left out)."""
        if self.completion:
            return self.completion
        message = self.choices[0].get("message") if self.choices else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            # inspect_ai reads a <think> block of text content as reasoning, not as the answer
            found = _THINK.search(content)
            return (content[: found.start()] + content[found.end() :]).strip() if found else content
        if isinstance(content, list):
            texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
            return "\n".join(str(t) for t in texts if t is not None)
        return ""


class SampleIn(_Lenient):
    """One sample of one epoch (``epoch`` is 1-based: 0 or less is refused)."""

    id: JsonValue
    epoch: int = Field(1, ge=1)
    input: JsonValue
    target: JsonValue = ""
    messages: list[dict[str, Any]] = []
    output: _Output = _Output()
    scores: dict[str, _ScoreIn] | None = None
    metadata: dict[str, JsonValue] | None = None
    model_usage: dict[str, _Usage] = {}
    started_at: str | None = None
    completed_at: str | None = None
    total_time: float | None = None
    working_time: float | None = None
    error: _Error | None = None
    events: list[dict[str, Any]] = []

    @field_validator("total_time", "working_time", mode="after")
    @classmethod
    def _finite_time(cls, value: float | None) -> float | None:
        """A NaN / infinite time is no time recorded."""
        return value if value is None or math.isfinite(value) else None


def parse_log_json(data: bytes | str, where: str) -> Any:
    """JSON text of a log (a ``.json`` log, an ``.eval`` log's member) parsed.

    Inspect (pydantic) writes NaN and infinities as the bare literals ``NaN`` / ``Infinity``;
    they are read as the text ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"`` (stored values are
    JSON, which has no such numbers; a score of that text counts as no score, see
    :mod:`evalcore.loaders.inspect_scores`).

    Raises:
        CaseBankError: Not UTF-8, not JSON, or nested too deeply to parse, at ``where``.
    """
    try:
        return json.loads(data, parse_constant=str)
    except UnicodeDecodeError as exc:
        raise CaseBankError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=where) from None
    except json.JSONDecodeError as exc:
        raise CaseBankError(f"not JSON: {exc.msg}", path=where, line=exc.lineno, column=exc.colno) from None
    except RecursionError:
        raise CaseBankError("JSON nested too deeply to read", path=where) from None


def invalid(exc: ValidationError, path: str, prefix: str) -> CaseBankError:
    """The first problem pydantic found, as a :class:`CaseBankError` at ``path``, its field
    written ``prefix.key[index].key`` (e.g. ``samples[3].scores.includes.value``)."""
    first = exc.errors()[0]
    parts = [prefix] if prefix else []
    for part in first["loc"]:
        if isinstance(part, int):
            parts[-1:] = [f"{parts[-1] if parts else ''}[{part}]"]
        else:
            parts.append(str(part))
    msg = str(first["msg"])
    reason = msg[:1].lower() + msg[1:]
    if first["type"] != "missing":
        reason += f" (found {json.dumps(first.get('input'), default=str)[:80]})"
    return CaseBankError(reason, path=path, field=".".join(parts) or None)
