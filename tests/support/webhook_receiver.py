"""A local webhook receiver (``http.server`` in a thread) keeping every JSON body POSTed to it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookReceiver:
    """Start with ``with WebhookReceiver() as hook``; ``hook.url`` to POST to, ``hook.bodies`` received."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.bodies: list[Any] = []
        self.headers: list[dict[str, str]] = []
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.bodies.append(json.loads(raw))
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"
