"""OpenAIChatModel(stream=True) (issue 27): the streamed answer assembled as the plain one would
be, and its time to first token recorded on the response, the agent's span and the case's usage."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from evalcore.runtime.agent import Agent
from evalcore.runtime.openai_client import OpenAIChatModel
from evalcore.runtime.tools import tool
from evalcore.targets import RunContext
from evalcore.tracing import Tracer
from evalcore.types import Case


def chunks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """What a streaming server sends for a request: a tool call first, then the answer in pieces."""
    asked_tool = any(m.get("role") == "tool" for m in body["messages"])
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "streamer"}
    if not asked_tool:
        call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "double", "arguments": ""}}
        parts = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]},
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"x": '}}]}}]},
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "21}"}}]}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
    else:
        parts = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "It is "}}]},
            {"choices": [{"index": 0, "delta": {"content": "42."}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
    usage = {"prompt_tokens": 30, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 10}}
    return [{**base, **p} for p in parts] + [{**base, "choices": [], "usage": usage}]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)  # type: ignore[attr-defined]
        assert body.get("stream") is True and body["stream_options"] == {"include_usage": True}
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in chunks(body):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def streaming_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@tool
def double(x: int) -> int:
    """Twice x."""
    return 2 * x


def test_a_streamed_answer_with_a_tool_call_and_its_ttft(streaming_server):
    url = f"http://127.0.0.1:{streaming_server.server_address[1]}/v1"
    model = OpenAIChatModel("streamer", base_url=url, max_retries=0, stream=True)
    agent = Agent(model, [double], name="doubler")
    tracer = Tracer(trace_id="t", run_id="t", keep=True)

    async def go() -> Any:
        ctx = RunContext(case=Case("c1", "double 21"), tracer=tracer, run_id="t", trace_id="t")
        return await agent.run("double 21", ctx)

    out = asyncio.run(go())
    assert out.output == "It is 42." and (out.tokens_in, out.tokens_out) == (60, 14)
    assert out.metadata["tool_calls"] == [{"name": "double", "arguments": {"x": 21}}]
    spans = [e.payload for e in tracer.events if e.type == "span_end" and e.payload["kind"] == "chat"]
    assert len(spans) == 2 and all(s["ttft_ms"] >= 0 and s["tokens_cached_in"] == 10 for s in spans)
    assert len(streaming_server.requests) == 2
