"""The portal on the scaled setup, for real: ``evalsite serve --no-worker`` (daphne) on the
cluster of ``scripts/cluster.sh services`` (PostgreSQL, Redis, ``EVALSITE_QUEUE=rq``), as
``make cluster`` runs it, and ``evalsite queue_worker`` processes.

A run started through the API is sharded onto the RQ queue (nothing runs it in the portal's
process); ``GET /api/status`` shows the queue's depth and, once a worker runs, that worker
(name, host, PID, state, the shard it runs, its heartbeat); the workers' writers push progress
through the Redis channel layer (received here by a subscriber of the run's group, another
process) and a websocket client on daphne follows the run to its end. The target is *gated*:
its cases wait until the test creates a file, so what is checked while the run is going never
depends on timing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.cluster import Cluster, wait_until, write_agents, write_set

FAST = {"EVALSITE_SHARD_LEASE_S": "2", "EVALSITE_HEARTBEAT_S": "0.2", "EVALSITE_SHARD_SIZE": "10"}


@pytest.fixture(scope="module")
def portal(tmp_path_factory):
    agents = write_agents(tmp_path_factory.mktemp("portal") / "agents")
    cluster = Cluster(env={**FAST, "EVALSITE_AGENTS_DIR": str(agents)})
    try:
        assert cluster.evalsite("demo_users").returncode == 0
        made = cluster.evalsite("token", "create", "--user", "member", "--name", "test")
        token = next(w for w in made.stdout.split() if w.startswith("esk_"))
        port, log = cluster.start_serve()
        yield cluster, agents, f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}, log
    finally:
        cluster.close()


def api(base: str, headers: dict[str, str], method: str, path: str, **kwargs: Any) -> requests.Response:
    return requests.request(method, base + path, headers=headers, timeout=60, **kwargs)


def test_serve_without_a_worker_says_runs_wait_for_a_queue_worker(portal):
    *_, log = portal
    banner = Path(log).read_text()
    assert "sharded onto the RQ queue" in banner
    assert "runs stay queued until one runs" in banner and "evalsite queue_worker" in banner


def test_a_portal_run_is_sharded_onto_the_queue_and_followed_live_across_processes(portal, tmp_path):
    cluster, agents, base, headers, log = portal
    cluster.evalsite("import", str(write_set(tmp_path / "portal.jsonl", 30)), "--name", "portal-set")
    [(set_id,)] = cluster.sql("SELECT id FROM evals_evalset WHERE name = 'portal-set'")

    status = api(base, headers, "GET", "/api/status").json()
    assert status["queue"] == "rq" and status["queue_workers"] == []

    started = api(
        base, headers, "POST", "/api/eval/runs", json={"set_id": set_id, "target_id": "upper", "variant": "gated"}
    )
    assert started.status_code == 201, started.text
    run = started.json()
    # sharded onto the queue by the portal, none of it run by the portal's process
    row = cluster.run_row(run["id"])
    assert (row["status"], row["n_shards"], row["n_total"]) == ("queued", 3, 30)
    shards = cluster.sql("SELECT status, COUNT(*) FROM evals_evalshard WHERE eval_run_id = %s GROUP BY 1", [run["id"]])
    assert shards == [("queued", 3)]
    [queue] = [q for q in api(base, headers, "GET", "/api/status").json()["queues"] if q["backend"] == "RQ (Redis)"]
    assert queue["ready"] == 3 and queue["oldest_enqueued_at"]
    [(config,)] = cluster.sql("SELECT config FROM evals_evalrun WHERE id = %s", [run["id"]])
    assert config["executor"] == "queue" and config["early_stop"] == 20  # the portal's early-stop default

    asyncio.run(_follow(cluster, agents, base, headers, run, log))

    row = cluster.run_row(run["id"])
    assert (row["status"], row["n_done"], row["n_passed"]) == ("finished", 30, 30)
    stored = cluster.sql(
        "SELECT COUNT(*), COUNT(DISTINCT case_id) FROM evals_evalresult WHERE eval_run_id = %s", [run["id"]]
    )
    assert stored == [(30, 30)]
    cluster.stop_workers()


async def _follow(
    cluster: Cluster, agents: Path, base: str, headers: dict[str, str], run: dict[str, Any], log: Path
) -> None:
    """Subscribe to the run's channel-layer group and open its websocket on daphne; start a
    worker; see it on the status API running a shard of the run; open the gate; collect."""
    from channels_redis.core import RedisChannelLayer

    layer = RedisChannelLayer(hosts=[cluster.services["EVALSITE_REDIS_URL"]])
    channel = await layer.new_channel()
    await layer.group_add(f"eval-run.{run['id']}", channel)
    socket = await WebSocket.open(base.replace("http", "ws") + run["websocket_url"], headers)

    worker = cluster.start_worker()

    def busy() -> Any:
        rows = api(base, headers, "GET", "/api/status").json()["queue_workers"]
        mine = [w for w in rows if w["state"] == "busy" and w["shard"].startswith(run["id"] + "#")]
        return [w for w in mine if w["shards_held"] >= 1]  # its horse claimed the shard

    [shown] = await asyncio.to_thread(wait_until, "the worker on /api/status", busy)
    assert shown["pid"] == worker.pid and shown["host"] and shown["eval_run_id"] == run["id"]
    assert shown["heartbeat_age_s"] is not None and shown["job_id"].startswith("evalsite-shard-")

    (agents / "open").write_text("")  # the cases may finish now
    pushed = await asyncio.wait_for(layer.receive(channel), timeout=300)
    assert pushed == {"type": "eval.progress"}  # sent by the worker's writer, through Redis

    frames, code = await socket.until_closed(timeout=300)
    assert code == 1000, Path(log).read_text()[-4000:]  # 1011: the server's traceback is in its log
    assert frames and any("30" in frame for frame in frames[-2:])  # the final summary counts the 30 cases
    await layer.flush()


class WebSocket:
    """A websocket client (autobahn's, over asyncio) that collects text frames until closed."""

    def __init__(self) -> None:
        self.frames: list[str] = []
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.closed: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()

    @classmethod
    async def open(cls, url: str, headers: dict[str, str]) -> WebSocket:
        from urllib.parse import urlsplit

        from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol

        client = cls()

        class Protocol(WebSocketClientProtocol):  # type: ignore[misc]
            def onOpen(self) -> None:
                client.opened.set_result(None)

            def onMessage(self, payload: bytes, is_binary: bool) -> None:
                client.frames.append(payload.decode())

            def onClose(self, was_clean: bool, code: int | None, reason: str | None) -> None:
                if not client.opened.done():
                    client.opened.set_exception(ConnectionError(f"websocket refused: {code} {reason}"))
                if not client.closed.done():
                    client.closed.set_result(code)

        factory = WebSocketClientFactory(url, headers=headers)
        factory.protocol = Protocol
        parts = urlsplit(url)
        await asyncio.get_running_loop().create_connection(factory, parts.hostname, parts.port)
        await asyncio.wait_for(client.opened, timeout=60)
        return client

    async def until_closed(self, timeout: float) -> tuple[list[str], int | None]:
        code = await asyncio.wait_for(self.closed, timeout=timeout)
        return self.frames, code


def test_status_api_lists_a_queue_worker_and_marks_it_lost_when_killed(portal):
    cluster, _, base, headers, _ = portal
    worker = cluster.start_worker()

    def listed() -> Any:
        rows = api(base, headers, "GET", "/api/status").json()["queue_workers"]
        return [w for w in rows if w["pid"] == worker.pid and w["state"] == "idle"]

    [row] = wait_until("the idle worker", listed)
    assert row["name"] and row["queues"] == "evalsite" and row["shard"] == "" and row["host"]
    cluster.kill_worker(worker)
    cluster.workers.remove(worker)

    def lost() -> Any:
        rows = api(base, headers, "GET", "/api/status").json()["queue_workers"]
        return [w for w in rows if w["pid"] == worker.pid and w["state"] == "lost"]

    wait_until("the killed worker shown lost", lost, timeout_s=120)
