"""A run always ends and keeps every case: scorers off the loop and bounded, any exception
contained, any output stored faithfully or refused by name, report files always well-formed."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import json
import threading
import time
from decimal import Decimal
from pathlib import Path, PurePosixPath
from xml.etree import ElementTree as ET

import numpy as np
import pydantic
import pytest

from evalcore import Case, InMemoryEvalStore, Score, TargetOutput, run_eval
from evalcore.discovery import discover_targets
from evalcore.inference import run_case
from evalcore.jsonvalue import NotJSONError, to_json
from evalcore.loaders import CaseBankError, load_cases
from evalcore.report import ReportBuilder
from evalcore.report_files import write_json_report, write_junit
from evalcore.runner import rescore
from evalcore.scorers.base import ScoreContext, Scorer
from evalcore.targets import resolve_target
from evalcore.types import CaseResult, RunRecord

REPROS = Path(__file__).resolve().parents[1] / "fixtures" / "repros"


def cases(n: int) -> list[Case]:
    return [Case(f"c{i}", f"c{i}", f"c{i}", split="dev") for i in range(n)]


def load_jsonl(path: Path) -> list[Case]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [Case(r["id"], r["input"], r.get("expected"), split=r.get("split")) for r in rows]


# -- ho-02: sync scorers off the loop, every scorer call bounded -----------------------------


async def test_sync_predicates_run_concurrently_off_the_event_loop():
    # Eight sync checks that each wait for all eight to be running at once: on the event loop
    # (one at a time) the barrier would break; off the loop they meet and all pass.
    barrier = threading.Barrier(8, timeout=60)

    def together(output, expected):
        barrier.wait()
        return output == expected

    report = await run_eval(cases(8), lambda q: q, [together], concurrency=8)
    assert (report.n, report.passed, report.errored) == (8, 8, 0)


async def test_a_scorer_with_a_plain_def_score_runs_off_the_loop_too():
    barrier = threading.Barrier(4, timeout=60)

    @dataclasses.dataclass
    class Blocking(Scorer):
        name = "blocking"

        def score(self, ctx: ScoreContext) -> Score:  # type: ignore[override]  # a plain def is allowed
            barrier.wait()
            return Score(self.name, True, passed=True)

    report = await run_eval(cases(4), lambda q: q, [Blocking()], concurrency=4)
    assert (report.passed, report.errored) == (4, 0)


async def test_a_stuck_sync_scorer_times_out_as_an_error_and_the_run_goes_on():
    release = threading.Event()

    def stuck_on_c1(output, expected):
        if output == "c1":
            release.wait(120)  # e.g. exec() of a completion with an infinite loop
        return True

    store = InMemoryEvalStore()
    try:
        # c0 and c2 must score within the timeout: generous, so a busy machine cannot fail them
        report = await run_eval(cases(3), lambda q: q, [stuck_on_c1], sink=store, eval_run_id="r", scorer_timeout_s=3)
    finally:
        release.set()
    assert (report.n, report.passed, report.errored) == (3, 2, 1)
    (score,) = store.results["r"]["c1"].scores
    assert score.error == "Timeout: scorer 'stuck_on_c1' exceeded the 3 s scorer timeout"


async def test_a_hung_async_scorer_such_as_a_judge_is_bounded_too():
    @dataclasses.dataclass
    class HungJudge(Scorer):
        name = "judge"

        @property
        def score_names(self) -> list[str]:
            return ["judge.correct", "judge.relevant"]

        async def score(self, ctx: ScoreContext) -> list[Score]:
            await asyncio.Event().wait()  # a model endpoint that never answers
            return []

    store = InMemoryEvalStore()
    report = await run_eval(cases(2), lambda q: q, [HungJudge()], sink=store, eval_run_id="r", scorer_timeout_s=0.2)
    assert report.errored == 2
    errors = [s.error for s in store.results["r"]["c0"].scores]
    assert len(errors) == 2 and all("scorer timeout" in e for e in errors)  # each of its scores shows it


async def test_a_scorer_raising_timeout_error_itself_is_not_called_a_scorer_timeout():
    def raises_timeout(output, expected):
        raise TimeoutError("upstream API timed out")

    store = InMemoryEvalStore()
    await run_eval(cases(1), lambda q: q, [raises_timeout], sink=store, eval_run_id="r", scorer_timeout_s=60)
    (score,) = store.results["r"]["c0"].scores
    assert score.error == "TimeoutError: upstream API timed out"


async def test_rescore_bounds_scorers_with_the_same_timeout():
    def stuck(output, expected):
        threading.Event().wait(120)

    run = RunRecord(case_id="c0", run_id="x:c0", trace_id="x:c0", output="c0")
    report = await rescore([(cases(1)[0], run)], [stuck], scorer_timeout_s=0.2)
    assert (report.n, report.errored) == (1, 1)


async def test_ho02_repro_targets_sync_and_stuck_predicates():
    targets = discover_targets(REPROS / "ho-02-sync-scorer-blocks-loop").targets
    bank = load_jsonl(REPROS / "ho-02-sync-scorer-blocks-loop" / "cases.jsonl")
    sync = targets["sync-pred"]
    report = await run_eval(bank, sync.target, sync.scorers, concurrency=8)
    assert (report.n, report.passed) == (8, 8)
    stuck = targets["stuck-pred"]
    report = await run_eval(bank, stuck.target, stuck.scorers, concurrency=8, scorer_timeout_s=0.3)
    assert (report.n, report.errored) == (8, 8)  # ended, every case errored with the timeout


# -- rs-04: whatever a target or a scorer raises, that case is errored ------------------------


@pytest.mark.parametrize(
    ("target_id", "error_type", "message"),
    [
        ("cancel", "CancelledError", "raised CancelledError itself"),
        ("araise-base", "MyBase", "async BaseException subclass"),
        ("asys-exit", "SystemExit", "sys.exit(3)"),
        ("raise-base", "RuntimeError", "MyBase"),
    ],
)
async def test_rs04_hostile_targets_error_their_cases_and_none_is_dropped(target_id, error_type, message):
    spec = discover_targets(REPROS / "rs-00-agents").targets[target_id]
    bank = load_jsonl(REPROS / "rs-04-hostile50.jsonl")
    store = InMemoryEvalStore()
    report = await run_eval(bank, spec.target, spec.scorers, sink=store, eval_run_id="r", concurrency=8)
    assert (report.n, report.passed, report.errored) == (50, 45, 5)  # n = cases selected x repeats
    errored = {cid: r for cid, r in store.results["r"].items() if r.run.error is not None}
    assert sorted(errored) == ["h07", "h17", "h27", "h37", "h47"]
    error = errored["h07"].run.error
    assert error.type == error_type and message in error.message


@pytest.mark.parametrize(
    ("mode", "text"),
    [("base", "ScorerBase"), ("exit", "sys.exit(5)"), ("kbint", "KeyboardInterrupt itself (not a Ctrl-C)")],
)
async def test_rs04_hostile_scorer_errors_its_scores_and_the_run_goes_on(mode, text):
    from evalcore.scorer_registry import scorer_from_spec

    discover_targets(REPROS / "rs-00-agents")  # registers bad_scorer
    bank = load_jsonl(REPROS / "rs-04-hostile50.jsonl")
    store = InMemoryEvalStore()
    scorer = scorer_from_spec(f"bad_scorer:mode={mode}")
    report = await run_eval(bank, lambda q: q, [scorer], sink=store, eval_run_id="r", repeat=2)
    assert (report.n, report.passed, report.errored) == (100, 90, 10)
    (score,) = store.results["r"]["h17#1"].scores  # the second repeat too
    assert text in score.error


async def test_a_target_raising_keyboard_interrupt_itself_is_that_cases_error():
    async def kbint(q):
        if q == "c1":
            raise KeyboardInterrupt("raised by the target, no key was pressed")
        return q

    store = InMemoryEvalStore()
    report = await run_eval(cases(3), kbint, ["exact_match"], sink=store, eval_run_id="r")
    assert (report.n, report.passed, report.errored) == (3, 2, 1)
    error = store.results["r"]["c1"].run.error
    assert error.type == "KeyboardInterrupt" and "not a Ctrl-C" in error.message


async def test_our_own_cancellation_still_cancels():
    started = asyncio.Event()

    async def slow(q):
        started.set()
        await asyncio.sleep(3600)

    task = asyncio.create_task(run_eval(cases(2), slow, ["exact_match"]))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_timeout_is_still_a_timeout_not_a_target_cancellation():
    async def hang(q):
        await asyncio.sleep(3600)

    record, _ = await run_case(cases(1)[0], resolve_target(hang), eval_run_id="r", timeout_s=0.1)
    assert record.error.type == "Timeout"


# -- ho-04: any output is stored faithfully, or the case says why not -------------------------


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Hit:
    doc: str
    score: float


class Answer(pydantic.BaseModel):
    text: str
    when: dt.date


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (np.array(["12", "51"]), ["12", "51"]),
        (np.array([[1, 2], [3, 4]]), [[1, 2], [3, 4]]),
        (np.int64(7), 7),
        (np.float32(0.5), 0.5),
        (np.bool_(True), True),
        ({"citations": np.array([12, 51]), "top": np.float64(0.25)}, {"citations": [12, 51], "top": 0.25}),
        (b"caf\xc3\xa9", "café"),
        (Decimal("2.50"), 2.5),
        (Decimal("12"), 12),
        (dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC), "2026-11-30T12:00:00+00:00"),
        (dt.date(2026, 1, 2), "2026-01-02"),
        ({3, 1, 2}, [1, 2, 3]),
        (frozenset({"b", 1}), ["b", 1]),  # not comparable: sorted by JSON text ('"b"' < '1')
        (Answer(text="hi", when=dt.date(2026, 1, 2)), {"text": "hi", "when": "2026-01-02"}),
        (Hit("d1", 0.5), {"doc": "d1", "score": 0.5}),
        (Colour.RED, "red"),
        (("a", ("b",)), ["a", ["b"]]),
        (PurePosixPath("/data/out.txt"), "/data/out.txt"),
        ({1: "one", None: "none", 2.5: "x"}, {"1": "one", "null": "none", "2.5": "x"}),  # keys as JSON writes them
    ],
)
async def test_target_outputs_are_stored_as_the_json_they_stand_for(value, stored):
    store = InMemoryEvalStore()
    report = await run_eval([Case("c", "q", None)], lambda q: value, [], sink=store, eval_run_id="r")
    result = store.results["r"]["c"]
    assert result.run.error is None, result.run.error
    assert result.run.output == stored and report.n == 1
    json.dumps(result.run.output, allow_nan=False)  # plain JSON, nothing left to convert


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (object(), "target output of type object is not JSON"),
        ({"x": [1, object()]}, "object at ['x'][1]"),
        (b"\xff\xfe", "bytes that are not UTF-8"),
        (float("nan"), "non-finite"),
        ({"v": np.array([1.0, np.nan])}, "non-finite"),
        ((i for i in range(3)), "generator"),
        (threading.Lock(), "lock"),
    ],
)
async def test_outputs_with_no_json_form_error_that_case_by_name_and_the_others_run(value, named):
    def target(q):
        return value if q == "bad" else q

    store = InMemoryEvalStore()
    bank = [Case("a", "a", "a"), Case("bad", "bad", "bad"), Case("b", "b", "b")]
    report = await run_eval(bank, target, ["exact_match"], sink=store, eval_run_id="r")
    assert (report.n, report.passed, report.errored) == (3, 2, 1)
    error = store.results["r"]["bad"].run.error
    assert error.type == "UnusableOutputError" and named in error.message
    assert "str(" not in repr(store.results["r"]["bad"].run.output)  # never a silent string
    assert store.results["r"]["bad"].run.output is None


async def test_target_metadata_and_trace_payloads_are_converted_or_refused_by_name():
    def target(q, ctx):
        with ctx.tracer.span("tool", "search", args={"k": np.int64(3)}) as span:
            span.set(result=np.array([1, 2]))
        if q == "bad-meta":
            return TargetOutput(output=q, metadata={"handle": object()})
        if q == "bad-span":
            with ctx.tracer.span("tool", "leak", args={"sock": threading.Lock()}):
                pass
        return TargetOutput(output=q, metadata={"scores": np.array([0.5, 0.25]), "at": dt.date(2026, 1, 2)})

    store = InMemoryEvalStore()
    bank = [Case(x, x, x) for x in ("ok", "bad-meta", "bad-span")]
    report = await run_eval(bank, target, ["exact_match"], sink=store, eval_run_id="r")
    assert (report.n, report.passed, report.errored) == (3, 1, 2)
    ok = store.results["r"]["ok"]
    assert ok.run.metadata["scores"] == [0.5, 0.25] and ok.run.metadata["at"] == "2026-01-02"
    events = [e for e in store.events[ok.run.run_id] if e.name == "search"]
    assert events[0].payload["args"] == {"k": 3} and events[1].payload["result"] == [1, 2]
    meta_error = store.results["r"]["bad-meta"].run.error
    assert "target metadata is not JSON" in meta_error.message and "['handle']" in meta_error.message
    assert store.results["r"]["bad-meta"].run.metadata["eval_run_id"] == "r"
    span_error = store.results["r"]["bad-span"].run.error
    assert "trace event 'leak' payload['args']['sock']" in span_error.message


async def test_ho04_repro_numpy_targets_pass():
    targets = discover_targets(REPROS / "ho-04-numpy-output-stringified").targets
    bank = load_jsonl(REPROS / "ho-04-numpy-output-stringified" / "cases.jsonl")
    for target_id, output in (("np-cites", {"citations": ["12", "51"]}), ("np-list", [12, 51])):
        spec = targets[target_id]
        store = InMemoryEvalStore()
        report = await run_eval(bank, spec.target, spec.scorers, sink=store, eval_run_id="r")
        assert store.results["r"]["q1"].run.output == output
        assert (report.n, report.passed, report.errored) == (1, 1, 0), target_id


async def test_a_score_with_unstorable_metadata_is_that_scores_error():
    def scorer(ctx):
        return Score("odd", True, passed=True, metadata={"raw": object()})

    store = InMemoryEvalStore()
    await run_eval(cases(1), lambda q: q, [scorer], sink=store, eval_run_id="r")
    (score,) = store.results["r"]["c0"].scores
    assert score.value is None and "score 'odd' is not JSON" in score.error


def test_to_json_refuses_cycles_and_odd_keys_by_name():
    loop: list = []
    loop.append(loop)
    with pytest.raises(NotJSONError, match="reference cycle"):
        to_json(loop)
    with pytest.raises(NotJSONError, match="dict key"):
        to_json({(1, 2): "tuple key"})


# -- rs-11: report files are well-formed whatever the data holds ------------------------------

NASTY = "ctl\x0bid\x00x\x1b[31m\ud800é"


def test_rs11_report_files_parse_whatever_the_ids_and_outputs_hold(tmp_path):
    bank = [*load_jsonl(REPROS / "rs-11-control-chars.jsonl"), Case(NASTY, "a", "a", split="dev")]
    builder = ReportBuilder("r")
    rows = []
    for case in bank:
        run = RunRecord(case_id=case.id, run_id=f"r:{case.id}", trace_id="t", output=NASTY)
        errored = case.id == NASTY
        if errored:
            from evalcore.types import ErrorInfo

            run.error = ErrorInfo("Weird\x01Error", f"message with {NASTY}")
        builder.add(CaseResult(case, run, [] if errored else [Score("exact_match", False, False, NASTY)]))
        rows.append(
            {
                "case_id": case.id,
                "status": "errored" if errored else "failed",
                "split": "dev\x07",
                "elapsed_ms": 1.0,
                "scores": [] if errored else [{"name": "exact_match", "value": False, "explanation": NASTY}],
                "output": NASTY,
                "error": {"type": run.error.type, "message": run.error.message} if errored else None,
            }
        )
    report = builder.build(elapsed_s=0.1)
    write_junit(tmp_path / "t.xml", report, suite_name="set\x0c.target", cases=rows)
    write_json_report(tmp_path / "t.json", report, info={"set": NASTY}, cases=rows)

    root = ET.parse(tmp_path / "t.xml").getroot()  # well-formed
    names = [c.get("name") for c in root.iter("testcase")]
    assert names == ["ctl\\x0bid\\x00x", "ctl\\x0bid\\x00x\\x1b[31m\\ud800é"]  # visible, not dropped
    assert root.find(".//error").get("type") == "Weird\\x01Error"

    document = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))  # faithful
    assert [c["case_id"] for c in document["cases"]] == [bank[0].id, NASTY]
    assert document["cases"][1]["output"] == NASTY and document["eval_run"]["set"] == NASTY


# -- Ctrl-C: the first stops cleanly, also when the signal lands on a worker thread ------------


def test_a_ctrl_c_delivered_to_a_worker_thread_stops_the_run_at_once():
    import signal

    from evalcore.interrupts import two_stage_ctrl_c

    release = threading.Event()

    def target(q):
        if q == "stop":
            # the signal lands on this thread while the loop idles in select(): the loop must
            # still wake up and stop the run now, not when this call returns. (The pause only
            # lets the loop go idle, which is when a missing wake-up shows; with the wake-up
            # the outcome is the same whatever the timing.)
            time.sleep(0.3)
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            release.wait(60)
        return q

    bank = [Case(x, x, x) for x in ("a", "b", "stop", "c")]
    store = InMemoryEvalStore()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignored
    try:
        with two_stage_ctrl_c(), pytest.raises(KeyboardInterrupt):
            asyncio.run(run_eval(bank, target, ["exact_match"], sink=store, eval_run_id="r", concurrency=1))
    finally:
        release.set()
        signal.signal(signal.SIGINT, previous)
    assert sorted(store.results["r"]) == ["a", "b"]  # finished ones kept; in flight dropped; none after


@pytest.mark.parametrize(
    ("text", "suffix", "where"),
    [
        ('{"id": "a", "input": "x"}\n{"id": "b\\u0000", "input": "y"}\n', "jsonl", ":2: field 'id': holds a NUL"),
        ('{"id": "a", "input": "x", "metadata": {"k": ["ok", "n\\u0000"]}}\n', "jsonl", "at metadata.k[1]"),
        (
            '{"id": "a", "input": "x", "tags": ["t\\u0000"]}\n',
            "jsonl",
            "field 'tags': holds a NUL character (U+0000) at tags[0]",
        ),
        ('[{"id": "a", "input": {"q\\u0000": 1}}]', "json", "at input.'q\\x00' (a key)"),
        ("id,input\na,x\x00y\n", "csv", ":2:2: field 'input'"),
    ],
)
def test_a_loader_told_to_forbid_nul_names_the_line_field_and_path(tmp_path, text, suffix, where):
    """The database cannot store U+0000 (PostgreSQL): the import names where it is instead of failing
    in the database. Without ``forbid_nul`` the same file loads (SQLite keeps it)."""
    path = tmp_path / f"bank.{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CaseBankError) as caught:
        load_cases(path, forbid_nul="the database cannot store it")
    assert where in str(caught.value) and "the database cannot store it" in str(caught.value)
    assert load_cases(path).cases
