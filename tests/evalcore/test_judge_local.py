"""The rubric judge end to end on the bundled SmolLM2-135M (``evalsite[local]``), no network.

Unconstrained, this small model answers in prose: the judge must turn that into judge errors
(raw text kept), never a crash or a fake 0. With a JSON-schema response format, decoding is
constrained by a grammar and every answer parses.
"""

from __future__ import annotations

import pytest

from evalcore import Case, InMemoryEvalStore, run_eval
from evalcore.judge import RubricJudge

llama_cpp = pytest.importorskip("llama_cpp", reason="needs the evalsite[local] extra (CI installs it)")

CASES = [
    Case("paris", "What is the capital of France?", "Paris"),
    Case("sum", "What is 2 + 2?", "4"),
]


@pytest.fixture(scope="module")
def smollm2():
    from evalcore.runtime.local import LocalLlamaModel, smollm2_gguf_path

    smollm2_gguf_path()  # a clear error if the weights package is missing
    return LocalLlamaModel(n_ctx=2048)


async def judge_run(model, *, use_schema: bool) -> tuple[InMemoryEvalStore, object]:
    judge = RubricJudge(judge_model=model.name, model=model, use_schema=use_schema, retries=0, max_tokens=200)
    store = InMemoryEvalStore()
    answers = {"paris": "Paris is the capital of France.", "sum": "2 + 2 = 4"}
    report = await run_eval(
        CASES, lambda q, ctx: answers[ctx.case.id], [judge], sink=store, eval_run_id="r", concurrency=1
    )
    return store, report


async def test_unconstrained_prose_answers_become_judge_errors_not_crashes(smollm2):
    store, report = await judge_run(smollm2, use_schema=False)
    assert report.n == 2
    for result in store.results["r"].values():
        verdict = next(s for s in result.scores if s.name == "rubric_judge")
        if verdict.error is not None:
            assert verdict.value is None and verdict.metadata.get("raw") is not None
        else:
            assert isinstance(verdict.value, bool)
    metric = report.metrics["rubric_judge.accuracy"]
    assert metric.n + metric.errors == 2


async def test_schema_constrained_answers_always_parse(smollm2):
    store, report = await judge_run(smollm2, use_schema=True)
    metric = report.metrics["rubric_judge.accuracy"]
    assert (metric.n, metric.errors) == (2, 0)
    for result in store.results["r"].values():
        verdict = next(s for s in result.scores if s.name == "rubric_judge")
        assert isinstance(verdict.value, bool)
        axes = [s for s in result.scores if s.name.startswith("rubric_judge.")]
        assert len(axes) == 5 and all(0.0 <= s.value <= 1.0 for s in axes)
