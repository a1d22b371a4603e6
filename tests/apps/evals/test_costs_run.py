"""Cost and latency of a real run (issue 27): an Agent target and the LLM judge against the local
stand-in endpoint reporting ``usage``, priced from the price table; the cost and latency gates;
``evalsite reprice``."""

from __future__ import annotations

import json
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.evals.models import CaseCost, EvalRun, ModelPrice
from apps.evals.queries.costs import cost_latency
from apps.evals.results.cost_figures import aggregate_cost_latency
from tests.support.stand_in_llm import StandInLLM, completion_body

pytestmark = pytest.mark.django_db(transaction=True)

GOOD = {
    axis: {"score": 4, "reason": "fine"}
    for axis in ("accuracy", "completeness", "grounding", "hazard_avoidance", "calibration")
}

AGENTS = textwrap.dedent(
    """
    import os
    from evalcore.discovery import TargetSpec
    from evalcore.runtime.agent import Agent
    from evalcore.runtime.openai_client import OpenAIChatModel

    def agent(model):
        return Agent(OpenAIChatModel(model, base_url=os.environ["STAND_IN_URL"], max_retries=0), name="capitals")

    spec = TargetSpec(
        id="capitals",
        variants={"small": agent("tgt-small"), "big": agent("tgt-big"), "mystery": agent("tgt-unpriced")},
        scorers=["exact_match"],
    )
    """
)


def responder(body: dict) -> dict:
    """The judge (model ``judge-m``) grades 4/5 on every axis; a target answers PARIS with 100
    prompt tokens (50 of them cached) and 10 completion tokens, under the model name it was asked."""
    if body["model"] == "judge-m":
        return completion_body(json.dumps(GOOD), usage=(40, 20), model="judge-m")
    reply = completion_body("PARIS", usage=(100, 10), model=body["model"])
    reply["usage"]["prompt_tokens_details"] = {"cached_tokens": 50}
    return reply


def price(model: str, per_m: str, version: int = 1) -> None:
    value = Decimal(per_m)
    ModelPrice.objects.create(
        model=model,
        version=version,
        input_usd_per_m=value,
        output_usd_per_m=2 * value,
        cached_input_usd_per_m=value / 2,
        reasoning_usd_per_m=2 * value,
    )


@pytest.fixture
def suite(tmp_path: Path, monkeypatch):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "capitals.py").write_text(AGENTS)
    rows = [{"id": f"c{i}", "input": "capital of France?", "expected": "PARIS", "split": "dev"} for i in range(10)]
    path = tmp_path / "capitals.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    price("tgt-small", "1")  # 50·1 + 50·0.5 + 10·2 = 95 µ$ per case
    price("tgt-big", "2")  # 190 µ$
    price("judge-m", "10")  # 40·10 + 20·20 = 800 µ$
    with StandInLLM(responder=responder) as llm:
        monkeypatch.setenv("STAND_IN_URL", llm.base_url)

        def run(variant: str, *args: str) -> int:
            try:
                call_command(
                    "eval",
                    str(folder),
                    "--set",
                    str(path),
                    "--variant",
                    variant,
                    "--quiet",
                    "--judge",
                    "--judge-model",
                    "judge-m",
                    "--judge-base-url",
                    llm.base_url,
                    "--no-judge-cache",
                    *args,
                )
            except SystemExit as exc:
                return int(exc.code or 0)
            return 0

        yield run


def test_cost_per_case_for_target_and_judge_from_the_price_table_and_the_gates(suite, capsys, tmp_path):
    report = tmp_path / "report.json"
    gates = ["--gate", "cost_per_case<=0.002", "--gate", "p95_latency_ms<=600000"]
    assert suite("small", *gates, "--json", str(report)) == 0
    block = json.loads(report.read_text())["cost_latency"]
    assert block["cost_per_case_usd"][0] == pytest.approx(895e-6) and block["n_priced"] == 10
    small = EvalRun.objects.get(variant="small")
    figures = cost_latency([small.id])[small.id]
    assert (figures.n_cases, figures.n_priced, figures.n_judge_priced) == (10, 10, 10)
    assert figures.cost_target_usd.value == pytest.approx(95e-6)
    assert figures.cost_judge_usd.value == pytest.approx(800e-6)
    assert figures.cost_per_case_usd.value == pytest.approx(895e-6)
    assert not figures.tokens_estimated  # the endpoint reported usage
    assert figures.latency_p50_ms.value > 0 and figures.model_p50_ms.value > 0
    assert small.summary["prices"]["table"]["tgt-small"]["version"] == 1
    # the figures are stored on the run when it is costed: a page reads them in one query
    assert small.summary["cost_latency"]["n_priced"] == 10
    assert aggregate_cost_latency([small.id])[small.id] == figures
    out = capsys.readouterr().out
    assert "cost per case $0.000895" in out and "judge $0.0008" in out and "tokens as the endpoint reported" in out

    # a run dearer than a limit fails its gate, and says by how much
    assert suite("small", "--gate", "cost_per_case<=0.0005") == 1
    assert "gate cost_per_case<=0.0005: FAIL (actual 0.000895" in capsys.readouterr().out
    assert suite("small", "--gate", "p95_latency_ms<=0") == 1

    # paired against the baseline: the big model doubles the target's part (+95 µ$ of 895: +10.6%)
    assert suite("big", "--baseline", small.id, "--gate", "delta:cost<=+10%") == 1
    assert "gate delta:cost<=+10%: FAIL (actual 0.1061" in capsys.readouterr().out
    assert suite("big", "--baseline", small.id, "--gate", "delta:cost<=+11%") == 0

    # an unknown model is unpriced, never $0: the gate holds on no figure at all, so it fails
    assert suite("mystery", "--gate", "cost_per_case<=1") == 1
    out = capsys.readouterr().out
    assert "actual absent, on n=0/10 cases: 10 not covered" in out
    mystery = EvalRun.objects.get(variant="mystery")
    assert CaseCost.objects.filter(eval_run=mystery, target_usd__isnull=True).count() == 10
    assert cost_latency([mystery.id])[mystery.id].cost_judge_usd.value == pytest.approx(800e-6)


def test_the_run_page_shows_cost_and_latency_lines(suite, client, viewer):
    assert suite("small") == 0
    run = EvalRun.objects.get()
    client.force_login(viewer)
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "cost per case $0.000895" in page and "target $0.0000950" in page and "judge $0.0008" in page
    assert "latency p50 " in page and "95% order-statistic intervals" in page


def test_a_price_change_leaves_old_runs_alone_until_repriced(suite, capsys):
    assert suite("small") == 0
    run = EvalRun.objects.get()
    price("tgt-small", "3", version=2)  # three times dearer from now on
    assert cost_latency([run.id])[run.id].cost_target_usd.value == pytest.approx(95e-6)
    call_command("reprice", run.id)
    out = capsys.readouterr().out
    assert "tgt-small: v1 → v2" in out
    assert "$0.00895 → $0.01085" in out  # the run's total over its 10 priced cases
    assert cost_latency([run.id])[run.id].cost_target_usd.value == pytest.approx(285e-6)
    run.refresh_from_db()
    assert run.summary["prices"]["table"]["tgt-small"]["version"] == 2
