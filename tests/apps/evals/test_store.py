"""DjangoEvalStore: cases written as they finish, runs derived from events, big payloads whole."""

from __future__ import annotations

import asyncio
import json
import signal
import threading

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, EvalSet
from apps.evals.results.executor import executor_fields, this_executor
from apps.evals.results.writer import DjangoEvalStore
from apps.traces.models import Event, Run
from evalcore import Case, run_eval
from evalcore.runtime.agent import Agent
from evalcore.runtime.scripted import FunctionModel, last_user_text
from evalcore.runtime.tools import tool

pytestmark = pytest.mark.django_db(transaction=True)


def start(name: str = "s") -> str:
    """A running eval run of a new empty set, as ``prepare_eval_run`` leaves one for the CLI."""
    eval_set = EvalSet.objects.create(name=name)
    return EvalRun.objects.create(
        eval_set=eval_set, target_id="t", status=EvalRunStatus.RUNNING, started=timezone.now(), **executor_fields()
    ).id


def test_each_case_is_committed_as_soon_as_it_finishes():
    eval_run_id = start()
    store = DjangoEvalStore(target_id="t", eval_run_id=eval_run_id, executor=this_executor())
    seen: list[int] = []

    def target(x):
        # runs in a worker thread with its own connection: it sees only committed rows. It waits
        # (generously: no sleep-and-hope) for the cases before it to be committed, while this
        # run is still going; a writer that commits only at the end never gets there.
        import time

        from django.db import OperationalError

        deadline = time.monotonic() + 60
        while True:
            try:
                count = EvalResult.objects.filter(eval_run_id=eval_run_id).count()
            except OperationalError:  # the test database (shared-cache SQLite) is mid-write: look again
                count = -1
            if count >= x or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        seen.append(count)
        connection.close()
        return x

    cases = [Case(f"c{i}", i, i) for i in range(4)]
    with store:
        asyncio.run(run_eval(cases, target, ["exact_match"], concurrency=1, sink=store, eval_run_id=eval_run_id))
    assert seen == [0, 1, 2, 3]
    assert EvalRun.objects.get(pk=eval_run_id).n_passed == 4


def test_run_row_is_derived_from_agent_events_and_big_payloads_are_kept_whole():
    big = "x" * 2_000_000

    @tool
    def fetch(doc_id: str) -> str:
        """Fetch a document."""
        return big

    def policy(messages):
        if not any(m["role"] == "tool" for m in messages):
            return {
                "tool_calls": [{"name": "fetch", "arguments": {"doc_id": last_user_text(messages)}}],
                "tokens_in": 7,
                "tokens_out": 2,
            }
        return {"content": "done", "tokens_in": 11, "tokens_out": 3}

    agent = Agent(FunctionModel(policy, name="fake-model"), [fetch], name="reader")
    eval_run_id = start()
    store = DjangoEvalStore(target_id="reader", eval_run_id=eval_run_id, executor=this_executor())
    with store:
        report = asyncio.run(
            run_eval([Case("a", "doc-1", "done")], agent, ["exact_match"], sink=store, eval_run_id=eval_run_id)
        )
    assert report.passed == 1
    run = Run.objects.get(run_id=f"{eval_run_id}:a")
    assert run.step_metrics["llm_calls"] == 2 and run.step_metrics["tool_calls"] == 1
    assert [s["kind"] for s in run.step_metrics["steps"]] == ["chat", "execute_tool", "chat"]
    assert (run.tokens_in, run.tokens_out) == (18, 5)
    assert run.status == "ok" and run.final_answer == "done"
    seqs = list(Event.objects.filter(run=run).values_list("seq", flat=True))
    assert seqs == list(range(len(seqs)))
    tool_end = Event.objects.get(run=run, type="span_end", payload__kind="execute_tool")
    assert tool_end.payload_bytes > 2_000_000 and len(tool_end.preview) <= 300
    assert big in json.dumps(tool_end.payload)  # stored whole
    listed = Event.objects.filter(run=run).defer("payload").order_by("seq")
    assert all("payload" in e.get_deferred_fields() for e in listed)


def test_events_stay_ordered_per_run_under_concurrency():
    async def target(x, ctx):
        for i in range(5):
            with ctx.tracer.span("node", f"step{i}"):
                await asyncio.sleep(0.001 * (x % 3))
        return x

    eval_run_id = start()
    store = DjangoEvalStore(target_id="t", eval_run_id=eval_run_id, executor=this_executor())
    with store:
        asyncio.run(
            run_eval(
                [Case(f"c{i}", i, i) for i in range(30)],
                target,
                [],
                concurrency=10,
                sink=store,
                eval_run_id=eval_run_id,
            )
        )
    for run in Run.objects.all():
        events = list(Event.objects.filter(run=run).order_by("seq"))
        assert [e.seq for e in events] == list(range(12))
        opened = []
        for e in events:
            if e.type == "span_begin":
                opened.append(e.payload["span_id"])
            else:
                assert opened.pop() == e.payload["span_id"]  # properly nested


