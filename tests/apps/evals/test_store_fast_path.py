"""The result writer below the ORM (apps.evals.results.batches, apps.core.bulk): what it writes is what
the model fields would write (redacted), writes are idempotent, and its queue is bounded."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from django.db import connection
from django.utils import timezone

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, EvalSet
from apps.evals.results.batches import BatchWriter
from apps.evals.results.executor import executor_fields, this_executor
from apps.evals.results.writer import _QUEUE_ITEMS, DjangoEvalStore
from apps.traces.models import Run
from evalcore import Case, run_eval
from evalcore.redact import REDACTED
from evalcore.tracing import TraceEvent
from evalcore.types import CaseResult, RunRecord, Score

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk-fastpath-0123456789abcdef"


def start(name: str = "s") -> str:
    eval_set = EvalSet.objects.create(name=name)
    return EvalRun.objects.create(
        eval_set=eval_set, target_id="t", status=EvalRunStatus.RUNNING, started=timezone.now(), **executor_fields()
    ).id


def raw(sql: str, params: list[object]) -> list[tuple[object, ...]]:
    """Rows as stored (no field conversion on the way out)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def test_the_fast_path_redacts_scores_and_metadata_and_keeps_the_output_as_produced(monkeypatch):
    monkeypatch.setenv("FASTPATH_TEST_API_KEY", SECRET)
    eval_run_id = start()

    def leaky(x):
        return {"answer": f"my key is {SECRET}", f"key-{SECRET}": [SECRET], "url": "https://bob:hunter2pw@h/x"}

    def echo_scorer(output, expected):
        return Score("echo", value=False, explanation=f"saw {SECRET}")

    store = DjangoEvalStore(target_id="t", eval_run_id=eval_run_id, executor=this_executor())
    with store:
        asyncio.run(run_eval([Case("c1", SECRET, "x")], leaky, [echo_scorer], sink=store, eval_run_id=eval_run_id))
    run = Run.objects.get()
    stored = raw("SELECT final_answer, metadata, step_metrics FROM traces_run WHERE id = %s", [run.pk])
    events = raw("SELECT name, payload, preview FROM traces_event WHERE run_id = %s", [run.pk])
    results = raw("SELECT scores FROM evals_evalresult WHERE eval_run_id = %s", [eval_run_id])
    assert events and results
    # the output is stored as the target produced it (rs3-17): scorers and rescore read it
    assert json.loads(stored[0][0]) == leaky(None)
    everything = json.dumps([stored[0][1:], results], default=str)
    assert SECRET not in everything
    assert "hunter2pw" not in everything
    assert REDACTED in json.loads(results[0][0])[0]["explanation"]


def result(eval_run_id: str, case_id: str) -> CaseResult:
    run_id = f"{eval_run_id}:{case_id}"
    record = RunRecord(
        case_id=case_id,
        run_id=run_id,
        trace_id=run_id,
        output=1,
        started_at=timezone.now().timestamp(),
        elapsed_ms=1.0,
        metadata={"eval_run_id": eval_run_id},
    )
    return CaseResult(case=Case(case_id, 1, 1), run=record, scores=[Score("exact_match", value=True)])


def test_writing_the_same_results_again_stores_each_once_and_counts_right():
    eval_run_id = start()
    batch = [result(eval_run_id, f"c{i}") for i in range(5)]
    BatchWriter(target_id="t", eval_run_id=eval_run_id, rescore=False).write([], batch)
    # a second writer (another process, a re-delivered shard) writes some of them again
    BatchWriter(target_id="t", eval_run_id=eval_run_id, rescore=False).write(
        [], [*batch[:3], result(eval_run_id, "c9")]
    )
    assert EvalResult.objects.filter(eval_run_id=eval_run_id).count() == 6
    assert Run.objects.count() == 6
    eval_run = EvalRun.objects.get(pk=eval_run_id)
    assert (eval_run.n_done, eval_run.n_passed) == (6, 6)
    # every result points at its own run row
    assert sorted(EvalResult.objects.values_list("run__run_id", flat=True)) == sorted(
        f"{eval_run_id}:{c}" for c in ["c0", "c1", "c2", "c3", "c4", "c9"]
    )


def test_events_of_a_run_written_before_its_result_complete_one_row():
    eval_run_id = start()
    writer = BatchWriter(target_id="t", eval_run_id=eval_run_id, rescore=False)

    rid = f"{eval_run_id}:c0"
    begin = TraceEvent(trace_id=rid, run_id=rid, seq=0, ts=1.0, type="span_begin", name="n", payload={"span_id": "s"})
    writer.write([begin], [])
    assert Run.objects.get().status == "running"
    writer.write([], [result(eval_run_id, "c0")])
    run = Run.objects.get()
    assert run.status == "ok" and run.events.count() == 1


