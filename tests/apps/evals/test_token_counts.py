"""A target that reports an unusable token count (text, a list, a fraction, NaN, an infinity, a
negative or enormous number, a model name that is not text) errors its own case, naming the
field; the run goes on and every other case is stored. Before, 10**20 tokens stopped the result
writer (SQLite INTEGER overflow: half a 2,000-case run lost, and its resume failed the same way)
and "12" or inf crashed the report with a traceback. A chat span's unusable count is left out of
the run's sums instead of stopping the writer."""

from __future__ import annotations

import asyncio

import pytest
from django.utils import timezone

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, EvalSet
from apps.evals.results.writer import DjangoEvalStore
from apps.traces.models import Run
from evalcore import Case, run_eval
from evalcore.types import TargetOutput

pytestmark = pytest.mark.django_db(transaction=True)

BAD = {
    "huge": {"tokens_in": 10**20},
    "past-int64": {"tokens_out": 2**63},
    "negative": {"tokens_in": -(10**30)},
    "text": {"tokens_in": "12"},
    "list": {"tokens_in": [1]},
    "inf": {"tokens_in": float("inf")},
    "nan": {"tokens_out": float("nan")},
    "fraction": {"tokens_in": 1.5},
    "bool": {"tokens_in": True},
    "model": {"model": 5},
}


def test_unusable_token_counts_error_their_case_and_every_other_case_is_stored():
    eval_set = EvalSet.objects.create(name="tokens")
    run = EvalRun.objects.create(eval_set=eval_set, target_id="t", status=EvalRunStatus.RUNNING, started=timezone.now())
    cases = [Case(name, name, "ok") for name in BAD] + [Case(f"good{i}", f"good{i}", "ok") for i in range(5)]

    def target(x):
        fields = {"model": "gpt-4o-mini", "tokens_in": 10, "tokens_out": 5, **BAD.get(x, {})}
        if x == "good0":
            fields["tokens_in"] = 7.0  # a whole float is a count
        return TargetOutput("ok", **fields)

    store = DjangoEvalStore(target_id="t", eval_run_id=run.id)
    with store:
        report = asyncio.run(run_eval(cases, target, ["exact_match"], sink=store, eval_run_id=run.id))
    stored = {r.case_id: r.status for r in EvalResult.objects.filter(eval_run=run)}
    assert len(stored) == len(cases)
    assert {name for name, status in stored.items() if status == "errored"} == set(BAD)
    assert all(stored[f"good{i}"] == "passed" for i in range(5))
    errors = {
        r.run_id.split(":", 1)[1]: (r.error or {}).get("message", "") for r in Run.objects.filter(error__isnull=False)
    }
    assert "tokens_in must be a whole number of tokens" in errors["huge"]
    assert "tokens_out must be a whole number of tokens" in errors["past-int64"]
    assert "model must be text" in errors["model"]
    assert Run.objects.get(run_id=f"{run.id}:good0").tokens_in == 7
    assert report.tokens_in == 7 + 4 * 10


def test_a_chat_span_with_an_unusable_count_is_left_out_of_the_sums():
    eval_set = EvalSet.objects.create(name="spans")
    run = EvalRun.objects.create(eval_set=eval_set, target_id="t", status=EvalRunStatus.RUNNING, started=timezone.now())

    async def target(x, ctx):
        for tokens in ("abc", 10**20, 3):
            with ctx.tracer.span("chat", "model") as span:
                span.set(tokens_in=tokens, tokens_out=1)
        return "ok"

    store = DjangoEvalStore(target_id="t", eval_run_id=run.id)
    with store:
        asyncio.run(run_eval([Case("c", "q", "ok")], target, ["exact_match"], sink=store, eval_run_id=run.id))
    assert EvalResult.objects.get(eval_run=run).status == "passed"
    assert Run.objects.get(run_id=f"{run.id}:c").tokens_in == 3
