"""The CLI summary names why cases errored: the 3 most common reasons with counts, one line each,
and where to see every error (it said "4 target error(s)" and "4 judge errors" and nothing more)."""

from __future__ import annotations

import json
import textwrap
from collections import Counter

import pytest
from django.core.management import call_command

from apps.evals.cli.error_reasons import ErrorReasons, one_line, reason_lines
from apps.evals.models import EvalRun
from evalcore.types import Case, CaseResult, ErrorInfo, RunRecord, Score
from tests.support.stand_in_llm import StandInLLM


def result(case_id: str, *, error: ErrorInfo | None = None, scores: list[Score] | None = None) -> CaseResult:
    run = RunRecord(case_id=case_id, run_id=f"r:{case_id}", trace_id=f"r:{case_id}", output="x", error=error)
    return CaseResult(case=Case(case_id, "q", "a"), run=run, scores=scores or [])


def test_one_line_keeps_the_first_line_squeezed_and_cut():
    assert one_line("\n  Traceback:  a\tb \nsecond line") == "Traceback: a b"
    assert one_line("") == "(no message)"
    long = one_line("x" * 300)
    assert len(long) == 100 and long.endswith("…")


def test_a_reason_never_shows_a_configured_secret_or_a_url_password(monkeypatch):
    """The reasons come from the results in memory, before the store redacts: they are redacted
    here, before the cut, so no part of a key or a URL password reaches the terminal."""
    monkeypatch.setenv("EVALSITE_MODEL_BASE_URL", "http://evalsite:hunter2hunter2@127.0.0.1:9/v1")
    reasons = ErrorReasons()
    message = "evalsite failed; pw hunter2hunter2 at /srv/evalsite see https://bob:s3cretpass@example.com/x"
    reasons.on_result(result("a", error=ErrorInfo("RuntimeError", message)))
    ((reason, n),) = reasons.target.items()
    assert n == 1 and "hunter2" not in reason and "s3cretpass" not in reason
    assert reason.startswith("RuntimeError: evalsite failed; pw [redacted] at /srv/evalsite see https://example.com/x")


def test_reasons_are_counted_per_case_and_per_scorer_most_common_first():
    reasons = ErrorReasons()
    for i in range(5):
        reasons.on_result(result(f"a{i}", error=ErrorInfo("ValueError", "no answer\nat line 3")))
    reasons.on_result(result("b", error=ErrorInfo("Timeout", "target exceeded the 60 s timeout")))
    # a scorer that fails gives every one of its scores the error: one reason for the case
    judge = [Score.failure(name, "model_error: 429") for name in ("rubric_judge", "rubric_judge.accuracy")]
    reasons.on_result(result("c", scores=[*judge, Score("exact_match", True)]))
    assert reasons.target == Counter({"ValueError: no answer": 5, "Timeout: target exceeded the 60 s timeout": 1})
    assert reasons.scorer == Counter({"rubric_judge: model_error: 429": 1})
    assert reason_lines(Counter({f"r{i}": i for i in range(1, 6)})) == [
        "  5 × r5",
        "  4 × r4",
        "  3 × r3",
        "  … and 2 other reason(s)",
    ]


AGENT = textwrap.dedent(
    """
    from evalcore.discovery import TargetSpec

    def answer(q):
        if q.startswith("boom"):
            raise RuntimeError(f"[{q}] backend refused the request")  # brackets: no rich markup
        if q == "key":
            raise KeyError("city")
        return q.upper()

    spec = TargetSpec(id="flaky", target=answer, scorers=["exact_match"])
    """
)


@pytest.mark.django_db(transaction=True)
def test_the_eval_summary_names_target_and_judge_error_reasons_and_where_to_see_them(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "a.py").write_text(AGENT)
    rows = [{"id": f"b{i}", "input": "boom", "expected": "BOOM"} for i in range(3)]
    rows += [{"id": "k", "input": "key", "expected": "KEY"}, {"id": "ok", "input": "paris", "expected": "PARIS"}]
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps({**r, "split": "dev"}) + "\n" for r in rows))
    monkeypatch.setenv("STAND_IN_KEY", "sk-stand-in")
    monkeypatch.setenv("EVALSITE_MODEL_API_KEY_ENV", "STAND_IN_KEY")
    with StandInLLM() as llm:  # an empty script: every judge call is refused (HTTP 400)
        call_command(
            "eval", str(folder), "--set", str(path), "--quiet", "--judge", "--judge-model", "stand-in-model",
            "--judge-base-url", llm.base_url, "--judge-retries", "0", "--no-judge-cache",
        )  # fmt: skip
    out = capsys.readouterr().out
    run_id = EvalRun.objects.get().id
    lines = out.splitlines()
    start = lines.index("4 target error(s):")
    assert lines[start : start + 3] == [
        "4 target error(s):",
        "  3 × RuntimeError: [boom] backend refused the request",
        "  1 × KeyError: 'city'",
    ]
    where = f"every error: /runs/{run_id}/?status=errored in the portal (evalsite serve), or evalsite export {run_id}"
    assert where in lines
    judge = next(i for i, line in enumerate(lines) if line.startswith("judge: 0 verdicts, 1 judge errors"))
    assert lines[judge + 1].startswith("  1 × judge model error after 1 attempt(s): model_error: ModelError: ")
    assert lines[judge + 2] == f"  {where}"
    stored = EvalRun.objects.get().summary["judge"]
    assert stored["error_reasons"][0][1] == 1 and stored["other_error_reasons"] == 0
