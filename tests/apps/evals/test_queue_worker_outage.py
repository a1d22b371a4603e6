"""rs3-13 (B): a Redis outage no longer ends a busy queue worker.

For real: PostgreSQL and Redis from ``scripts/cluster.sh services``, the portal
(``evalsite serve --no-worker``) and one ``evalsite queue_worker`` whose work-horse is running a
shard of a *gated* run (its cases wait until the test creates a file). Redis is shut down
without saving, then started again empty on the same port: the worker says so in one log line,
waits, registers again, and the run finishes with every case stored once, without a resume.
RQ's own loop quit on the first Redis error ("found an unhandled exception, quitting...").
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import redis
import requests

from tests.support.cluster import EVALSITE, ROOT, Cluster, wait_until, write_agents, write_set

FAST = {"EVALSITE_SHARD_LEASE_S": "2", "EVALSITE_HEARTBEAT_S": "0.2", "EVALSITE_SHARD_SIZE": "10"}


@pytest.fixture
def portal(tmp_path):
    agents = write_agents(tmp_path / "agents")
    cluster = Cluster(env={**FAST, "EVALSITE_AGENTS_DIR": str(agents)})
    try:
        assert cluster.evalsite("demo_users").returncode == 0
        made = cluster.evalsite("token", "create", "--user", "member", "--name", "test")
        token = next(w for w in made.stdout.split() if w.startswith("esk_"))
        port, _ = cluster.start_serve()
        yield cluster, agents, f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    finally:
        cluster.close()


def start_worker(cluster: Cluster, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [str(EVALSITE), "queue_worker", "--name", "outage-w1"],
            cwd=ROOT,
            env=cluster.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    cluster.workers.append(worker)  # stopped by cluster.close()
    return worker


def restart_redis(cluster: Cluster, port: int) -> None:
    """``redis-server`` again on the same port, empty (as after a crash without persistence)."""
    folder = cluster.folder
    subprocess.run(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--daemonize", "yes", "--pidfile", f"{folder}/redis.pid", "--logfile", f"{folder}/redis2.log",
         "--dir", str(folder)],
        check=True,
    )  # fmt: skip


def shutdown_redis(url: str) -> None:
    """``SHUTDOWN NOSAVE``: Redis gone, its data with it."""
    try:
        redis.Redis.from_url(url).shutdown(nosave=True)
    except redis.exceptions.ConnectionError:
        pass  # the server closed the connection as it went


def test_a_worker_waits_out_redis_outages_busy_or_idle_and_the_run_finishes(portal, tmp_path):
    cluster, agents, base, headers = portal
    log = tmp_path / "worker.log"
    worker = start_worker(cluster, log)
    cluster.evalsite("import", str(write_set(tmp_path / "outage.jsonl", 30)), "--name", "outage-set")
    [(set_id,)] = cluster.sql("SELECT id FROM evals_evalset WHERE name = 'outage-set'")
    started = requests.post(
        base + "/api/eval/runs",
        headers=headers,
        json={"set_id": set_id, "target_id": "upper", "variant": "gated"},
        timeout=60,
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    # the worker is busy: its horse holds a shard whose cases wait for the gate
    wait_until("a shard running", lambda: cluster.sql(
        "SELECT 1 FROM evals_evalshard WHERE eval_run_id = %s AND status = 'running'", [run_id]))  # fmt: skip

    url = cluster.services["EVALSITE_REDIS_URL"]
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    shutdown_redis(url)
    wait_until("the worker noticing the outage", lambda: "Redis is unreachable" in log.read_text())
    assert worker.poll() is None, log.read_text()

    restart_redis(cluster, port)
    (agents / "open").touch()  # let the cases finish
    wait_until(
        "the run finishing", lambda: cluster.run_row(run_id)["status"] not in ("queued", "running"), timeout_s=600
    )
    row = cluster.run_row(run_id)
    assert (row["status"], row["n_done"], row["n_passed"]) == ("finished", 30, 30), (row, log.read_text())
    assert cluster.sql(
        "SELECT COUNT(*), COUNT(DISTINCT case_id) FROM evals_evalresult WHERE eval_run_id = %s", [run_id]
    ) == [(30, 30)]
    assert worker.poll() is None, log.read_text()  # still working
    text = log.read_text()
    assert text.count("Redis is unreachable") == 1, text  # one line for the outage
    assert "unhandled exception" not in text and "Traceback" not in text, text
    # registered again in the new (empty) Redis: the status page lists it
    assert wait_until("the worker registered again", lambda: requests.get(
        base + "/api/status", headers=headers, timeout=60).json()["queue_workers"])  # fmt: skip

    # an idle worker rides out the next outage the same way: one more line, no retry chatter
    shutdown_redis(url)
    wait_until("the idle worker noticing", lambda: log.read_text().count("Redis is unreachable") == 2)
    restart_redis(cluster, port)
    assert wait_until("the worker registered again", lambda: requests.get(
        base + "/api/status", headers=headers, timeout=60).json()["queue_workers"])  # fmt: skip
    assert worker.poll() is None
    text = log.read_text()
    assert text.count("Redis is unreachable") == 2 and "could not connect to Redis instance" not in text, text
