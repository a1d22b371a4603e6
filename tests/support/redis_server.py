"""A throwaway redis-server on a free loopback port, for tests (installed by `make test` / .ci/run)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def redis_server(*extra_args: str) -> Iterator[str]:
    """Start ``redis-server`` (no persistence, loopback only, plus ``extra_args``), wait until it
    accepts connections, yield its URL (``redis://127.0.0.1:PORT/0``), stop it afterwards."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is missing: run scripts/ensure-system-packages.sh"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *extra_args]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60  # generous: only bounds a server that never starts
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=60)
