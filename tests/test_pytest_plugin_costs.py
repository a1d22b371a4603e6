"""The pytest plugin's cost and latency gates (issue 27): the same gates as `evalsite eval`."""

from __future__ import annotations

from tests.test_pytest_plugin import project, run_pytest  # noqa: F401 - the fixture is used by name


def test_latency_and_cost_gates_decide_the_session(project, tmp_path):  # noqa: F811
    base = ["--evalsite-set", "sets/qa.jsonl", "--evalsite-target", "echo", "--evalsite-agents", "agents", "-q"]
    gates = ["--evalsite-gate", "p95_latency_ms<=600000", "--evalsite-gate", "cost_per_case<=1"]
    done = run_pytest(project, *base, "--evalsite-variant", "good", *gates, db=tmp_path / "c.sqlite3")
    # every case passed and the latency gate held, but a plain function names no model: no case
    # is priced, so the cost gate cannot be shown to hold and fails the session
    assert done.returncode == 1, done.stdout + done.stderr
    assert "gate p95_latency_ms<=600000: PASS" in done.stdout
    assert "gate cost_per_case<=1: FAIL (actual absent, on n=0/8 cases: 8 not covered)" in done.stdout