def test_an_interrupted_process_keeps_finished_cases(tmp_path):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "a.py").write_text(
        "from evalcore.discovery import TargetSpec\n"
        "def t(x):\n"
        "    if x == 'stop':\n"
        "        import os, signal, time\n"
        "        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as a user would press it\n"
        "        time.sleep(5)\n"
        "    return x\n"
        "spec = TargetSpec(id='t', target=t)\n"
    )
    cases = tmp_path / "c.jsonl"
    rows = [{"id": f"c{i}", "input": str(i), "expected": str(i), "split": "dev"} for i in range(3)]
    rows.append({"id": "z", "input": "stop", "split": "dev"})
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = set(threading.enumerate())
    # Python's own Ctrl-C handler, even when this process started with SIGINT ignored (nohup, CI)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(SystemExit) as stopped:  # a clean stop on Ctrl-C: exit code 130
            call_command(
                "eval", str(folder), "--set", str(cases), "--quiet", "--concurrency", "1", "--scorer", "exact_match"
            )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stopped.value.code == 130
    eval_run = EvalRun.objects.get()
    assert eval_run.status == "interrupted"
    assert EvalResult.objects.filter(eval_run=eval_run).count() == 3
    # The writer thread stopped; only the engine's shared daemon pool for sync targets stays.
    # (Not a process-wide thread count: earlier tests' HTTP keep-alive threads end with GC.)
    left = [t.name for t in threading.enumerate() if t not in before and t.name != "evalcore-sync"]
    assert left == []


def test_a_failing_result_writer_fails_the_run_instead_of_leaving_it_running(tmp_path, monkeypatch):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "a.py").write_text(
        "from evalcore.discovery import TargetSpec\nt = TargetSpec(id='t', target=lambda x: x)\n"
    )
    cases = tmp_path / "c.jsonl"
    cases.write_text(
        "".join(json.dumps({"id": f"c{i}", "input": i, "expected": i, "split": "dev"}) + "\n" for i in range(50))
    )

    def broken(self, items, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(DjangoEvalStore, "_write_batch", broken)
    with pytest.raises(CommandError, match="result writer failed: OSError: disk full") as raised:
        call_command("eval", str(folder), "--set", str(cases), "--quiet", "--scorer", "exact_match")
    assert raised.value.returncode == 3  # storage failure: never 0 or 1 (the gates' codes)
    eval_run = EvalRun.objects.get()
    assert eval_run.status == "failed" and eval_run.finished is not None
    assert "disk full" in eval_run.error


def test_judge_calls_are_not_counted_as_the_targets_work():
    from apps.traces.services import RunAggregate
    from evalcore.tracing import Tracer

    tracer = Tracer("t", "t")
    with tracer.span("chat", "target-model") as span:
        span.set(tokens_in=10, tokens_out=2)
    with tracer.span("chat", "judge:m", role="judge") as span:
        span.set(tokens_in=1000, tokens_out=50)
    aggregate = RunAggregate()
    for event in tracer.events:
        aggregate.add(event)
    assert (aggregate.llm_calls, aggregate.tokens_in, aggregate.tokens_out) == (1, 10, 2)


def test_reading_a_run_back_takes_as_many_queries_for_200_cases_as_for_20():
    """``iter_stored_runs`` looks cases up per chunk of results, not once per result past a cache."""
    from django.test.utils import CaptureQueriesContext

    from apps.evals.results.readback import iter_stored_runs
    from tests.apps.factories import make_eval_run, make_eval_set

    queries = {}
    for n in (20, 200):
        eval_set = make_eval_set(f"read-{n}", n, splits=("dev",))
        eval_run = make_eval_run(eval_set, [True] * n)
        with CaptureQueriesContext(connection) as captured:
            pairs = list(iter_stored_runs(eval_run.id))
        queries[n] = len(captured.captured_queries)
        assert [case.id for case, _ in pairs] == [f"c{i}" for i in range(n)]
        last_case, last_record = pairs[-1]
        assert last_case.input == {"question": f"what is {n - 1} + {n - 1}?"} and last_case.expected == str(2 * (n - 1))
        assert last_record.case_id == f"c{n - 1}"
    assert queries[200] == queries[20] <= 3


def test_a_case_gone_from_the_set_reads_back_as_a_bare_case():
    from apps.evals.models import EvalCase
    from apps.evals.results.readback import iter_stored_runs
    from tests.apps.factories import make_eval_run, make_eval_set

    eval_set = make_eval_set("gone", 3, splits=("dev",))
    eval_run = make_eval_run(eval_set, [True, False, True])
    EvalCase.objects.filter(eval_set=eval_set, case_id="c1").delete()
    cases = {case.id: case for case, _ in iter_stored_runs(eval_run.id)}
    assert cases["c1"].input is None and cases["c0"].input is not None


def test_a_writer_that_dies_of_a_bug_fails_the_run_instead_of_leaving_cases_waiting(tmp_path, monkeypatch):
    """Cases waiting to start are woken when the writer thread ends on an unexpected error: the
    run fails (exit 3) instead of hanging on a writer that is gone."""
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "a.py").write_text(
        "from evalcore.discovery import TargetSpec\nt = TargetSpec(id='t', target=lambda x: x)\n"
    )
    cases = tmp_path / "c.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{i}", "input": i, "split": "dev"}) + "\n" for i in range(20)))

    segments = DjangoEvalStore._segments

    def bug(self, items):  # on the first batch of cases (their starts or their results)
        if any(kind in ("start", "result") for kind, _ in items):
            raise RuntimeError("a bug in the writer loop")
        return segments(self, items)

    monkeypatch.setattr(DjangoEvalStore, "_segments", bug)
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            call_command("eval", str(folder), "--set", str(cases), "--quiet", "--scorer", "exact_match")
        except BaseException as exc:  # noqa: BLE001 - the outcome is the assertion
            outcome["error"] = exc
        finally:
            connection.close()

    runner = threading.Thread(target=run)
    runner.start()
    runner.join(timeout=120)  # generous: it ends at once unless it hangs
    assert not runner.is_alive()
    assert isinstance(outcome["error"], CommandError) and outcome["error"].returncode == 3
    assert "a bug in the writer loop" in str(outcome["error"])
    assert EvalRun.objects.get().status == EvalRunStatus.FAILED
