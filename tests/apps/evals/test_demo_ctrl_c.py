"""Ctrl-C during ``evalsite demo`` (as ``make demo`` runs it): one clean line and exit 130, no
traceback; the next ``evalsite demo`` resumes the interrupted run: no second run, no lockbox
warning (tester report, defect 4)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
EVALSITE = Path(sys.executable).with_name("evalsite")

# Stands in for the demo's gsm8k-replay target: the "fast" cases answer at once, the "slow"
# ones wait (cancellable) until the file named by DEMO_GATE exists.
AGENT = """
import asyncio
import os
from pathlib import Path

from evalcore.discovery import TargetSpec


async def answer(text):
    if text.startswith("slow"):
        Path(os.environ["DEMO_MARKS"], text).touch()
        while not Path(os.environ["DEMO_GATE"]).exists():
            await asyncio.sleep(0.05)
    return text


gsm8k_replay = TargetSpec(
    id="gsm8k-replay",
    input_kind="text",
    variants={"6b_finetuning": answer, "175b_verification": answer},
    scorers=["exact_match"],
)
"""


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # background jobs start with SIGINT ignored


def _wait_for(condition, what: str, process: subprocess.Popen) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 120
    while not condition():
        assert process.poll() is None, f"the demo ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_ctrl_c_stops_the_demo_cleanly_and_the_next_demo_resumes_the_run(tmp_path):
    agents, marks, gate = tmp_path / "agents", tmp_path / "marks", tmp_path / "gate"
    agents.mkdir()
    marks.mkdir()
    (agents / "replay.py").write_text(AGENT)
    rows = [{"id": f"f{i}", "input": f"fast{i}", "expected": f"fast{i}", "split": "dev"} for i in range(4)]
    rows += [{"id": f"s{i}", "input": f"slow{i}", "expected": f"slow{i}", "split": "dev"} for i in range(4)]
    rows += [{"id": f"t{i}", "input": f"test{i}", "expected": f"test{i}", "split": "test"} for i in range(2)]
    cases = tmp_path / "gsm8k_test.jsonl"
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {
        **os.environ,
        **subprocess_db_env(tmp_path / "db.sqlite3"),
        "COLUMNS": "200",
        "DEMO_MARKS": str(marks),
        "DEMO_GATE": str(gate),
    }
    common = {"cwd": ROOT, "env": env, "text": True}
    subprocess.run([str(EVALSITE), "import", str(cases)], check=True, capture_output=True, timeout=120, **common)
    demo = [str(EVALSITE), "demo", "--agents", str(agents), "--only", "GSM8K"]

    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            demo, stdout=stdout, stderr=stderr, preexec_fn=_default_sigint, start_new_session=True, **common
        )
    try:
        _wait_for(lambda: len(list(marks.iterdir())) >= 1, "a slow case to start", process)
        os.killpg(process.pid, signal.SIGINT)  # as a terminal does: the demo and its eval child
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    text = out.read_text() + err.read_text()
    assert process.returncode == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert text.count("demo stopped by Ctrl-C") == 1, text
    assert "held-out" not in text and "lockbox" not in text  # a demo never opens the test split

    gate.touch()
    again = subprocess.run(demo, capture_output=True, timeout=300, **common)
    text = again.stdout + again.stderr
    assert again.returncode == 0, text
    assert "resuming interrupted run" in text, text
    assert "lockbox" not in text and "held-out" not in text, text

    count = subprocess.run(
        [
            str(EVALSITE),
            "shell",
            "-c",
            "from apps.evals.models import EvalRun; "
            "print(sorted((r.variant, r.status) for r in EvalRun.objects.all()))",
        ],
        capture_output=True,
        timeout=120,
        **common,
    )
    assert (
        count.stdout.strip().splitlines()[-1] == "[('175b_verification', 'finished'), ('6b_finetuning', 'finished')]"
    ), count.stdout + count.stderr
