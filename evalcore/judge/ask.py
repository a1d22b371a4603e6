"""The judge's ask loop: one question put to a chat model until its answer reads, for every judge.

The rubric judge (:mod:`evalcore.judge.rubric`) and the rule judge (:mod:`evalcore.rules.judging`)
both ask through :func:`ask_judge`, so a judge call is retried, timed, traced and counted one way.

The retry rule:

* An *attempt* is one call that gets an answer, a timeout or an error; at most ``1 + retries``.
* Within an attempt, an endpoint that refuses the requested ``response_format`` (its error names
  ``response_format``, ``json_schema`` or ``json_object``) is asked again at once with the next
  format of the ladder (schema, JSON mode, none), and the step is remembered per model name for
  later questions. A refusal is not a failed attempt; a refusal of the last format is a model error.
* An *unreadable answer* (the parser raises :class:`UnreadableAnswer`) is retried at once: the
  next call may read, waiting would not help.
* A *timeout* (no answer within ``timeout_s``) or a *model error* (any ``Exception`` from the
  client: a :class:`~evalcore.runtime.models.ModelError` after the client's own transport retries,
  or anything else a model object raises) is retried after an exponential backoff:
  ``retry_backoff_s * 2 ** (n - 1)`` seconds before attempt ``n`` (0.5 s, 1 s, 2 s... by default).
* Cancellation (``BaseException`` that is not an ``Exception``) is never caught.
* After the last attempt the outcome holds the last error (kind, detail, raw text), never a value:
  a judge error is never a verdict.

What is recorded: every call is a ``chat`` span named ``judge:<model>`` with ``role: "judge"``,
the model, the prompt version, the caller's attributes (the sample, the rule), the attempt and the
``response_format`` type, and on an answer its tokens and finish reason; every unreadable answer is
an ``error`` event with its kind, detail and attempt. The :class:`Asked` outcome counts attempts,
calls (format steps included) and tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalcore.runtime.models import ChatModel, ChatResponse, ModelError
from evalcore.tracing import Tracer

DEFAULT_RETRY_BACKOFF_S = 0.5
"""Base of the backoff after a model error or a timeout, in seconds."""


class UnreadableAnswer(ValueError):
    """A judge answer its parser cannot read; the ask loop retries it at once.

    Attributes:
        kind: Why, as a short word (``empty``, ``not_json``, ``schema``...), recorded as the error kind.
        detail: Words for the reason.
        raw: The answer text as received (``None`` when there was none).
    """

    def __init__(self, kind: str, detail: str, raw: str | None) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail, self.raw = kind, detail, raw


@dataclass(slots=True)
class Asked[T]:
    """What asking gave: the parsed answer, or the last error after every attempt (never both).

    Attributes:
        value: The parsed answer, or ``None`` when every attempt failed.
        kind: ``model_error``, ``timeout`` or the :class:`UnreadableAnswer` kind of the last failure.
        detail: Words for the last failure.
        raw: The last unreadable answer's text (``None`` for a model error or a timeout).
        attempts: Attempts made (1 .. 1 + retries).
        calls: Calls made, format-ladder steps included.
        tokens_in: Prompt tokens of the answered calls (0 when not reported).
        tokens_out: Completion tokens of the answered calls (0 when not reported).
    """

    value: T | None = None
    kind: str | None = None
    detail: str | None = None
    raw: str | None = None
    attempts: int = 0
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    def _failed(self, kind: str, detail: str, raw: str | None) -> None:
        self.kind, self.detail, self.raw = kind, detail, raw


def is_format_rejection(exc: ModelError) -> bool:
    """Whether a model error says the endpoint does not support the requested ``response_format``."""
    text = str(exc).lower()
    return any(word in text for word in ("response_format", "json_schema", "json_object"))


async def ask_judge[T](
    model: ChatModel,
    messages: list[dict[str, Any]],
    parse: Callable[[str | None], T],
    *,
    formats: Sequence[dict[str, Any] | None],
    format_level: dict[str, int],
    retries: int,
    timeout_s: float | None,
    retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
    temperature: float | None,
    seed: int | None,
    max_tokens: int | None,
    tracer: Tracer | None,
    prompt_version: str,
    span_attributes: Mapping[str, Any] | None = None,
) -> Asked[T]:
    """Ask ``model`` until ``parse`` reads its answer or the attempts run out (the module's retry rule).

    Args:
        model: The judge model.
        messages: The chat messages of the question.
        parse: Reads the answer text (``None`` when the model sent none) into a value; raises
            :class:`UnreadableAnswer` when it cannot.
        formats: The ``response_format`` ladder, best first (``[None]`` to send none).
        format_level: Per model name, the ladder step to start from; lowered here on a refusal.
        retries: New attempts after a failed one (>= 0).
        timeout_s: Seconds one call may take before the attempt counts as a timeout (``None``: no limit).
        retry_backoff_s: Base of the backoff after a model error or a timeout, in seconds.
        temperature: Sent with every call.
        seed: Sent with every call.
        max_tokens: Completion token cap per call.
        tracer: When set, calls are spans and unreadable answers error events (see the module doc).
        prompt_version: Recorded on every span.
        span_attributes: More attributes for every span (``sample``, ``rule``).

    Returns:
        The :class:`Asked` outcome. Never raises for the model's doing.
    """
    asked: Asked[T] = Asked()
    for attempt in range(retries + 1):
        asked.attempts = attempt + 1
        if attempt and asked.kind in ("model_error", "timeout"):
            await asyncio.sleep(retry_backoff_s * 2 ** (attempt - 1))
        try:
            response = await _call(
                model,
                messages,
                asked,
                formats=formats,
                format_level=format_level,
                timeout_s=timeout_s,
                sampling={"temperature": temperature, "seed": seed, "max_tokens": max_tokens},
                tracer=tracer,
                span_attributes={"prompt_version": prompt_version, **(span_attributes or {}), "attempt": attempt},
            )
        except TimeoutError:
            asked._failed("timeout", f"no answer within {timeout_s:g} s", None)
            continue
        except Exception as exc:  # noqa: BLE001 - any client failure is a judge error, never a crash
            asked._failed("model_error", f"{type(exc).__name__}: {exc}", None)
            continue
        try:
            value = parse(response.content)
        except UnreadableAnswer as exc:
            kind = str(exc.kind)
            asked._failed(kind, exc.detail, exc.raw)
            if tracer is not None:
                tracer.error(f"judge:{model.name}", kind=kind, detail=exc.detail, attempt=attempt)
            continue
        asked.value, asked.kind, asked.detail, asked.raw = value, None, None, None
        return asked
    return asked


async def _call(
    model: ChatModel,
    messages: list[dict[str, Any]],
    asked: Asked[Any],
    *,
    formats: Sequence[dict[str, Any] | None],
    format_level: dict[str, int],
    timeout_s: float | None,
    sampling: dict[str, Any],
    tracer: Tracer | None,
    span_attributes: dict[str, Any],
) -> ChatResponse:
    """One attempt's call, stepping down the ``response_format`` ladder on a format refusal."""
    level = format_level.get(model.name, 0)
    while True:
        response_format = formats[level]
        fmt = response_format.get("type") if isinstance(response_format, dict) else None
        try:
            if tracer is None:
                return await _complete(model, messages, asked, response_format, timeout_s, sampling)
            with tracer.span(
                "chat",
                f"judge:{model.name}",
                role="judge",
                model=model.name,
                **span_attributes,
                response_format=fmt,
            ) as span:
                response = await _complete(model, messages, asked, response_format, timeout_s, sampling)
                span.set(
                    tokens_in=response.tokens_in, tokens_out=response.tokens_out, finish_reason=response.finish_reason
                )
                return response
        except ModelError as exc:
            if not is_format_rejection(exc) or level + 1 >= len(formats):
                raise
            level += 1
            format_level[model.name] = level


async def _complete(
    model: ChatModel,
    messages: list[dict[str, Any]],
    asked: Asked[Any],
    response_format: dict[str, Any] | None,
    timeout_s: float | None,
    sampling: dict[str, Any],
) -> ChatResponse:
    asked.calls += 1
    async with asyncio.timeout(timeout_s):
        response = await model.complete(messages, response_format=response_format, **sampling)
    asked.tokens_in += response.tokens_in or 0
    asked.tokens_out += response.tokens_out or 0
    return response
