"""`evalsite eval` always ends with a true state: scorer timeout, Ctrl-C (first clean, second
forced), hostile targets and scorers contained, numpy outputs stored, report files well-formed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
EVALSITE = Path(sys.executable).with_name("evalsite")
REPROS = ROOT / "tests" / "fixtures" / "repros"
HOSTILE = REPROS / "rs-04-hostile50.jsonl"


def env_for(db: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, **subprocess_db_env(db), "COLUMNS": "200", **extra}


def default_sigint() -> None:
    # background jobs and some CI runners start processes with SIGINT ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EVALSITE), *args], cwd=ROOT, capture_output=True, text=True, env=env_for(db), timeout=180
    )


def wait_for(condition, what: str, process: subprocess.Popen | None = None, deadline_s: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert process is None or process.poll() is None, f"the process ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_ho02_a_stuck_scorer_ends_as_a_scorer_timeout_error(tmp_path):
    folder = REPROS / "ho-02-sync-scorer-blocks-loop"
    out = tmp_path / "r.json"
    args = ["eval", str(folder), "--set", str(folder / "cases.jsonl"), "--target", "stuck-pred", "--quiet"]
    done = run_cli(*args, "--scorer-timeout", "0.5", "--json", str(out), db=tmp_path / "db.sqlite3")
    # the run ends (the stuck checks are abandoned on daemon threads) and its exit code is 0
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(out.read_text())
    assert (document["report"]["n"], document["report"]["errored"]) == (8, 8)
    assert document["eval_run"]["config"]["scorer_timeout_s"] == 0.5
    errors = {s["error"] for case in document["cases"] for s in case["scores"]}
    assert len(errors) == 1 and "exceeded the 0.5 s scorer timeout" in errors.pop()


def test_scorer_timeout_is_an_option_of_eval_and_rescore(tmp_path):
    db = tmp_path / "db.sqlite3"
    for command in ("eval", "rescore"):
        shown = run_cli(command, "--help", db=db)
        assert "--scorer-timeout SECONDS" in shown.stdout and "default 120" in shown.stdout
    folder = REPROS / "ho-02-sync-scorer-blocks-loop"
    bad = run_cli("eval", str(folder), "--set", str(folder / "cases.jsonl"), "--scorer-timeout", "0", db=db)
    assert bad.returncode == 2 and "--scorer-timeout must be > 0" in bad.stderr


def test_rs04_hostile_targets_and_scorers_error_their_cases_and_the_exit_code_follows_the_gates(tmp_path):
    db = tmp_path / "db.sqlite3"
    agents = str(REPROS / "rs-00-agents")
    for target in ("cancel", "araise-base", "asys-exit"):
        out = tmp_path / f"{target}.json"
        done = run_cli("eval", agents, "--set", str(HOSTILE), "--target", target, "--json", str(out), db=db)
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(out.read_text())["report"]
        assert (report["n"], report["passed"], report["errored"]) == (50, 45, 5), target

    scorer_exit = ["eval", agents, "--set", str(HOSTILE), "--target", "echo", "--scorer", "bad_scorer:mode=exit"]
    held = run_cli(*scorer_exit, "--gate", "pass_rate>=0.9", db=db)
    assert held.returncode == 0, held.stdout + held.stderr  # the scorer's sys.exit(5) is not the exit code
    assert "5 scorer error(s)" in held.stdout
    missed = run_cli(*scorer_exit, "--gate", "pass_rate>=0.95", db=db)
    assert missed.returncode == 1  # the gate, and nothing else


def test_rs11_report_files_are_well_formed_with_control_characters_in_ids(tmp_path):
    junit, report = tmp_path / "t11.xml", tmp_path / "t11.json"
    args = ["eval", str(REPROS / "rs-00-agents"), "--set", str(REPROS / "rs-11-control-chars.jsonl")]
    done = run_cli(*args, "--target", "echo", "--junit", str(junit), "--json", str(report), db=tmp_path / "d.sqlite3")
    assert done.returncode == 0, done.stdout + done.stderr
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert case.get("name") == "ctl\\x0bid\\x00x"
    assert json.loads(report.read_text())["cases"][0]["case_id"] == "ctl\x0bid\x00x"


def test_ho04_numpy_outputs_are_stored_as_json_and_scored(tmp_path):
    folder = REPROS / "ho-04-numpy-output-stringified"
    db = tmp_path / "db.sqlite3"
    for target, output in (("np-cites", {"citations": ["12", "51"]}), ("np-list", [12, 51])):
        out = tmp_path / f"{target}.json"
        args = ["eval", str(folder), "--set", str(folder / "cases.jsonl"), "--target", target, "--json", str(out)]
        done = run_cli(*args, "--gate", "pass_rate>=1", db=db)
        assert done.returncode == 0, done.stdout + done.stderr
        (case,) = json.loads(out.read_text())["cases"]
        assert case["output"] == output and case["status"] == "passed"


STUCK_AGENT = textwrap.dedent(
    """
    import os, time
    from pathlib import Path
    from evalcore.discovery import TargetSpec

    def check(output, expected):
        if output.startswith("stuck"):
            Path(os.environ["MARKS"], output).touch()  # the test waits on these, not on time
            while True:
                time.sleep(0.05)
        return output == expected

    async def blocks_the_loop(q):
        Path(os.environ["MARKS"], q).touch()
        while True:  # sync code inside an async target: only a forced exit ends this
            time.sleep(0.05)

    echo = TargetSpec(id="echo", target=lambda q: q, scorers=[check], input_kind="text")
    hog = TargetSpec(id="hog", target=blocks_the_loop, scorers=["exact_match"], input_kind="text")
    """
)


def start_eval(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path, Path, Path]:
    folder = tmp_path / "agents"
    folder.mkdir(exist_ok=True)
    (folder / "stuck.py").write_text(STUCK_AGENT)
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    rows = [{"id": f"f{i}", "input": f"fast{i}", "expected": f"fast{i}", "split": "dev"} for i in range(4)]
    rows += [{"id": f"s{i}", "input": f"stuck{i}", "expected": f"stuck{i}", "split": "dev"} for i in range(4)]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stdout, stderr = tmp_path / "out.txt", tmp_path / "err.txt"
    db = tmp_path / "db.sqlite3"
    with stdout.open("w") as out, stderr.open("w") as err:
        process = subprocess.Popen(
            [str(EVALSITE), "eval", str(folder), "--set", str(cases), "--quiet", *args],
            cwd=ROOT,
            stdout=out,
            stderr=err,
            env=env_for(db, MARKS=str(marks)),
            preexec_fn=default_sigint,
        )
    return process, marks, stdout, stderr


def resume_eval(tmp_path, marks, match: re.Match[str], *extra: str) -> subprocess.CompletedProcess[str]:
    """``evalsite eval AGENTS --resume RUN [extra...]`` for the run whose resume hint ``match``
    found, on the test's database; its result."""
    return subprocess.run(
        [str(EVALSITE), "eval", match.group(1), "--resume", match.group(2), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env_for(tmp_path / "db.sqlite3", MARKS=str(marks)),
        timeout=180,
    )


def test_first_ctrl_c_stops_cleanly_keeps_finished_cases_and_prints_the_resume_command(tmp_path):
    # concurrency 4: the stuck cases start only as the four fast ones finish, so once four
    # scorers are stuck, four cases are finished
    process, marks, stdout, stderr = start_eval(tmp_path, "--target", "echo", "--concurrency", "4")
    try:
        wait_for(lambda: len(list(marks.iterdir())) == 4, "four stuck scorers", process)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == 130
    finally:
        process.kill()
    out = stdout.read_text()
    assert "4 of 8 case(s) stored" in out, out + stderr.read_text()
    match = re.search(r"finish it with: evalsite eval (\S+) --resume (\w+)", out)
    assert match and match.group(1) == str(tmp_path / "agents")
    assert "Ctrl-C again to exit at once" in stderr.read_text()
    assert "Traceback" not in stderr.read_text()

    # the resume runs only the four missing cases; a shorter scorer timeout ends the stuck ones
    report = tmp_path / "r.json"
    resumed = resume_eval(tmp_path, marks, match, "--quiet", "--scorer-timeout", "0.5", "--json", str(report))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "4 case(s) already done are kept" in resumed.stdout
    document = json.loads(report.read_text())
    assert document["eval_run"]["status"] == "finished"
    assert (document["report"]["n"], document["report"]["passed"], document["report"]["errored"]) == (8, 4, 4)


def test_second_ctrl_c_exits_at_once_even_when_the_loop_is_blocked(tmp_path):
    process, marks, _, stderr = start_eval(tmp_path, "--target", "hog", "--concurrency", "1")
    try:
        wait_for(lambda: any(marks.iterdir()), "the target to start", process)
        process.send_signal(signal.SIGINT)
        wait_for(lambda: "Ctrl-C again to exit at once" in stderr.read_text(), "the first Ctrl-C notice", process)
        assert process.poll() is None  # the blocked target holds the clean stop back
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == 130
    finally:
        process.kill()
    text = stderr.read_text()
    assert "second Ctrl-C: exiting now" in text and "--resume" in text


@pytest.mark.django_db(transaction=True)
def test_rescore_bounds_each_scorer_call_and_records_the_timeout():
    from django.core.management import call_command

    from apps.evals.models import EvalResult, EvalRun
    from apps.evals.runs.execution import rescore_eval_run

    folder = REPROS / "ho-02-sync-scorer-blocks-loop"
    call_command("eval", str(folder), "--set", str(folder / "cases.jsonl"), "--target", "async-pred", "--quiet")
    source = EvalRun.objects.get()
    release = threading.Event()

    def stuck(output, expected):
        release.wait(120)
        return True

    try:
        outcome = rescore_eval_run(source, [stuck], scorer_timeout_s=0.3)
    finally:
        release.set()
    assert outcome.eval_run.status == "finished" and outcome.eval_run.config["scorer_timeout_s"] == 0.3
    assert (outcome.report.n, outcome.report.errored) == (8, 8)
    errors = {s["error"] for r in EvalResult.objects.filter(eval_run=outcome.eval_run) for s in r.scores}
    assert len(errors) == 1 and "exceeded the 0.3 s scorer timeout" in errors.pop()


def test_sigterm_stops_like_the_first_ctrl_c_and_prints_the_resume_command(tmp_path):
    # a CI runner's timeout or `kill` sends SIGTERM: finished cases are kept, the run is marked
    # interrupted, the resume command is printed and the exit code says which signal (143)
    process, marks, stdout, stderr = start_eval(tmp_path, "--target", "echo", "--concurrency", "4")
    try:
        wait_for(lambda: len(list(marks.iterdir())) == 4, "four stuck scorers", process)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 143
    finally:
        process.kill()
    out = stdout.read_text()
    assert "interrupted:" in out and "4 of 8 case(s) stored" in out, out + stderr.read_text()
    assert re.search(r"finish it with: evalsite eval \S+ --resume \w+", out)
    assert "SIGTERM: stopping after storing the finished cases (SIGTERM or Ctrl-C again" in stderr.read_text()
    assert "Traceback" not in stderr.read_text()


def test_resume_refuses_options_of_a_new_run_instead_of_ignoring_them(tmp_path):
    """--resume keeps the run's own options: one it cannot honour is refused by name (exit 2),
    never silently ignored (--repeat, --split, --executor ... were)."""
    process, marks, stdout, _ = start_eval(tmp_path, "--target", "echo", "--concurrency", "4")
    try:
        wait_for(lambda: len(list(marks.iterdir())) == 4, "four stuck scorers", process)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == 130
    finally:
        process.kill()
    match = re.search(r"finish it with: evalsite eval (\S+) --resume (\w+)", stdout.read_text())
    assert match
    for extra, flag in [
        (["--timeout", "2"], "--timeout"),
        (["--repeat", "2"], "--repeat"),
        (["--split", "train"], "--split"),
        (["--executor", "queue"], "--executor"),
        (["--auto-id"], "--auto-id"),
    ]:
        resumed = resume_eval(tmp_path, marks, match, *extra)
        assert resumed.returncode == 2, resumed.stdout + resumed.stderr
        assert "--resume keeps the run's own" in resumed.stdout + resumed.stderr
        assert f"drop {flag}" in resumed.stdout + resumed.stderr


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="a SQLite file that does not exist")
@pytest.mark.parametrize(
    "command",
    [
        ["trace", "--latest"],
        ["trace", "r1:c1"],
        ["export", "r1"],
        ["export-traces", "r1", "--endpoint", "http://127.0.0.1:1"],
        ["rescore", "r1"],
    ],
)
def test_reading_commands_name_a_database_file_that_does_not_exist(tmp_path, command):
    """`evalsite trace/export/export-traces/rescore --db MISSING` says there is no such database
    (exit 2) and creates no empty file (it was a 'no such table' traceback, exit 1)."""
    missing = tmp_path / "nowhere.sqlite3"
    done = run_cli(*command, "--db", str(missing), db=missing)
    assert done.returncode == 2, done.stderr
    assert f"{missing}: no such database" in done.stderr and "Traceback" not in done.stderr
    assert not missing.exists()