def test_the_writer_queue_is_bounded_and_the_engine_waits_for_it(monkeypatch):
    """A stalled writer holds the producer at the queue's bound (memory stays bounded), and
    everything is written once it moves again."""
    eval_run_id = start()
    release = threading.Event()
    original = BatchWriter.write

    def stalled(self, events, results):  # type: ignore[no-untyped-def]
        release.wait(60)
        return original(self, events, results)

    monkeypatch.setattr(BatchWriter, "write", stalled)
    store = DjangoEvalStore(target_id="t", eval_run_id=eval_run_id)
    total = _QUEUE_ITEMS * 3
    produced = 0

    def produce() -> None:
        nonlocal produced
        for i in range(total):
            store.on_result(result(eval_run_id, f"c{i}"))
            produced += 1

    producer = threading.Thread(target=produce)
    producer.start()
    # the producer stops at the bound: it has handed over at most the queue plus one batch
    producer.join(timeout=2)
    assert producer.is_alive()
    assert store._queue.qsize() <= _QUEUE_ITEMS
    assert produced < total
    release.set()
    producer.join(timeout=120)
    assert not producer.is_alive()
    store.close()
    assert EvalResult.objects.filter(eval_run_id=eval_run_id).count() == total


def test_a_store_writing_results_stored_already_keeps_each_once_and_the_rest_of_its_batch():
    """A second writer of the same results (a re-delivered shard): on PostgreSQL its optimistic
    COPY clashes, the batch is rolled back and written again skipping what is stored; on SQLite
    the clash is skipped in place. Either way the new case of the batch is stored, with its
    events, and the counters equal the rows."""
    eval_run_id = start()
    rid = f"{eval_run_id}:c0"
    event = TraceEvent(trace_id=rid, run_id=rid, seq=0, ts=1.0, type="span_begin", name="n", payload={"span_id": "s"})
    with DjangoEvalStore(target_id="t", eval_run_id=eval_run_id) as first:
        first.on_event(event)
        first.on_result(result(eval_run_id, "c0"))
    with DjangoEvalStore(target_id="t", eval_run_id=eval_run_id) as again:
        again.on_event(event)
        for case_id in ("c0", "c1"):
            again.on_result(result(eval_run_id, case_id))
    assert sorted(EvalResult.objects.filter(eval_run_id=eval_run_id).values_list("case_id", flat=True)) == ["c0", "c1"]
    assert Run.objects.count() == 2 and Run.objects.get(run_id=rid).events.count() == 1
    eval_run = EvalRun.objects.get(pk=eval_run_id)
    assert (eval_run.n_done, eval_run.n_passed) == (2, 2)


def test_a_slow_targets_wave_commits_its_starts_first_and_its_results_right_after():
    """While the target is slow, a batch is two commits: the case starts (their in-flight marks,
    the finished cases already out of them), then the results and events, so the wave's next
    calls wait only for their marks; the batch wait follows the target (a fifth of its mean
    call). With a fast target a batch is one commit, in order."""
    eval_run_id = start()
    store = DjangoEvalStore(target_id="t", eval_run_id=eval_run_id)
    fast, slow = result(eval_run_id, "c0"), result(eval_run_id, "c1")
    fast.run.elapsed_ms, slow.run.elapsed_ms = 0.01, 50.0
    loop = asyncio.new_event_loop()
    try:
        starts = [("start", (f"{eval_run_id}:s{i}", loop, loop.create_future())) for i in range(3)]
        assert store._segments([("result", fast), *starts]) == [[("result", fast), *starts]]
        assert store._queue.wait_s == store.batch_wait_s
        store._in_flight = {slow.run.run_id}  # c1 was running; it has just returned
        items = [("result", slow), *starts]
        store._finishing = {slow.run.run_id}
        segments = store._segments(items)
        assert segments == [starts, [("result", slow)]]
        assert 0.001 <= store._queue.wait_s < store.batch_wait_s
        store._commit_segment(segments[0], False, None)
        first = EvalRun.objects.get(pk=eval_run_id)
        assert first.in_flight == sorted(rid for _, (rid, _, _) in starts)  # c1 is out of them
        assert not EvalResult.objects.filter(eval_run_id=eval_run_id).exists()
        loop.run_until_complete(asyncio.wait_for(asyncio.gather(*(f for _, (_, _, f) in starts)), 10))
        store._commit_segment(segments[1], False, None)
        assert list(EvalResult.objects.filter(eval_run_id=eval_run_id).values_list("case_id", flat=True)) == ["c1"]
        assert EvalRun.objects.get(pk=eval_run_id).in_flight == first.in_flight
        for _ in range(40):  # the target got fast again
            store._segments([("result", fast)])
        assert len(store._segments(starts)) == 1 and store._queue.wait_s == store.batch_wait_s
    finally:
        loop.close()
