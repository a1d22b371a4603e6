"""The scaled setup for real: PostgreSQL and Redis from ``scripts/cluster.sh services``, RQ
workers (``evalsite queue_worker``, forked work-horses) and ``evalsite eval --executor queue``.

A worker killed -9 mid-shard loses and doubles nothing; a case that ends its work-horse is
errored on re-delivery (the worker lives on); Ctrl-C on the CLI cancels the run (the shards
not done are dropped, the finished cases kept).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from tests.support.cluster import ROOT, Cluster, children, wait_until, write_agents, write_set

# short leases and heartbeats: a dead worker's shard is delivered again within seconds
FAST = {"EVALSITE_SHARD_LEASE_S": "2", "EVALSITE_HEARTBEAT_S": "0.2"}


@pytest.fixture(scope="module")
def cluster():
    made = Cluster(env=FAST)
    yield made
    made.close()


@pytest.fixture
def agents(tmp_path):
    return write_agents(tmp_path / "agents")


def finish(cli: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str]:
    out, err = cli.communicate(timeout=timeout)
    return cli.returncode, out + err


def results(cluster: Cluster, eval_run_id: str) -> tuple[int, int]:
    """(result rows, distinct (case, repeat) pairs) of a run."""
    return cluster.sql(
        "SELECT COUNT(*), COUNT(DISTINCT (case_id, repeat_index)) FROM evals_evalresult WHERE eval_run_id = %s",
        [eval_run_id],
    )[0]


def test_a_run_over_two_workers_stores_every_case_once(cluster, agents, tmp_path):
    workers = [cluster.start_worker(), cluster.start_worker()]
    cases = write_set(tmp_path / "two.jsonl", 120)
    report = tmp_path / "report.json"
    cli = cluster.start_eval(
        str(agents), "--set", str(cases), "--variant", "sleepy", "--shard-size", "20", "--json", str(report)
    )
    code, output = finish(cli)
    assert code == 0, output
    assert json.loads(report.read_text())["report"]["elapsed_s"] > 0  # the workers' time (it said 0.0 s)
    eval_run_id = cluster.latest_run_id()
    row = cluster.run_row(eval_run_id)
    assert (row["status"], row["n_total"], row["n_done"], row["n_passed"], row["n_shards"]) == (
        "finished",
        120,
        120,
        120,
        6,
    )
    assert results(cluster, eval_run_id) == (120, 120)
    statuses = cluster.sql(
        "SELECT status, COUNT(*) FROM evals_evalshard WHERE eval_run_id = %s GROUP BY 1", [eval_run_id]
    )
    assert statuses == [("done", 6)]
    assert all(w.poll() is None for w in workers)
    cluster.stop_workers()


def test_a_worker_killed_mid_shard_loses_and_doubles_nothing(cluster, tmp_path):
    agents = write_agents(tmp_path / "agents", delay_s=0.05)
    first, second = cluster.start_worker(), cluster.start_worker()
    cases = write_set(tmp_path / "kill.jsonl", 240)
    cli = cluster.start_eval(
        str(agents),
        "--set",
        str(cases),
        "--variant",
        "sleepy",
        "--shard-size",
        "40",
        "--concurrency",
        "4",
    )
    eval_run_id = wait_until(
        "the run", lambda: cluster.sql("SELECT id FROM evals_evalrun WHERE n_shards > 0 AND status = 'running'")
    )[0][0]

    def holder():  # a worker whose work-horse holds a running shard with cases in flight
        rows = cluster.sql(
            "SELECT worker FROM evals_evalshard WHERE eval_run_id = %s AND status = 'running' AND in_flight != '[]'",
            [eval_run_id],
        )
        horses = {int(w.rsplit(":", 1)[1]) for (w,) in rows}
        return next((w for w in (first, second) if horses & set(children(w.pid))), None)

    victim = wait_until("a shard in flight", holder)
    cluster.kill_worker(victim)
    cluster.start_worker()  # the replacement
    code, output = finish(cli)
    assert code == 0, output
    row = cluster.run_row(eval_run_id)
    assert (row["status"], row["n_done"], row["n_passed"]) == ("finished", 240, 240)
    assert results(cluster, eval_run_id) == (240, 240)
    [(redelivered,)] = cluster.sql(
        "SELECT COUNT(*) FROM evals_evalshard WHERE eval_run_id = %s AND attempts > 1", [eval_run_id]
    )
    assert redelivered >= 1
    cluster.stop_workers()


@pytest.mark.parametrize("variant", ["exits", "segfaults"])
def test_a_case_that_ends_its_work_horse_is_errored_on_redelivery(cluster, agents, tmp_path, variant):
    worker = cluster.start_worker()
    cases = write_set(tmp_path / "boom.jsonl", 30, boom=[7])
    cli = cluster.start_eval(str(agents), "--set", str(cases), "--variant", variant, "--shard-size", "10")
    code, output = finish(cli)
    assert code == 0, output
    eval_run_id = cluster.latest_run_id()
    row = cluster.run_row(eval_run_id)
    assert (row["status"], row["n_done"], row["n_passed"], row["n_errored"]) == ("finished", 30, 29, 1)
    [(status, error)] = cluster.sql(
        "SELECT r.status, t.error FROM evals_evalresult r JOIN traces_run t ON t.id = r.run_id "
        "WHERE r.eval_run_id = %s AND r.case_id = 'k00007'",
        [eval_run_id],
    )
    assert status == "errored" and "process ended" in error["message"]
    assert worker.poll() is None  # only its work-horse ended
    cluster.stop_workers()


def test_ctrl_c_cancels_the_run_and_keeps_the_finished_cases(cluster, tmp_path):
    agents = write_agents(tmp_path / "agents", delay_s=0.05)
    cluster.start_worker()
    cases = write_set(tmp_path / "cancel.jsonl", 200)
    cli = cluster.start_eval(
        str(agents),
        "--set",
        str(cases),
        "--variant",
        "sleepy",
        "--shard-size",
        "20",
        "--concurrency",
        "2",
    )
    eval_run_id = wait_until(
        "cases done",
        lambda: cluster.sql("SELECT id FROM evals_evalrun WHERE n_shards > 0 AND status = 'running' AND n_done >= 10"),
    )[0][0]
    os.kill(cli.pid, signal.SIGINT)
    code, output = finish(cli)
    assert code == 130, output
    # the worker stops its shard at its next heartbeat; then nothing runs any more
    wait_until(
        "no shard running",
        lambda: (
            not cluster.sql(
                "SELECT 1 FROM evals_evalshard WHERE eval_run_id = %s AND status IN ('running', 'queued')",
                [eval_run_id],
            )
        ),
    )
    row = cluster.run_row(eval_run_id)
    assert row["status"] == "interrupted" and "cancelled" in row["error"]
    stored, distinct = results(cluster, eval_run_id)
    assert stored == distinct == row["n_done"] and 10 <= stored < 200
    cluster.stop_workers()


def test_a_case_bank_holding_a_nul_character_is_refused_on_postgresql_naming_line_and_field(cluster, tmp_path):
    """PostgreSQL cannot store U+0000 in text: the import failed inside its COPY with a DataError
    traceback naming no file, line or field. It is refused by the loader now, nothing written."""
    bank = tmp_path / "nul.jsonl"
    bank.write_text(
        '{"id": "a", "input": "fine", "expected": "x"}\n'
        '{"id": "b", "input": [{"role": "user", "content": "bad\\u0000here"}], "expected": "x"}\n'
    )
    done = cluster.evalsite("import", str(bank))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "nul.jsonl:2: field 'input': holds a NUL character (U+0000) at input[0].content" in done.stderr
    assert cluster.sql("SELECT COUNT(*) FROM evals_evalset WHERE name = 'nul'") == [(0,)]


NUL_AGENT = """
from evalcore import TargetOutput
from evalcore.discovery import target


