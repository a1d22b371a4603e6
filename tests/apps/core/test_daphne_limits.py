"""rs3-03 on the real server: ``evalsite serve`` (daphne) refuses a body over its route's limit,
and an OTLP POST without a valid token, from the request head, before the body is held.

Each refusal is read right after the head is sent, with no body byte sent yet: the answer cannot
depend on the body. The memory check sends 300 MB the way rs3-03 did and compares the server's
peak RSS (VmHWM) before and after: before the fix it grew by the body's size.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.databases import subprocess_db_env

EVALSITE = [str(Path(sys.executable).parent / "evalsite")]
MB = 1 << 20


@dataclass
class Served:
    port: int
    pid: int
    token: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A real ``evalsite serve --no-worker`` on a scratch database, with a member's token."""
    root = tmp_path_factory.mktemp("daphne_limits")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "EVALSITE_"))},
        **subprocess_db_env(root / "db.sqlite3"),
        "EVALSITE_DATA_DIR": str(root / "var"),
        "PYTHONUNBUFFERED": "1",
    }

    def evalsite(*args: str) -> str:
        done = subprocess.run([*EVALSITE, *args], env=env, cwd=root, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:  # say why, not just that
            raise RuntimeError(f"evalsite {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
        return done.stdout

    evalsite("migrate", "--no-input")
    evalsite("demo_users")
    token = next(w for w in evalsite("token", "create", "--user", "member").split() if w.startswith("esk_"))
    port = _free_port()
    log = (root / "serve.log").open("wb")
    server = subprocess.Popen(
        [*EVALSITE, "serve", "--no-worker", "--port", str(port)],
        env=env,
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        for _ in range(600):  # wait on the server's own answer, not on a clock
            if server.poll() is not None:
                raise RuntimeError((root / "serve.log").read_text())
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                try:
                    server.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    pass
        else:
            raise RuntimeError(f"serve never listened:\n{(root / 'serve.log').read_text()}")
        yield Served(port, server.pid, token)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=5)
        log.close()


def _head(path: str, *, length: int | None = None, token: str = "", content_type: str = "application/json") -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {content_type}"]
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    if token:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of the answer (read until the server closes)."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _answer_to_head_alone(served: Served, head: bytes) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(head)  # no body byte is ever sent
        return _answer(sock)


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_declared_body_over_the_page_limit_is_refused_before_it_is_sent(served: Served) -> None:
    status, body = _answer_to_head_alone(served, _head("/accounts/login/", length=200 * MB))
    assert status == 413
    assert b"DATA_UPLOAD_MAX_MEMORY_SIZE" in body


def test_an_otlp_post_without_a_token_is_refused_before_its_body(served: Served) -> None:
    status, body = _answer_to_head_alone(served, _head("/api/otlp/v1/traces"))
    assert status == 401
    assert "Bearer esk_" in json.loads(body)["message"]


def test_an_otlp_post_with_an_unknown_token_is_refused_before_its_body(served: Served) -> None:
    status, body = _answer_to_head_alone(served, _head("/api/otlp/v1/traces", token="esk_" + "x" * 43))
    assert status == 401
    assert json.loads(body)["message"] == "the API token is unknown, revoked or expired"


def test_an_otlp_body_declared_over_its_limit_is_refused_before_it_is_sent(served: Served) -> None:
    head = _head("/api/otlp/v1/traces", length=17 * MB, token=served.token)
    status, body = _answer_to_head_alone(served, head)
    assert status == 413
    assert b"EVALSITE_OTLP_MAX_BYTES" in body


def test_a_chunked_body_is_refused_as_it_arrives_and_never_held(served: Served) -> None:
    before = _peak_rss_kb(served.pid)
    block = b"x" * MB
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as sock:
        sock.sendall(_head("/accounts/login/"))
        try:
            for _ in range(300):
                sock.sendall(b"%x\r\n" % len(block) + block + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed after answering: the answer is still there to read
        status, _ = _answer(sock)
    assert status == 413
    # 300 MB sent; before the fix the peak grew by all of it
    assert _peak_rss_kb(served.pid) - before < 40 * 1024


def test_a_small_otlp_post_with_a_valid_token_is_still_stored(served: Served) -> None:
    export = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "limits"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "0af7651916cd43dd8448eb211c80319c",
                                "spanId": "b7ad6b7169203331",
                                "name": "root",
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000001000000000",
                            }
                        ]
                    }
                ],
            }
        ]
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/api/otlp/v1/traces",
        data=json.dumps(export).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {served.token}"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200
    # the same through a chunked body that arrives with its head (the token check waits for it)
    body = json.dumps(export).encode()
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        head = _head("/api/otlp/v1/traces", token=served.token).replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
        sock.sendall(head + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
        status, _ = _answer(sock)
    assert status == 200
