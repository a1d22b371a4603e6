"""Conversation cases out (issue 25): a run's JSON Lines and Parquet exports carry every turn
(answer, tool calls, status, scores) under ``evalsite.turns``; CSV says it cannot hold one; an
ADK set exported and imported again reads back the same; the OTLP trace of a conversation case
is one case span with a child span per turn, each carrying its own result."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from apps.evals.exports.downloads import ExportFormatError, run_download, set_download
from apps.evals.exports.otel import TURN_INDEX, TURN_STATUS, eval_run_traces
from apps.evals.models import EvalCase, EvalRun, EvalSet
from apps.evals.results.readback import stored_case
from evalcore.otel import semconv as sc
from tests.apps.factories import make_eval_run, make_eval_set

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REPROS = FIXTURES / "repros"
ADK_SETS = [
    *sorted(p for p in (FIXTURES / "adk").glob("*.json") if p.name.endswith((".test.json", ".evalset.json"))),
    REPROS / "bh-43-turns.evalset.json",
]
USERS = ["Switch off the lamp in the kitchen.", "And switch on the heater in the hall."]


def played(tmp_path: Path, target: str = "late-caller") -> EvalRun:
    """The bh-43 conversation (two turns) imported and run against ``target``."""
    folder = tmp_path / "agents"
    folder.mkdir(exist_ok=True)
    shutil.copy(REPROS / "bh-43-agents" / "targets.py", folder / "targets.py")
    call_command("import", str(REPROS / "bh-43-turns.evalset.json"))
    call_command(
        "eval", str(folder), "--set", "bh-43-turns", "--target", target,
        "--split", "all", "--allow-test", "--quiet",
    )  # fmt: skip
    return EvalRun.objects.get(target_id=target)


def check_turns(turns: list[dict]) -> None:
    assert [t["turn"] for t in turns] == [1, 2]
    assert [t["user"] for t in turns] == USERS
    assert [t["status"] for t in turns] == ["failed", "failed"]
    assert turns[0]["tool_calls"] == [] and [c["name"] for c in turns[1]["tool_calls"]] == ["set_device", "set_device"]
    assert [t["final_response"] for t in turns] == ["Sure.", "Done."]
    score = turns[0]["scores"][0]
    assert (score["name"], score["passed"]) == ("tool_calls", False) and "was not made" in score["explanation"]


@pytest.mark.django_db(transaction=True)
def test_jsonl_and_parquet_run_exports_carry_every_turn_and_csv_says_it_cannot(tmp_path):
    eval_run = played(tmp_path)
    (row,) = [json.loads(line) for line in b"".join(run_download(eval_run, "jsonl").chunks).splitlines()]
    assert row["input"]["turns"] == USERS
    check_turns(row["evalsite"]["turns"])

    table = pq.read_table(io.BytesIO(b"".join(run_download(eval_run, "parquet").chunks)))
    (cell,) = table.column("evalsite.turns").to_pylist()
    check_turns(json.loads(cell))

    with pytest.raises(ExportFormatError, match="CSV cannot hold a conversation"):
        run_download(eval_run, "csv")
    with pytest.raises(ExportFormatError, match="CSV cannot hold a conversation"):
        set_download(EvalSet.objects.get(name="bh-43-turns"), "csv")


@pytest.mark.django_db
def test_a_run_without_conversations_exports_as_before(tmp_path):
    eval_run = make_eval_run(make_eval_set("plain", 2), [True, False])
    csv = b"".join(run_download(eval_run, "csv").chunks).decode()
    assert "evalsite.turns" not in csv.splitlines()[0] and len(csv.splitlines()) == 3
    rows = [json.loads(line) for line in b"".join(run_download(eval_run, "jsonl").chunks).splitlines()]
    assert all("turns" not in row["evalsite"] for row in rows)
    table = pq.read_table(io.BytesIO(b"".join(run_download(eval_run, "parquet").chunks)))
    assert "evalsite.turns" not in table.column_names


@pytest.mark.django_db(transaction=True)
def test_the_api_export_of_a_conversation_run(tmp_path, client, viewer):
    eval_run = played(tmp_path)
    client.force_login(viewer)
    response = client.get(f"/api/eval/runs/{eval_run.pk}/export?format=jsonl")
    assert response.status_code == 200
    (row,) = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    check_turns(row["evalsite"]["turns"])
    refused = client.get(f"/api/eval/runs/{eval_run.pk}/export?format=csv")
    assert refused.status_code == 400 and "CSV cannot hold a conversation" in json.loads(refused.content)["message"]


def case_fields(eval_set: EvalSet) -> list[tuple]:
    rows = EvalCase.objects.filter(eval_set=eval_set).order_by("position", "case_id")
    return [(c.id, c.input, c.expected) for c in map(stored_case, rows)]


@pytest.mark.django_db
@pytest.mark.parametrize("source", ADK_SETS, ids=lambda p: p.name)
def test_an_adk_set_exported_and_imported_again_reads_back_the_same(source, tmp_path):
    call_command("import", str(source), "--name", "first")
    first = EvalSet.objects.get(name="first")
    exported = tmp_path / "again.evalset.json"
    exported.write_bytes(b"".join(set_download(first, "adk").chunks))
    call_command("import", str(exported), "--name", "second")
    second = EvalSet.objects.get(name="second")
    assert case_fields(second) == case_fields(first)
    keep = ("session_input", "final_session_state", "rubrics")
    for a, b in zip(
        EvalCase.objects.filter(eval_set=first).order_by("position"),
        EvalCase.objects.filter(eval_set=second).order_by("position"),
        strict=True,
    ):
        assert {k: a.metadata.get(k) for k in keep} == {k: b.metadata.get(k) for k in keep}


@pytest.mark.django_db
def test_a_conversation_case_written_in_the_portal_round_trips_through_adk(tmp_path):
    eval_set = make_eval_set("portal", 0)
    conversation = {"turns": ["hi", "book it", "thanks"], "initial_state": {"user": "ada"}}
    expected = {
        "turns": [
            {"final_response": "Hello!", "tool_calls": []},
            {
                "final_response": None,
                "tool_calls": [{"name": "book", "arguments": {"seat": "12A"}}],
                "rubric": "confirms the seat",
            },
            # ADK cannot say "nothing expected" of one turn among stated ones: a turn without a
            # stated value reads back as expecting no tool call, so the case states that itself
            {"final_response": "You're welcome.", "tool_calls": []},
        ],
        "final_state": {"booked": True},
    }
    EvalCase.objects.create(eval_set=eval_set, case_id="talk", input=conversation, expected=expected, split="dev")
    exported = tmp_path / "portal.evalset.json"
    exported.write_bytes(b"".join(set_download(eval_set, "adk").chunks))
    call_command("import", str(exported), "--name", "back")
    back = EvalCase.objects.get(eval_set__name="back")
    assert (back.input, back.expected) == (conversation, expected)
    exported.write_bytes(b"".join(set_download(EvalSet.objects.get(name="back"), "adk").chunks))
    call_command("import", str(exported), "--name", "again")
    again = EvalCase.objects.get(eval_set__name="again")
    assert (again.input, again.expected) == (conversation, expected)


@pytest.mark.django_db(transaction=True)
def test_the_otlp_trace_of_a_conversation_case_is_a_case_span_with_one_child_per_turn(tmp_path):
    eval_run = played(tmp_path)
    (spans,) = list(eval_run_traces(eval_run))
    (case,) = [s for s in spans if s.parent_span_id is None]
    assert case.attributes[sc.CASE_ID] == "lights" and case.attributes[sc.CASE_STATUS] == "failed"
    turns = [s for s in spans if s.attributes.get(sc.SPAN_KIND) == "turn"]
    assert [s.name for s in turns] == ["turn 1", "turn 2"]
    assert all(s.parent_span_id == case.span_id for s in turns)
    assert [s.attributes[TURN_INDEX] for s in turns] == [1, 2]
    assert [s.attributes[TURN_STATUS] for s in turns] == ["failed", "failed"]
    assert turns[0].attributes[sc.SCORE_PREFIX + "tool_calls.passed"] is False
    assert sc.CASE_ID not in turns[0].attributes  # the case's attributes are on the case span only
    agents = [s for s in spans if s.parent_span_id in {t.span_id for t in turns}]
    assert len(agents) == 2  # each turn's target span under its turn
    assert case.start_ns <= min(s.start_ns for s in spans) and case.end_ns >= max(s.end_ns for s in spans)


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_set_of_conversation_cases_exported_as_jsonl_or_parquet_imports_back_the_same(fmt, tmp_path):
    call_command("import", str(REPROS / "bh-43-turns.evalset.json"), "--name", "first")
    first = EvalSet.objects.get(name="first")
    EvalCase.objects.create(
        eval_set=first,
        case_id="stateful",
        input={"turns": ["a", "b"], "initial_state": {"n": 1}},
        expected={"turns": [{"rubric": "greets"}, {}], "final_state": {"n": 2}},
        split="dev",
        tags=["talk"],
        position=9,
    )
    exported = tmp_path / f"first.{fmt}"
    exported.write_bytes(b"".join(set_download(first, fmt).chunks))
    call_command("import", str(exported), "--name", "second")
    second = EvalSet.objects.get(name="second")
    assert case_fields(second) == case_fields(first)
    assert EvalCase.objects.get(eval_set=second, case_id="stateful").tags == ["talk"]