@target(id="nul", scorers=["exact_match"])
def nul(question):
    if question == "raise":
        raise ValueError("bad\\x00value")
    return TargetOutput(question, model="m\\x00", metadata={"finish_reason": "st\\x00op", "k": "v\\x00"})
"""


def test_a_target_whose_error_or_model_holds_a_nul_character_is_stored_on_postgresql(cluster, tmp_path):
    """A NUL character in a target's error message, model or metadata ended the whole run on
    PostgreSQL (exit 3, StorageFailure: DataError): the case is errored or passed like any other,
    its text stored with U+FFFD."""
    agents = tmp_path / "nul_agents"
    agents.mkdir()
    (agents / "nul.py").write_text(NUL_AGENT)
    bank = tmp_path / "nulrun.jsonl"
    bank.write_text('{"id": "a", "input": "ok", "expected": "ok"}\n{"id": "b", "input": "raise", "expected": "x"}\n')
    done = cluster.evalsite("eval", str(agents), "--set", str(bank), "--split", "all", "--allow-test", "--quiet")
    assert done.returncode != 3 and "Traceback" not in done.stderr, done.stdout + done.stderr
    rows = cluster.sql(
        "SELECT e.case_id, e.status, r.model, r.error->>'message' FROM evals_evalresult e "
        "JOIN traces_run r ON r.id = e.run_id JOIN evals_evalrun v ON v.id = e.eval_run_id "
        "JOIN evals_evalset s ON s.id = v.eval_set_id WHERE s.name = 'nulrun' ORDER BY 1"
    )
    assert rows == [("a", "passed", "m\ufffd", None), ("b", "errored", "", "bad\ufffdvalue")], rows


def test_an_inspect_log_sample_holding_a_nul_character_is_not_added_as_a_case_on_postgresql(cluster, tmp_path):
    """`import-run --add-cases` of a log whose sample input holds U+0000 failed inside COPY with a
    traceback; it is refused like a case bank holding one, naming the sample and where."""
    log = json.loads((ROOT / "tests" / "fixtures" / "inspect_logs" / "biology_qa.json").read_text())
    log["samples"][0]["input"] = "new q\u0000"
    path = tmp_path / "nul_log.json"
    path.write_text(json.dumps(log))
    done = cluster.evalsite("import-run", str(path), "--add-cases", "--set", "nul-log")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "sample 'q1': its input holds a NUL character (U+0000)" in done.stderr, done.stderr
    assert cluster.sql("SELECT COUNT(*) FROM evals_evalset WHERE name = 'nul-log'") == [(0,)]
