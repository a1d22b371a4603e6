"""A local stand-in for an OpenAI-compatible chat-completions server, for tests.

It listens on 127.0.0.1 on an ephemeral port, in a background thread, and answers
``POST /v1/chat/completions`` from a per-test script (texts, tool calls, usage) plus fault
modes (429 with Retry-After, 5xx, a malformed JSON body, a body without ``choices``, a slow
answer). Every request is recorded so a test can assert what the client sent.

Usage::

    with StandInLLM() as llm:
        llm.reply("hello", usage=(12, 3))
        model = OpenAIChatModel("stand-in", base_url=llm.base_url)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(slots=True)
class RecordedRequest:
    """One request the stand-in received.

    Attributes:
        method: HTTP method.
        path: Request path, e.g. ``/v1/chat/completions``.
        headers: Request headers (lower-cased names).
        body: The decoded JSON body (``None`` when there was none or it was not JSON).
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any = None


@dataclass(slots=True)
class Scripted:
    """One scripted answer: status, headers, raw body bytes, and a delay before answering."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


Responder = Callable[[dict[str, Any]], dict[str, Any]]
"""Builds a completion body from the request body, used when the script is empty."""


def completion_body(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: tuple[int, int] | None = (10, 5),
    finish_reason: str | None = None,
    model: str = "stand-in-model",
) -> dict[str, Any]:
    """A chat-completions response body.

    Args:
        content: The assistant text.
        tool_calls: ``[{"name", "arguments"(object or JSON text), "id"?}]``.
        usage: ``(prompt_tokens, completion_tokens)``, or ``None`` to leave usage out.
        finish_reason: Defaults to ``tool_calls`` when there are tool calls, else ``stop``.
        model: The model name reported.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": call.get("id") or f"call_{index}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": call["arguments"]
                    if isinstance(call.get("arguments"), str)
                    else json.dumps(call.get("arguments", {})),
                },
            }
            for index, call in enumerate(tool_calls)
        ]
    body: dict[str, Any] = {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return body


class StandInLLM:
    """The stand-in server. Start it with ``start()`` or ``with StandInLLM() as llm``.

    Args:
        responder: Answers requests once the script is empty (default: a 400 error saying
            the script ran out, which a client does not retry).
        models: Model ids listed by ``GET /v1/models``.

    Attributes:
        requests: Every request received, in order.
    """

    def __init__(self, responder: Responder | None = None, models: tuple[str, ...] = ("stand-in-model",)) -> None:
        self.responder = responder
        self.models = models
        self.requests: list[RecordedRequest] = []
        self.echo_key = False
        """When set, every chat request gets a 401 quoting its ``Authorization`` header back."""
        self._script: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> StandInLLM:
        """Bind 127.0.0.1 on an ephemeral port and serve in a daemon thread."""
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        # A short poll interval keeps stop() (which waits for the serve loop to notice) fast.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="stand-in-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> StandInLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port bound."""
        assert self._server is not None, "the stand-in is not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, what an OpenAI client takes as ``base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # --- scripting -------------------------------------------------------------------------

    def push(self, scripted: Scripted) -> StandInLLM:
        """Queue one raw scripted answer."""
        with self._lock:
            self._script.append(scripted)
        return self

    def reply(
        self,
        content: str | None = None,
        *,
        tool_calls: list[dict[str, Any]] | None = None,
        usage: tuple[int, int] | None = (10, 5),
        finish_reason: str | None = None,
        model: str = "stand-in-model",
        delay_s: float = 0.0,
    ) -> StandInLLM:
        """Queue a successful completion (see :func:`completion_body` for the arguments)."""
        body = completion_body(content, tool_calls=tool_calls, usage=usage, finish_reason=finish_reason, model=model)
        return self.push(Scripted(200, json.dumps(body).encode(), delay_s=delay_s))

    def error(
        self, status: int, message: str = "stand-in error", *, headers: dict[str, str] | None = None
    ) -> StandInLLM:
        """Queue an error answer with an OpenAI-style error body."""
        body = {"error": {"message": message, "type": "stand_in_error", "code": status}}
        return self.push(Scripted(status, json.dumps(body).encode(), dict(headers or {})))

    def rate_limited(self, retry_after: str = "0") -> StandInLLM:
        """Queue an HTTP 429 with a ``Retry-After`` header (seconds)."""
        return self.error(429, "rate limited by the stand-in", headers={"Retry-After": retry_after})

    def server_error(self, times: int = 1, status: int = 500) -> StandInLLM:
        """Queue ``times`` HTTP 5xx answers."""
        for _ in range(times):
            self.error(status, "internal error in the stand-in")
        return self

    def malformed_json(self) -> StandInLLM:
        """Queue a 200 whose body claims to be JSON but is not."""
        return self.push(Scripted(200, b'{"choices": [ this is not json'))

    def missing_choices(self) -> StandInLLM:
        """Queue a 200 with a valid JSON body that has no ``choices``."""
        body = {"id": "chatcmpl-standin", "object": "chat.completion", "model": "stand-in-model"}
        return self.push(Scripted(200, json.dumps(body).encode()))

    def slow(self, delay_s: float, content: str = "late answer") -> StandInLLM:
        """Queue a completion sent only after ``delay_s`` seconds (to trip a client timeout)."""
        return self.reply(content, delay_s=delay_s)

    @property
    def pending(self) -> int:
        """Scripted answers not served yet."""
        with self._lock:
            return len(self._script)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The recorded ``POST .../chat/completions`` requests."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # --- serving ---------------------------------------------------------------------------

    def _next_answer(self, body: Any) -> Scripted:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.responder is not None and isinstance(body, dict):
            return Scripted(200, json.dumps(self.responder(body)).encode())
        error = {"error": {"message": "stand-in LLM: no scripted response left", "type": "stand_in_exhausted"}}
        return Scripted(400, json.dumps(error).encode())


def _make_handler(server: StandInLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the default stderr access log."""

        def _record(self, body: Any) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            with server._lock:
                server.requests.append(RecordedRequest(self.command, self.path, headers, body))

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

        def do_GET(self) -> None:
            self._record(None)
            if self.path.rstrip("/").endswith("/models"):
                data = [{"id": m, "object": "model", "owned_by": "stand-in"} for m in server.models]
                self._send(200, json.dumps({"object": "list", "data": data}).encode())
            else:
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            self._record(body)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
                return
            if server.echo_key:
                # like providers and proxies that quote the rejected key back in their error
                echoed = f"Incorrect API key provided: {self.headers.get('Authorization')}"
                self._send(401, json.dumps({"error": {"message": echoed, "type": "invalid_request_error"}}).encode())
                return
            answer = server._next_answer(body)
            if answer.delay_s:
                time.sleep(answer.delay_s)
            self._send(answer.status, answer.body, answer.headers)

    return Handler
