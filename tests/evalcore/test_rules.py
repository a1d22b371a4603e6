"""The rule-adherence lens (issue 15): rule declarations, presence from the trace, the judge half
(scripted answers, malformed ones included), the case verdict, aggregates and flips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalcore.judge.cache import SqliteJudgeCache
from evalcore.rules import (
    Rule,
    RuleAdherence,
    RuleError,
    bind_target_rules,
    case_rules,
    flip_counts,
    load_rules_file,
    model_requests,
    parse_rules,
    rule_aggregates,
    rule_flips,
    rule_presence,
    target_rules,
)
from evalcore.rules.presence import RuleMatcher
from evalcore.runner import run_eval
from evalcore.runtime.agent import Agent
from evalcore.runtime.models import ModelError
from evalcore.runtime.scripted import FunctionModel, ScriptedModel
from evalcore.scorers.base import ScoreContext, ScorerServices
from evalcore.scorers.registry import scorer_from_spec
from evalcore.serial import to_record
from evalcore.tracing import Tracer
from evalcore.types import Case, CaseStatus, RunRecord, Score, case_outcome

R1 = Rule("R1", "Always answer in English.")
R2 = Rule("R2", "Never quote a price in {currency}; point the customer to the pricing page instead.")
R3 = Rule("R3", "Sign every reply as Ada from Support.")


def trace_of(requests: list[list[dict[str, Any]]], *, explicit: bool = True) -> list[Any]:
    """A trace with one chat span per request (recorded on the span, or as message events)."""
    tracer = Tracer("t", "r")
    with tracer.span("invoke_agent", "bot"):
        for index, request in enumerate(requests):
            if explicit:
                with tracer.span("chat", "m", step=index, request_messages=request):
                    tracer.message("assistant", role="assistant", content="ok")
            else:
                for message in request:
                    tracer.message(message["role"], **message)
                with tracer.span("chat", "m", step=index):
                    tracer.message("assistant", role="assistant", content="ok")
    return tracer.events


def system(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": text}, {"role": "user", "content": "hi"}]


# --- declarations ---------------------------------------------------------------------------


def test_rules_parse_from_dicts_pairs_and_objects_and_refuse_bad_ones():
    rules = parse_rules([{"id": "R1", "text": " a "}, ("R2", "b"), R3], where="t")
    assert [(r.id, r.text) for r in rules] == [("R1", "a"), ("R2", "b"), ("R3", R3.text)]
    with pytest.raises(RuleError, match=r"t\[1\]\.text: rule 'R2' needs a non-empty text"):
        parse_rules([{"id": "R1", "text": "a"}, {"id": "R2", "text": " "}], where="t")
    with pytest.raises(RuleError, match=r"t\[0\]\.id"):
        parse_rules([{"id": "bad id", "text": "a"}], where="t")
    with pytest.raises(RuleError, match="declared twice"):
        parse_rules([("R1", "a"), ("R1", "b")], where="t")
    with pytest.raises(RuleError, match="unknown field"):
        parse_rules([{"id": "R1", "text": "a", "txt": "b"}], where="t")


def test_case_rules_errors_name_the_case_and_field():
    assert case_rules({}, case_id="q1") == []
    assert case_rules({"rules": [{"id": "R9", "text": "x"}]}, case_id="q1")[0].source == "case"
    with pytest.raises(RuleError, match=r"case 'q1': metadata\.rules\[0\]\.text"):
        case_rules({"rules": [{"id": "R9"}]}, case_id="q1")
    with pytest.raises(RuleError, match=r"case 'q1': metadata\.rules: rules must be a list"):
        case_rules({"rules": "R9"}, case_id="q1")


def test_rules_file_merges_with_target_rules_and_names_file_and_field(tmp_path: Path):
    (tmp_path / "rules.toml").write_text('["*"]\nR0 = "Be kind."\n[bot]\nR2 = "Overridden text."\nR3 = "Third."\n')
    rules = target_rules("bot", [{"id": "R1", "text": "One."}, {"id": "R2", "text": "Two."}], tmp_path)
    assert [(r.id, r.text, r.source) for r in rules] == [
        ("R1", "One.", "target"),
        ("R2", "Overridden text.", "file"),
        ("R0", "Be kind.", "file"),
        ("R3", "Third.", "file"),
    ]
    assert [r.id for r in target_rules("other", [], tmp_path)] == ["R0"]
    assert target_rules("bot", [], tmp_path / "missing") == []
    (tmp_path / "rules.toml").write_text('[bot]\nR1 = ""\n')
    with pytest.raises(RuleError, match=r"rules\.toml: bot\.R1\.text"):
        load_rules_file(tmp_path / "rules.toml")
    (tmp_path / "rules.toml").write_text("[bot\n")
    with pytest.raises(RuleError, match=r"rules\.toml: invalid TOML.*line 1"):
        load_rules_file(tmp_path / "rules.toml")
    (tmp_path / "rules.toml").write_text('bot = "R1"\n')
    with pytest.raises(RuleError, match=r"bot: expected a table"):
        load_rules_file(tmp_path / "rules.toml")


# --- presence -------------------------------------------------------------------------------


def test_exact_match_is_normalised_for_case_space_and_punctuation():
    matcher = RuleMatcher(R1)
    assert matcher.match("You help.\n  ALWAYS answer in English!  Be brief.").kind == "exact"
    assert RuleMatcher(R1, threshold=None).match("Always answer in Englishman.") is None  # whole words only


def test_templated_rule_matches_its_filled_in_slot_and_not_a_different_rule():
    matcher = RuleMatcher(R2, threshold=None)
    found = matcher.match("Never quote a price in EUR; point the customer to the pricing page instead.")
    assert found is not None and found.kind == "template"
    assert matcher.match("Never quote a price in US dollars; point the customer to the pricing page instead.")
    assert matcher.match("Never quote a price; point the customer to the pricing page instead.") is None
    assert matcher.match("Always quote a price in EUR.") is None


def test_fuzzy_match_has_a_documented_threshold():
    reworded = "Always answer only in English."
    assert RuleMatcher(R1, threshold=90).match(reworded).kind == "fuzzy"
    assert RuleMatcher(R1, threshold=None).match(reworded) is None
    # token_set_ratio 85 < 90: a different language is not the same rule
    assert RuleMatcher(R1, threshold=90).match("Always answer in French.") is None
    assert RuleMatcher(R1, threshold=80).match("Always answer in French.") is not None
    with pytest.raises(ValueError, match=r"0\.\.100"):
        RuleMatcher(R1, threshold=101)


def test_rule_dropped_after_turn_one_is_reported_with_its_turns():
    full, lean = (
        system(f"{R1.text}\nNever quote a price in EUR; point the customer to the pricing page instead."),
        system(R1.text),
    )
    for explicit in (True, False):
        requests = model_requests(trace_of([full, lean, lean], explicit=explicit))
        assert [r.turn for r in requests] == [1, 2, 3]
        r2 = rule_presence(R2, requests, 90)
        assert r2.turns == [1] if explicit else r2.turns == [1, 2, 3]
    # explicit requests: R2 only in turn 1, then dropped
    requests = model_requests(trace_of([full, lean, lean]))
    r2 = rule_presence(R2, requests, 90)
    assert (r2.presence, r2.dropped_after, r2.n_turns, r2.match) == ("dropped", 1, 3, "template")
    assert not r2.present("every") and r2.present("any")
    r1 = rule_presence(R1, requests, 90)
    assert (r1.presence, r1.turns) == ("every", [1, 2, 3])
    assert rule_presence(R3, requests, 90).presence == "none"
    partial = rule_presence(R2, model_requests(trace_of([lean, full])), 90)
    assert (partial.presence, partial.turns) == ("partial", [2])


def test_reconstructed_requests_follow_the_agent_conversation_and_skip_judge_spans():
    tracer = Tracer("t", "r")
    with tracer.span("invoke_agent", "bot"):
        tracer.message("system", role="system", content=R1.text)
        tracer.message("user", role="user", content="hi")
        with tracer.span("chat", "m"):
            tracer.message("assistant", role="assistant", content="x")
    with tracer.span("chat", "judge:m", role="judge", request_messages=[{"role": "system", "content": R3.text}]):
        pass
    requests = model_requests(
        [{"seq": e.seq, "type": e.type, "name": e.name, "payload": e.payload} for e in tracer.events]
    )
    assert len(requests) == 1 and not requests[0].explicit
    assert R1.text in requests[0].text


def test_imported_otel_and_adk_shaped_requests_are_read():
    otel = {
        "seq": 0,
        "type": "span_begin",
        "name": "chat m",
        "payload": {
            "span_id": "a",
            "kind": "chat",
            "gen_ai.system_instructions": [{"type": "text", "content": R1.text}],
            "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}],
        },
    }
    adk_request = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "config": {"system_instruction": R3.text}}
    adk = {
        "seq": 1,
        "type": "span_begin",
        "name": "call_llm",
        "payload": {"span_id": "b", "kind": "chat", "gcp.vertex.agent.llm_request": json.dumps(adk_request)},
    }
    requests = model_requests([adk, otel])
    assert [rule_presence(R1, requests, 90).turns, rule_presence(R3, requests, 90).turns] == [[1], [2]]


# --- the scorer -----------------------------------------------------------------------------


def context(
    events: list[Any], *, output: str = "Prices are on the pricing page. -- Ada", metadata=None
) -> ScoreContext:
    case = Case("c1", "How much?", metadata=dict(metadata or {}))
    return ScoreContext(case=case, output=output, run=RunRecord("c1", "r", "t", output=output), events=events)


FULL = system(
    "\n".join([R1.text, "Never quote a price in EUR; point the customer to the pricing page instead.", R3.text])
)
LEAN = system("\n".join([R1.text, R3.text]))


def rows(scores: list[Score]) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in scores[0].metadata["rules"]}


def verdict(text: str) -> str:
    return json.dumps({"verdict": text, "reason": f"the answer is {text}"})


async def test_presence_alone_fails_a_dropped_rule_and_never_passes_unjudged_ones():
    scorer = RuleAdherence(rules=[to_record(R1), to_record(R2), to_record(R3)])
    lean = await scorer.score(context(trace_of([FULL, LEAN])))
    assert lean[0].passed is False and lean[0].value is False
    assert rows(lean)["R2"]["outcome"] == "rule_absent" and rows(lean)["R2"]["presence"] == "dropped"
    assert rows(lean)["R2"]["reason"] == "present in turn 1 of 2, then dropped"
    later = await scorer.score(context(trace_of([FULL, FULL, LEAN])))
    assert rows(later)["R2"]["reason"] == "present in turns 1..2 of 3, then dropped"
    assert rows(later)["R2"]["dropped_after"] == 2
    assert rows(lean)["R1"]["outcome"] == "unjudged"
    assert lean[1].name == "rule_adherence.presence" and lean[1].value == pytest.approx(2 / 3)
    assert case_outcome(target_errored=False, scores=lean).status is CaseStatus.FAILED

    full = await scorer.score(context(trace_of([FULL, FULL])))
    assert {row["outcome"] for row in rows(full).values()} == {"unjudged"}
    assert full[0].passed is None and full[0].value is None and full[0].error is None
    # present but unjudged is no verdict: the case is unscored, never passed
    assert case_outcome(target_errored=False, scores=full).status is CaseStatus.UNSCORED

    anywhere = await RuleAdherence(rules=[to_record(R2)], require="any").score(context(trace_of([FULL, LEAN])))
    assert rows(anywhere)["R2"]["outcome"] == "unjudged"


async def test_judge_verdicts_per_rule_with_reasons_and_call_settings():
    answers = {"R1": verdict("honoured"), "R2": verdict("ignored"), "R3": verdict("not_applicable")}

    def judge(messages: list[dict[str, Any]]) -> str:
        rule_id = messages[1]["content"].split(":", 1)[0].removeprefix("Rule ")
        return answers[rule_id]

    model = FunctionModel(judge, name="judge")
    scorer = RuleAdherence(rules=[to_record(R1), to_record(R2), to_record(R3)], model=model)
    scores = await scorer.score(context(trace_of([FULL])))
    got = rows(scores)
    assert {k: v["outcome"] for k, v in got.items()} == {"R1": "honoured", "R2": "rule_ignored", "R3": "not_applicable"}
    assert got["R2"]["reason"] == "the answer is ignored"
    assert scores[0].passed is False and "R2 rule_ignored" in scores[0].explanation
    assert all(c.temperature == 0.0 and c.seed == 0 for c in model.calls)
    assert model.calls[0].response_format["type"] == "json_schema"
    assert scores[0].metadata["judge_model"] == "judge" and scores[0].metadata["judge_calls"] == 3

    answers.update(R2=verdict("honoured"))
    passed = await scorer.score(context(trace_of([FULL])))
    assert passed[0].passed is True and passed[0].value is True


async def test_rule_verdicts_are_cached_and_errors_are_not(tmp_path: Path):
    cache = SqliteJudgeCache(tmp_path / "judge.sqlite3")
    first_model = ScriptedModel([verdict("honoured"), "garbage", "garbage", "garbage"], name="judge")
    scorer = RuleAdherence(rules=[to_record(R1), to_record(R3)], model=first_model, retries=2)
    ctx = context(trace_of([FULL]))
    ctx.judge_cache = cache
    first = await scorer.score(ctx)
    assert {k: v["outcome"] for k, v in rows(first).items()} == {"R1": "honoured", "R3": "judge_error"}
    assert first[0].metadata["judge_cache_hits"] == 0 and len(first_model.calls) == 4

    # a rescore reads R1 from the cache (no call) and asks again only about R3, whose error was not kept
    again_model = ScriptedModel([verdict("ignored")], name="judge")
    again = await RuleAdherence(rules=[to_record(R1), to_record(R3)], model=again_model).score(ctx)
    assert {k: v["outcome"] for k, v in rows(again).items()} == {"R1": "honoured", "R3": "rule_ignored"}
    assert again[0].metadata["judge_cache_hits"] == 1 and again[0].metadata["judge_calls"] == 1
    assert len(again_model.calls) == 1 and "Rule R3" in again_model.calls[0].messages[1]["content"]

    # another output is another question: no hit
    other = context(trace_of([FULL]), output="EUR 40. -- Ada")
    other.judge_cache = cache
    other_model = ScriptedModel([verdict("ignored"), verdict("honoured")], name="judge")
    await RuleAdherence(rules=[to_record(R1), to_record(R3)], model=other_model).score(other)
    assert len(other_model.calls) == 2


async def test_absent_rules_are_not_sent_to_the_judge():
    model = ScriptedModel([verdict("honoured"), verdict("honoured")], name="judge")
    scores = await RuleAdherence(rules=[to_record(R1), to_record(R2), to_record(R3)], model=model).score(
        context(trace_of([FULL, LEAN]))
    )
    assert len(model.calls) == 2 and all("R2" not in c.messages[1]["content"][:8] for c in model.calls)
    assert rows(scores)["R2"]["outcome"] == "rule_absent" and scores[0].passed is False


@pytest.mark.parametrize(
    "answer",
    [
        "Sure, the rule was honoured.",  # prose
        '{"verdict": "mostly", "reason": "x"}',  # unknown verdict
        '{"verdict": "honoured"}',  # no reason
        "[1, 2]",  # not an object
        "",  # nothing
    ],
)
async def test_a_malformed_judge_answer_is_a_judge_error_never_a_verdict(answer: str):
    model = ScriptedModel([answer] * 3, name="judge")
    scorer = RuleAdherence(rules=[to_record(R1)], model=model, retries=2)
    scores = await scorer.score(context(trace_of([FULL])))
    assert len(model.calls) == 3  # retried, then given up
    row = rows(scores)["R1"]
    assert row["outcome"] == "judge_error" and row["judge_error"]["attempts"] == 3
    assert scores[0].error is not None and scores[0].value is None and scores[0].passed is None
    assert scores[0].metadata["kind"] == "judge_error"
    assert case_outcome(target_errored=False, scores=scores).status is CaseStatus.ERRORED


async def test_a_retry_after_a_malformed_answer_can_still_give_a_verdict():
    model = ScriptedModel(["not json", "```json\n" + verdict("Honored") + "\n```"], name="judge")
    scores = await RuleAdherence(rules=[to_record(R1)], model=model).score(context(trace_of([FULL])))
    assert rows(scores)["R1"]["outcome"] == "honoured" and scores[0].passed is True


async def test_judge_error_with_an_absent_rule_still_fails_the_case():
    model = ScriptedModel(["garbage"] * 4, name="judge")
    scores = await RuleAdherence(rules=[to_record(R1), to_record(R2)], model=model, retries=1).score(
        context(trace_of([FULL, LEAN]))
    )
    assert rows(scores)["R1"]["outcome"] == "judge_error"
    assert scores[0].passed is False and scores[0].error is None


async def test_model_errors_and_a_rejected_schema_are_handled():
    def refuse_schema(messages):
        raise AssertionError("unreachable")

    class Picky(FunctionModel):
        async def complete(self, messages, *, response_format=None, **kwargs):
            self._record(messages, None, response_format, kwargs.get("temperature"), kwargs.get("seed"), None)
            if response_format is not None and response_format.get("type") == "json_schema":
                raise ModelError("400: response_format json_schema is not supported")
            return await self._resolve(lambda m: verdict("honoured"), messages)

    picky = Picky(refuse_schema, name="picky")
    scores = await RuleAdherence(rules=[to_record(R1)], model=picky).score(context(trace_of([FULL])))
    assert rows(scores)["R1"]["outcome"] == "honoured"
    assert [c.response_format["type"] for c in picky.calls] == ["json_schema", "json_object"]

    def broken(messages):
        raise ModelError("endpoint down")

    down = await RuleAdherence(rules=[to_record(R1)], model=FunctionModel(broken), retries=1).score(
        context(trace_of([FULL]))
    )
    assert rows(down)["R1"]["judge_error"]["kind"] == "model_error" and down[0].error is not None


async def test_case_rules_add_to_target_rules_and_bad_ones_are_a_scorer_error():
    scorer = RuleAdherence(rules=[to_record(R1)])
    extra = {"rules": [{"id": "R9", "text": "Mention the order number."}]}
    scores = await scorer.score(context(trace_of([FULL]), metadata=extra))
    assert rows(scores)["R9"]["outcome"] == "rule_absent" and rows(scores)["R9"]["source"] == "case"
    bad = await scorer.score(context(trace_of([FULL]), metadata={"rules": [{"id": "R9"}]}))
    assert bad[0].error is not None and "metadata.rules[0].text" in bad[0].error


async def test_no_rules_or_no_model_request_give_no_verdict():
    none = await RuleAdherence(rules=[]).score(context(trace_of([FULL])))
    assert none[0].passed is None and none[0].error is None
    empty = await RuleAdherence(rules=[to_record(R1)]).score(context([]))
    assert empty[0].error is not None and empty[0].metadata["kind"] == "no_model_requests"


def test_spec_round_trip_binding_and_option_checks():
    scorer = scorer_from_spec("rule_adherence")
    assert isinstance(scorer, RuleAdherence) and scorer.spec().args["rules"] is None
    bind_target_rules([scorer], [R1, R2])
    args = scorer.spec().args
    assert [r["id"] for r in args["rules"]] == ["R1", "R2"] and "model" not in args
    bind_target_rules([scorer], [R3])  # already bound: kept
    rebuilt = scorer_from_spec(to_record(scorer.spec()))
    assert [r["id"] for r in rebuilt.spec().args["rules"]] == ["R1", "R2"]
    for bad in ({"require": "some"}, {"fuzzy_threshold": 120}, {"retries": -1}, {"rules": [{"id": "R1"}]}):
        with pytest.raises(ValueError):
            RuleAdherence(**bad)


async def test_the_evalsite_agent_loop_trace_is_read_through_run_eval():
    model = ScriptedModel(["answer one"], name="m")
    agent = Agent(model, instructions=f"{R1.text} {R3.text}")
    judge = FunctionModel(lambda m: verdict("honoured"), name="judge")
    report_results: list[Any] = []

    class Sink:
        def on_event(self, event: Any) -> None:
            pass

        def on_result(self, result: Any) -> None:
            report_results.append(result)

        def flush(self) -> None:
            pass

    report = await run_eval(
        [Case("c1", "hello", split="dev")],
        agent,
        [RuleAdherence(rules=[to_record(R1), to_record(R2), to_record(R3)])],
        services=ScorerServices(judge=judge),
        sink=Sink(),
    )
    assert report.failed == 1
    got = rows(report_results[0].scores)
    assert {k: v["outcome"] for k, v in got.items()} == {"R1": "honoured", "R2": "rule_absent", "R3": "honoured"}


# --- aggregates and flips -------------------------------------------------------------------


def score_with(**outcomes: str) -> dict[str, Any]:
    rule_rows = [
        {"id": k, "text": k.lower(), "outcome": v, "presence": "dropped" if v == "rule_absent" else "every"}
        for k, v in outcomes.items()
    ]
    return to_record(Score("rule_adherence", None, metadata={"rules": rule_rows}))


def test_rule_aggregates_give_rates_over_decided_cases_with_coverage():
    scores = [
        score_with(R1="honoured", R2="rule_absent"),
        score_with(R1="rule_ignored", R2="rule_absent"),
        score_with(R1="unjudged", R2="honoured"),
        score_with(R1="judge_error", R2="not_applicable"),
        to_record(Score("exact_match", True)),
        None,
    ]
    aggs = {a.rule_id: a for a in rule_aggregates(scores)}
    r1, r2 = aggs["R1"], aggs["R2"]
    assert (r1.cases, r1.decided, r1.coverage) == (4, 2, "2/4")
    assert (r1.honoured_rate, r1.ignored_rate, r1.absent_rate) == (0.5, 0.5, 0.0)
    assert r1.counts["unjudged"] == 1 and r1.counts["judge_error"] == 1
    assert (r2.coverage, r2.absent_rate, r2.honoured_rate, r2.not_applicable_rate, r2.dropped) == (
        "4/4",
        0.5,
        0.25,
        0.25,
        2,
    )
    only_unjudged = rule_aggregates([score_with(R1="unjudged")])[0]
    assert only_unjudged.honoured_rate is None and only_unjudged.coverage == "0/1"


def test_rule_flips_between_two_runs():
    a = {
        "c1": score_with(R1="honoured", R2="honoured"),
        "c2": score_with(R2="honoured"),
        "c3": score_with(R2="honoured"),
    }
    b = {
        "c1": score_with(R1="honoured", R2="rule_absent"),
        "c2": score_with(R2="rule_absent", R4="honoured"),
        "c4": score_with(),
    }
    flips = rule_flips(a, b)
    assert [(f.case_key, f.rule_id, f.label) for f in flips] == [
        ("c1", "R2", "honoured → rule_absent"),
        ("c2", "R2", "honoured → rule_absent"),
        ("c2", "R4", "missing → honoured"),
    ]
    assert flip_counts(flips) == {"R2": {"honoured → rule_absent": 2}, "R4": {"missing → honoured": 1}}
