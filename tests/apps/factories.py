"""Small factories for the pages' tests: sets with cases, eval runs with results and traces."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from apps.traces.models import Event, Run

_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def make_eval_set(name: str = "qa", n_cases: int = 10, *, splits: Sequence[str] = ("train", "dev", "test")) -> EvalSet:
    """A set with ``n_cases`` cases ``c0..c{n-1}``; splits cycle through ``splits``; tag ``even``/``odd``."""
    eval_set = EvalSet.objects.create(name=name, content_hash="h-" + name)
    EvalCase.objects.bulk_create(
        EvalCase(
            eval_set=eval_set,
            case_id=f"c{i}",
            input={"question": f"what is {i} + {i}?"},
            expected=str(2 * i),
            tags=["even" if i % 2 == 0 else "odd"],
            split=splits[i % len(splits)],
            position=i,
        )
        for i in range(n_cases)
    )
    return eval_set


def make_eval_run(
    eval_set: EvalSet,
    outcomes: Sequence[str | bool],
    *,
    target_id: str = "echo",
    variant: str = "v1",
    split: str = "all",
    status: str = "finished",
    started: datetime | None = None,
    case_ids: Sequence[str] | None = None,
    scores: Sequence[float | None] | None = None,
    outputs: Sequence[Any] | None = None,
    summary: dict[str, Any] | None = None,
    splits: Sequence[str] | None = None,
) -> EvalRun:
    """An eval run with one result per outcome (``passed``/``failed``/``errored``/``unscored`` or a bool).

    Each result gets a ``traces.Run`` row and an ``exact_match`` score (value = the verdict, or
    ``scores[i]`` as a number under ``similarity``); errored results have no scores, unscored
    ones only the ``similarity`` measurement when given.
    """
    case_ids = list(case_ids or [f"c{i}" for i in range(len(outcomes))])
    statuses = [("passed" if o else "failed") if isinstance(o, bool) else o for o in outcomes]
    started = started or _T0
    eval_run = EvalRun.objects.create(
        eval_set=eval_set,
        target_id=target_id,
        variant=variant,
        split=split,
        model="m-1",
        git_sha="abc1234def",
        status=status,
        started=started,
        finished=started + timedelta(seconds=5),
        n_total=len(statuses),
        n_done=len(statuses),
        n_passed=statuses.count("passed"),
        n_failed=statuses.count("failed"),
        n_errored=statuses.count("errored"),
        n_unscored=statuses.count("unscored"),
        summary=summary or {},
    )
    runs = Run.objects.bulk_create(
        Run(
            run_id=f"{eval_run.id}:{cid}",
            trace_id=f"{eval_run.id}:{cid}",
            target_id=target_id,
            started=started,
            elapsed_ms=12.5,
            status="error" if st == "errored" else "ok",
            final_answer=(outputs[i] if outputs else f"answer {cid}") if st != "errored" else None,
            error={"type": "ValueError", "message": "boom"} if st == "errored" else None,
            tokens_in=10,
            tokens_out=5,
        )
        for i, (cid, st) in enumerate(zip(case_ids, statuses, strict=True))
    )
    results = []
    for i, (cid, st, run) in enumerate(zip(case_ids, statuses, runs, strict=True)):
        row_scores: list[dict[str, Any]] = []
        if st not in ("errored", "unscored"):
            row_scores.append(
                {
                    "name": "exact_match",
                    "value": st == "passed",
                    "passed": st == "passed",
                    "explanation": "compared",
                    "error": None,
                    "metadata": {},
                }
            )
        if st != "errored" and scores is not None and scores[i] is not None:
            row_scores.append(
                {
                    "name": "similarity",
                    "value": scores[i],
                    "passed": None,
                    "explanation": None,
                    "error": None,
                    "metadata": {},
                }
            )
        numeric = [float(s["value"]) for s in row_scores]
        results.append(
            EvalResult(
                eval_run=eval_run,
                case_id=cid,
                split=(splits[i] if splits else ""),
                run=run,
                scores=row_scores,
                passed=st == "passed",
                status=st,
                score=sum(numeric) / len(numeric) if numeric else None,
            )
        )
    EvalResult.objects.bulk_create(results)
    return eval_run


def add_trace(run: Run) -> None:
    """Give a run a small trace: agent span > chat span + tool span, and a message."""
    t = run.started
    rows = [
        ("span_begin", "agent", {"span_id": "s1", "parent_span_id": None, "kind": "invoke_agent"}),
        ("span_begin", "gpt-x", {"span_id": "s2", "parent_span_id": "s1", "kind": "chat"}),
        (
            "span_end",
            "gpt-x",
            {
                "span_id": "s2",
                "parent_span_id": "s1",
                "kind": "chat",
                "elapsed_ms": 40.0,
                "tokens_in": 100,
                "tokens_out": 20,
                "status": "ok",
            },
        ),
        (
            "span_begin",
            "search",
            {"span_id": "s3", "parent_span_id": "s1", "kind": "execute_tool", "arguments": {"query": "paris"}},
        ),
        ("message", "log", {"parent_span_id": "s3", "text": "looking up"}),
        (
            "span_end",
            "search",
            {
                "span_id": "s3",
                "parent_span_id": "s1",
                "kind": "execute_tool",
                "elapsed_ms": 5.0,
                "status": "ok",
                "result": "Paris is the capital",
            },
        ),
        (
            "span_end",
            "agent",
            {"span_id": "s1", "parent_span_id": None, "kind": "invoke_agent", "elapsed_ms": 50.0, "status": "ok"},
        ),
    ]
    Event.objects.bulk_create(
        Event(
            run=run,
            trace_id=run.trace_id,
            seq=i,
            ts=t + timedelta(milliseconds=i),
            type=ty,
            name=name,
            payload=payload,
            preview=str(payload)[:300],
        )
        for i, (ty, name, payload) in enumerate(rows)
    )
