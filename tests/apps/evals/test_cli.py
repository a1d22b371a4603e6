"""`evalsite eval` end to end: exit codes, gates, held-out guard, reports, what gets stored."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from apps.traces.models import Event, Run
from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
EVALSITE = Path(sys.executable).with_name("evalsite")

AGENT = textwrap.dedent(
    """
    import asyncio
    from evalcore.discovery import TargetSpec

    def upper(text):
        if text == "boom":
            raise RuntimeError("target exploded")
        if text == "hang":
            import time; time.sleep(30)
        if text == "stuck":
            import threading; threading.Event().wait()  # forever: only a process that does not wait ends
        return text.upper()

    shout = TargetSpec(id="shout", target=upper, scorers=["exact_match"])

    def lower(text):
        return text.lower()

    quiet = TargetSpec(id="quiet", variants={"lower": lower, "upper": upper}, scorers=["exact_match"])
    """
)


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "shout.py").write_text(AGENT)
    (folder / "broken.py").write_text("import does_not_exist\n")
    return folder


def write_set(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def qa_set(tmp_path: Path) -> Path:
    rows = [{"id": f"q{i}", "input": w, "expected": w.upper(), "split": "dev"} for i, w in enumerate("abcdefgh")]
    rows[1]["expected"] = "WRONG"
    rows.append({"id": "t1", "input": "x", "expected": "X", "split": "test"})
    return write_set(tmp_path / "qa.jsonl", rows)


def run_cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **subprocess_db_env(db), "COLUMNS": "200"}
    return subprocess.run([str(EVALSITE), *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)


def test_console_script_exit_codes_0_1_2(tmp_path, agents, qa_set):
    db = tmp_path / "cli.sqlite3"
    ok = run_cli("eval", str(agents), "--set", str(qa_set), "--target", "shout", "--gate", "pass_rate>=0.8", db=db)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "7" in ok.stdout and "87.5%" in ok.stdout
    assert "broken.py" in ok.stdout  # the broken module is reported, the others still load

    gate = run_cli("eval", str(agents), "--set", str(qa_set), "--target", "shout", "--gate", "pass_rate>=0.9", db=db)
    assert gate.returncode == 1
    assert "FAIL" in gate.stdout

    usage = run_cli("eval", str(agents), "--set", str(qa_set), "--target", "nope", db=db)
    assert usage.returncode == 2
    assert "nope" in usage.stderr and "shout" in usage.stderr

    bad_gate = run_cli("eval", str(agents), "--set", str(qa_set), "--gate", "pass_rate>>1", db=db)
    assert bad_gate.returncode == 2 and "bad gate" in bad_gate.stderr

    missing_set = run_cli("eval", str(agents), db=db)
    assert missing_set.returncode == 2


def test_bad_case_bank_is_a_usage_error_naming_file_and_line(tmp_path, agents):
    db = tmp_path / "cli.sqlite3"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "input": "x", "expected": "X"}\n{"id": "b", "input": oops}\n')
    result = run_cli("eval", str(agents), "--set", str(bad), "--target", "shout", db=db)
    assert result.returncode == 2
    assert "bad.jsonl:2" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_held_out_guard_refuses_test_split_and_counts_runs(agents, qa_set, capsys):
    with pytest.raises(CommandError) as refused:
        call_command("eval", str(agents), "--set", str(qa_set), "--target", "shout", "--split", "test", "--quiet")
    assert refused.value.returncode == 2
    assert "--allow-test" in str(refused.value)
    assert not EvalRun.objects.exists()

    args = ["--target", "shout", "--split", "test", "--allow-test", "--quiet"]
    call_command("eval", str(agents), "--set", str(qa_set), *args)
    assert "held-out test split of 'qa' for shout: first run" in capsys.readouterr().out
    call_command("eval", str(agents), "--set", str(qa_set), *args)
    assert "run 1 time(s) before this one (the lockbox is open)" in capsys.readouterr().out
    # counted per target and variant: another variant's touches are its own
    call_command("eval", str(agents), "--set", str(qa_set), *args[:2], "--target", "quiet", *args[2:])
    assert "for quiet / lower: first run" in capsys.readouterr().out
    assert EvalRun.objects.filter(split="test").count() == 3


@pytest.mark.django_db(transaction=True)
def test_every_case_is_stored_with_run_result_and_trace(agents, qa_set, tmp_path):
    rows = [{"id": "ok", "input": "a", "expected": "A"}, {"id": "bad", "input": "boom", "expected": "BOOM"}]
    path = write_set(tmp_path / "mixed.jsonl", [dict(r, split="dev") for r in rows])
    report = tmp_path / "report.json"
    junit = tmp_path / "report.xml"
    call_command(
        "eval",
        str(agents),
        "--set",
        str(path),
        "--target",
        "shout",
        "--quiet",
        "--json",
        str(report),
        "--junit",
        str(junit),
    )
    eval_run = EvalRun.objects.get()
    assert (eval_run.status, eval_run.n_done, eval_run.n_passed, eval_run.n_errored) == ("finished", 2, 1, 1)
    assert eval_run.scorer_specs == [
        {"name": "exact_match", "args": {"strip": True, "casefold": False, "normalize": "NFC"}, "version": "3"}
    ]
    assert eval_run.summary["n"] == 2
    errored = EvalResult.objects.get(eval_run=eval_run, case_id="bad")
    assert errored.status == "errored" and errored.passed is False
    assert errored.run.error == {"type": "RuntimeError", "message": "target exploded"}
    assert errored.run.status == "error"
    ok = EvalResult.objects.get(eval_run=eval_run, case_id="ok")
    assert ok.run.final_answer == "A" and ok.run.metadata["eval_run_id"] == eval_run.id
    assert [e.type for e in Event.objects.filter(run=ok.run)] == ["span_begin", "span_end"]
    assert Run.objects.count() == 2

    document = json.loads(report.read_text())  # strict JSON: parses without NaN extensions
    assert document["report"]["errored"] == 1
    assert {c["case_id"]: c["status"] for c in document["cases"]} == {"ok": "passed", "bad": "errored"}
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("errors") == "1"
    assert suite.find("testcase[@name='bad']/error").get("message") == "target exploded"


@pytest.mark.django_db(transaction=True)
def test_timeout_gives_an_errored_case_and_reimport_keeps_case_splits_stable(agents, tmp_path):
    path = write_set(tmp_path / "slow.jsonl", [{"id": "h", "input": "hang", "expected": "HANG", "split": "dev"}])
    call_command("eval", str(agents), "--set", str(path), "--target", "shout", "--quiet", "--timeout", "0.3")
    result = EvalResult.objects.get()
    assert result.status == "errored" and result.run.status == "timeout"

    unsplit = [{"id": f"c{i}", "input": "a", "expected": "A"} for i in range(30)]
    call_command("import", str(write_set(tmp_path / "grow.jsonl", unsplit)))
    before = dict(EvalCase.objects.values_list("case_id", "split"))
    call_command("import", str(write_set(tmp_path / "grow.jsonl", [*unsplit, {"id": "new", "input": "b"}])))
    after = dict(EvalCase.objects.filter(eval_set__name="grow").values_list("case_id", "split"))
    assert {k: after[k] for k in before if k in after} == {k: v for k, v in before.items() if k in after}
    assert EvalSet.objects.get(name="grow").cases.count() == 31


@pytest.mark.django_db(transaction=True)
def test_failed_import_leaves_nothing_half_written(tmp_path):
    path = tmp_path / "dupes.jsonl"
    path.write_text('{"id": "a", "input": 1}\n{"id": "b", "input": 2}\n{"id": "a", "input": 3}\n')
    with pytest.raises(CommandError) as error:
        call_command("import", str(path))
    assert "line 3" in str(error.value) or "dupes.jsonl:3" in str(error.value)
    assert not EvalSet.objects.exists() and not EvalCase.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_unknown_variant_and_rescore_links_source(agents, qa_set, capsys):
    with pytest.raises(CommandError, match="no variant 'shout'"):
        call_command("eval", str(agents), "--set", str(qa_set), "--target", "quiet", "--variant", "shout", "--quiet")
    call_command("eval", str(agents), "--set", str(qa_set), "--target", "quiet", "--variant", "upper", "--quiet")
    source = EvalRun.objects.get()
    assert source.n_passed == 7
    call_command("rescore", source.id, "--scorer", "exact_match:casefold=true")
    rescored = EvalRun.objects.exclude(pk=source.pk).get()
    assert rescored.source_eval_run_id == source.id
    assert (rescored.variant, rescored.split, rescored.n_done) == ("upper", "dev", 8)
    # results annotate the same runs: nothing is stored twice
    assert Run.objects.count() == 8
    assert set(EvalResult.objects.filter(eval_run=rescored).values_list("run_id", flat=True)) == set(
        EvalResult.objects.filter(eval_run=source).values_list("run_id", flat=True)
    )


@pytest.mark.django_db(transaction=True)
def test_trace_command_prints_the_span_tree(agents, qa_set, capsys):
    call_command("eval", str(agents), "--set", str(qa_set), "--target", "shout", "--quiet")
    run = EvalResult.objects.filter(case_id="q0").get().run
    capsys.readouterr()
    call_command("trace", run.run_id)
    out = capsys.readouterr().out
    assert run.run_id in out and "node" in out and "upper" in out
    with pytest.raises(CommandError):
        call_command("trace", "nope:nope")


def test_a_hung_sync_target_does_not_hold_the_process_open(tmp_path, agents):
    rows = [{"id": "h", "input": "stuck", "expected": "STUCK", "split": "dev"}]
    path = write_set(tmp_path / "hang.jsonl", rows)
    # The target never returns: the CLI ending at all (run_cli gives up after 120 s) shows that it
    # does not wait for the hung thread; no wall-clock budget, so a busy machine cannot fail it.
    result = run_cli(
        "eval", str(agents), "--set", str(path), "--target", "shout", "--timeout", "0.5", db=tmp_path / "h.db"
    )
    assert result.returncode == 0, result.stderr
    assert "Timeout" in result.stdout + result.stderr or "errored" in result.stdout


def test_options_are_checked_before_anything_is_imported(tmp_path, agents, qa_set):
    db = tmp_path / "opts.sqlite3"
    bad_scorer = run_cli("eval", str(agents), "--set", str(qa_set), "--target", "shout", "--scorer", "nosuch", db=db)
    assert bad_scorer.returncode == 2 and "unknown scorer 'nosuch'" in bad_scorer.stderr
    typo_gate = run_cli(
        "eval", str(agents), "--set", str(qa_set), "--target", "shout", "--gate", "score:exact>=1", db=db
    )
    assert typo_gate.returncode == 2 and "no scorer of this run emits 'exact'" in typo_gate.stderr
    count = "from apps.evals.models import EvalSet; print('sets', EvalSet.objects.count())"
    listing = run_cli("migrate", db=db), run_cli("shell", "-c", count, db=db)
    assert "sets 0" in listing[1].stdout


@pytest.mark.django_db(transaction=True)
def test_reimporting_an_unchanged_file_changes_nothing(qa_set, capsys):
    call_command("import", str(qa_set))
    capsys.readouterr()
    call_command("import", str(qa_set))
    assert "0 new, 0 updated, 9 unchanged, 0 removed" in capsys.readouterr().out


def test_unknown_api_paths_answer_json(client):
    response = client.get("/api/eval/nonexistent")
    assert response.status_code == 404
    assert response.json()["message"].startswith("no API route")


@pytest.mark.django_db(transaction=True)
def test_a_killed_cli_run_is_marked_interrupted_by_the_next_run(agents, qa_set):
    from apps.evals.runs.liveness import mark_stale_runs
    from apps.evals.runs.prepare import cli_executor_config

    call_command("eval", str(agents), "--set", str(qa_set), "--target", "shout", "--quiet")
    eval_run = EvalRun.objects.get()
    assert eval_run.config["executor"] == "cli" and eval_run.config["pid"] == os.getpid()
    dead = subprocess.Popen(["true"])
    dead.wait()
    # the heartbeat is fresh, but the process of this host that executed the run is gone
    EvalRun.objects.filter(pk=eval_run.pk).update(
        status="running", config={**cli_executor_config(), "pid": dead.pid}, executor_pid=dead.pid
    )
    assert mark_stale_runs(force=True) == 1
    eval_run.refresh_from_db()
    assert eval_run.status == "interrupted" and str(dead.pid) in eval_run.error
    assert EvalResult.objects.filter(eval_run=eval_run).count() == 8  # dev split: finished cases kept


@pytest.mark.django_db(transaction=True)
def test_resume_runs_only_the_missing_cases_and_summarises_them_all(tmp_path):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "a.py").write_text(
        "import os\n"
        "from evalcore.discovery import TargetSpec\n"
        "def t(x):\n"
        "    if x == 'stop' and os.environ.get('STOP_AT') == 'stop':\n"
        "        import signal, time\n"
        "        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as a user would press it\n"
        "        time.sleep(5)\n"
        "    return x\n"
        "spec = TargetSpec(id='t', target=t, scorers=['exact_match'])\n"
    )
    rows = [{"id": f"c{i}", "input": str(i), "expected": str(i), "split": "dev"} for i in range(4)]
    rows += [
        {"id": "z", "input": "stop", "expected": "stop", "split": "dev"},
        {"id": "zz", "input": "5", "expected": "5", "split": "dev"},
    ]
    cases = write_set(tmp_path / "c.jsonl", rows)
    os.environ["STOP_AT"] = "stop"
    # Python's own Ctrl-C handler, even when this process started with SIGINT ignored (nohup, CI)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(SystemExit) as stopped:  # Ctrl-C: a clean stop, exit code 130
            call_command("eval", str(folder), "--set", str(cases), "--quiet", "--concurrency", "1")
        assert stopped.value.code == 130
    finally:
        signal.signal(signal.SIGINT, previous)
        del os.environ["STOP_AT"]
    eval_run = EvalRun.objects.get()
    assert eval_run.status == "interrupted" and eval_run.n_done == 4
    with pytest.raises(CommandError, match="drop --scorer"):
        call_command("eval", str(folder), "--resume", eval_run.id, "--scorer", "contains")
    with pytest.raises(CommandError, match=r"drop --set$"):  # the flag's name, not its dest
        call_command("eval", str(folder), "--resume", eval_run.id, "--set", str(cases))
    call_command("eval", str(folder), "--resume", eval_run.id, "--quiet")
    eval_run.refresh_from_db()
    assert (eval_run.status, eval_run.n_done, eval_run.n_passed) == ("finished", 6, 6)
    assert eval_run.summary["n"] == 6 and eval_run.summary["passed"] == 6
    assert EvalResult.objects.filter(eval_run=eval_run).count() == 6  # nothing run twice
    assert Run.objects.filter(run_id__startswith=f"{eval_run.id}:").count() == 6
    with pytest.raises(CommandError, match="only interrupted or failed runs resume"):
        call_command("eval", str(folder), "--resume", eval_run.id)


@pytest.mark.django_db(transaction=True)
def test_reimport_keeps_a_curated_split_unless_the_file_names_one(tmp_path):
    rows = [{"id": f"c{i}", "input": i} for i in range(5)]
    path = write_set(tmp_path / "cur.jsonl", rows)
    call_command("import", str(path))
    EvalCase.objects.filter(case_id="c0").update(split="test")  # a curator moved it in the admin
    call_command("import", str(path))
    assert EvalCase.objects.get(case_id="c0").split == "test"
    write_set(path, [{**rows[0], "split": "dev"}, *rows[1:]])
    call_command("import", str(path))
    assert EvalCase.objects.get(case_id="c0").split == "dev"  # the file is explicit: it wins


@pytest.mark.django_db(transaction=True)
def test_a_sets_hash_is_the_same_from_the_file_and_from_the_database(qa_set):
    from apps.evals.sets.cases import refresh_set_hashes

    call_command("import", str(qa_set))
    eval_set = EvalSet.objects.get()
    imported = eval_set.content_hash
    refresh_set_hashes([eval_set.pk])
    eval_set.refresh_from_db()
    assert eval_set.content_hash == imported
    EvalCase.objects.filter(case_id="q0").update(split="train")
    refresh_set_hashes([eval_set.pk])
    eval_set.refresh_from_db()
    assert eval_set.content_hash != imported


def test_the_printed_resume_command_names_the_database_given_with_db(monkeypatch):
    """After a stop, the printed command finds the run: with ``--db`` (or EVALSITE_DB) the
    database goes into it, quoted for a shell."""
    from apps.evals.management.commands.eval import resume_command

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("EVALSITE_DB", "/tmp/my runs/evals.sqlite3")
    assert (
        resume_command("agents", "abc123") == "evalsite eval agents --resume abc123 --db '/tmp/my runs/evals.sqlite3'"
    )
    monkeypatch.delenv("EVALSITE_DB")
    assert resume_command("agents", "abc123") == "evalsite eval agents --resume abc123"


@pytest.mark.django_db(transaction=True)
def test_an_agents_folder_without_targets_says_so(tmp_path):
    """A folder of plain functions declares no target: the error says how to declare one instead
    of "several targets ... (targets: none)"."""
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "plain.py").write_text("def answer(x):\n    return x\n")
    cases = write_set(tmp_path / "c.jsonl", [{"id": "a", "input": "1", "expected": "1", "split": "dev"}])
    with pytest.raises(CommandError, match=r"no targets declared in .*@target"):
        call_command("eval", str(folder), "--set", str(cases), "--quiet")


@pytest.mark.django_db(transaction=True)
def test_report_paths_are_checked_before_the_run(tmp_path):
    """A report path that cannot be written is refused before any case runs (exit 2, no run
    stored), not after a long run with its gates unprinted; a missing folder is created."""
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "echo.py").write_text(
        "from evalcore.discovery import target\n\n"
        "@target(id='echo', scorers=['exact_match'])\ndef echo(x):\n    return x\n"
    )
    cases = write_set(tmp_path / "c.jsonl", [{"id": "a", "input": "1", "expected": "1", "split": "dev"}])
    with pytest.raises(CommandError, match=r"--json .*: is a folder"):
        call_command("eval", str(folder), "--set", str(cases), "--quiet", "--json", str(tmp_path))
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CommandError, match=r"--junit .*: cannot create its folder"):
        call_command("eval", str(folder), "--set", str(cases), "--quiet", "--junit", str(blocker / "r.xml"))
    assert not EvalRun.objects.exists()
    report = tmp_path / "reports" / "ci" / "summary.md"
    call_command("eval", str(folder), "--set", str(cases), "--quiet", "--summary-md", str(report))
    assert report.read_text().strip() and EvalRun.objects.count() == 1
