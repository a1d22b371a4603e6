"""Conversation cases through the API (issue 25): ``POST /cases`` and ``PUT /cases/{id}`` check a
conversation as the loaders do (422 naming the JSON path, nothing stored), a run's results give a
conversation case's per-turn results under ``turns``, and ``POST /cases/from-session`` captures a
whole playground conversation (by session or by trace id) as ONE conversation case."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from apps.agents.services import chat_turn, start_session
from apps.evals.models import EvalCase, EvalRun, EvalSet
from apps.traces.models import Run
from tests.apps.factories import make_eval_set

pytestmark = pytest.mark.django_db

REPROS = Path(__file__).resolve().parents[2] / "fixtures" / "repros"
CONVERSATION = {"turns": ["Switch off the lamp.", "And the heater?"], "initial_state": {"lamp": "on"}}
EXPECTED = [
    {"final_response": "The lamp is off.", "tool_calls": [{"name": "set_device", "arguments": {"device": "lamp"}}]},
    {"tool_calls": [{"name": "set_device", "arguments": {"device": "heater"}}]},
]


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def post(user, path: str, payload: dict):
    return client_for(user).post(path, payload, content_type="application/json")


@pytest.fixture
def bank():
    return make_eval_set("bank", 2)


def test_a_conversation_case_is_added_and_read_back(member, bank):
    response = post(
        member, "/api/eval/cases", {"set_id": bank.pk, "case_id": "talk", "input": CONVERSATION, "expected": EXPECTED}
    )
    assert response.status_code == 201, response.content
    case = json.loads(response.content)
    assert (case["input"], case["expected"], case["split"]) == (CONVERSATION, EXPECTED, "dev")
    stored = EvalCase.objects.get(eval_set=bank, case_id="talk")
    assert stored.input == CONVERSATION and stored.has_expected and stored.position == 2
    listed = json.loads(client_for(member).get(f"/api/eval/sets/{bank.pk}/cases").content)["items"]
    assert [c["case_id"] for c in listed][-1] == "talk"


def test_a_conversation_written_turn_by_turn_is_stored_in_the_canonical_shape(member, bank):
    payload = {
        "set_id": bank.pk,
        "case_id": "by-turn",
        "turns": [{"user": "hi", "final_response": "hello"}, {"user": "bye", "tool_calls": [{"name": "end"}]}],
        "final_state": {"done": True},
    }
    response = post(member, "/api/eval/cases", payload)
    assert response.status_code == 201, response.content
    case = EvalCase.objects.get(eval_set=bank, case_id="by-turn")
    assert case.input == {"turns": ["hi", "bye"]}
    assert case.expected == {
        "turns": [{"final_response": "hello"}, {"tool_calls": [{"name": "end", "arguments": {}}]}],
        "final_state": {"done": True},
    }


@pytest.mark.parametrize(
    ("payload", "field", "words"),
    [
        ({"input": {"turns": ["hi", "  "]}}, "input.turns[1]", "user's message"),
        ({"input": {"turns": []}}, "input.turns", "non-empty list"),
        ({"input": CONVERSATION, "expected": [{}]}, "expected", "1 expected turn(s) for 2 user turn(s)"),
        ({"input": CONVERSATION, "expected": [{}, {"final_answer": "x"}]}, "expected[1].final_answer", "unknown field"),
        (
            {"input": CONVERSATION, "expected": [{}, {"tool_calls": [{"name": "x", "arguments": []}]}]},
            "expected[1].tool_calls[0].arguments",
            "must be an object",
        ),
        ({"input": CONVERSATION, "expected": {"turns": [{}, {}], "final": {}}}, "expected", "unknown field 'final'"),
        ({"turns": [{"user": "hi"}, {"text": "no user"}]}, "turns[1].text", "unknown field"),
        ({"turns": [{"user": "hi"}, {"final_response": "x"}]}, "turns[1].user", "user's message"),
        ({"turns": [{"user": "hi"}], "input": "also"}, "turns", "not both"),
        ({"tags": ["x"]}, "input", "needs an input"),
    ],
)
def test_a_malformed_conversation_is_a_422_naming_the_json_path_and_stores_nothing(member, bank, payload, field, words):
    before = list(EvalCase.objects.order_by("pk").values_list("pk", "input"))
    version = EvalSet.objects.get(pk=bank.pk).content_hash
    response = post(member, "/api/eval/cases", {"set_id": bank.pk, "case_id": "bad", **payload})
    assert response.status_code == 422, response.content
    answer = json.loads(response.content)
    assert answer["field"] == field
    assert words in answer["message"] and answer["message"].startswith(field)
    assert list(EvalCase.objects.order_by("pk").values_list("pk", "input")) == before
    assert EvalSet.objects.get(pk=bank.pk).content_hash == version


def test_put_replaces_a_case_with_a_conversation_and_refuses_a_bad_one(member, bank):
    case = EvalCase.objects.filter(eval_set=bank).order_by("position").first()
    assert case is not None
    path = f"/api/eval/cases/{case.pk}"
    response = client_for(member).put(
        path, {"input": CONVERSATION, "expected": EXPECTED, "split": "train", "tags": ["talk"]}, "application/json"
    )
    assert response.status_code == 200, response.content
    case.refresh_from_db()
    assert (case.input, case.expected, case.split, case.tags) == (CONVERSATION, EXPECTED, "train", ["talk"])
    bad = client_for(member).put(path, {"input": {"turns": ["ok", 3]}}, "application/json")
    assert bad.status_code == 422 and json.loads(bad.content)["field"] == "input.turns[1]"
    case.refresh_from_db()
    assert case.input == CONVERSATION  # nothing half-written
    assert client_for(member).put("/api/eval/cases/999999", {"input": "x"}, "application/json").status_code == 404


def test_case_writes_need_a_member(viewer, outsider, bank):
    payload = {"set_id": bank.pk, "case_id": "talk", "input": CONVERSATION}
    assert post(viewer, "/api/eval/cases", payload).status_code == 403
    assert post(outsider, "/api/eval/cases", payload).status_code == 403
    assert Client().post("/api/eval/cases", payload, content_type="application/json").status_code == 401
    assert post(viewer, "/api/eval/cases", {**payload, "set_id": 999999}).status_code == 403
    assert not EvalCase.objects.filter(case_id="talk").exists()


def test_a_duplicate_case_id_names_the_field(member, bank):
    response = post(member, "/api/eval/cases", {"set_id": bank.pk, "case_id": "c0", "input": "x"})
    assert response.status_code == 400 and json.loads(response.content)["field"] == "case_id"


@pytest.mark.django_db(transaction=True)
def test_a_runs_results_give_a_conversation_cases_turns(tmp_path, viewer):
    folder = tmp_path / "agents"
    folder.mkdir()
    shutil.copy(REPROS / "bh-43-agents" / "targets.py", folder / "targets.py")
    call_command("import", str(REPROS / "bh-43-turns.evalset.json"))
    call_command(
        "eval", str(folder), "--set", "bh-43-turns", "--target", "late-caller",
        "--split", "all", "--allow-test", "--quiet",
    )  # fmt: skip
    eval_run = EvalRun.objects.get(target_id="late-caller")
    detail = json.loads(client_for(viewer).get(f"/api/eval/runs/{eval_run.pk}").content)
    (result,) = detail["results"]["items"]
    turns = result["turns"]
    assert [t["turn"] for t in turns] == [1, 2]
    assert [t["user"] for t in turns] == [
        "Switch off the lamp in the kitchen.",
        "And switch on the heater in the hall.",
    ]
    assert [t["status"] for t in turns] == ["failed", "failed"]
    assert turns[0]["tool_calls"] == [] and len(turns[1]["tool_calls"]) == 2
    assert turns[0]["scores"][0]["name"] == "tool_calls" and turns[0]["scores"][0]["passed"] is False


def test_a_single_turn_result_has_no_turns(viewer):
    from tests.apps.factories import make_eval_run

    eval_run = make_eval_run(make_eval_set("plain", 2), [True, False])
    items = json.loads(client_for(viewer).get(f"/api/eval/runs/{eval_run.pk}").content)["results"]["items"]
    assert [item["turns"] for item in items] == [None, None]


# -- capture ----------------------------------------------------------------------------------

WEATHER = textwrap.dedent(
    """
    from evalcore.discovery import TargetSpec
    from evalcore.types import TargetOutput

    async def weather(messages, ctx):
        city = messages[-1]["content"].split()[-1].strip("?")
        with ctx.tracer.span("execute_tool", "get_weather", arguments={"city": city}) as span:
            span.set(result="sunny")
        return TargetOutput(
            output=f"It is sunny in {city}",
            metadata={"tool_calls": [{"name": "get_weather", "arguments": {"city": city}}]},
        )

    weather_bot = TargetSpec(id="weather", target=weather)
    """
)


@pytest.fixture
def chat(tmp_path, settings, member):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "weather.py").write_text(WEATHER)
    settings.EVALSITE_AGENTS_DIR = folder
    session = start_session(user=member, target_id="weather")
    for question in ("weather in Paris", "and in Oslo?", "and in Rome?"):
        chat_turn(session=session, content=question)
    return session


def offered(city: str) -> dict:
    return {
        "final_response": f"It is sunny in {city}",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": city}}],
    }


def test_from_session_captures_the_whole_conversation_as_one_case(member, bank, chat):
    response = post(member, "/api/eval/cases/from-session", {"session_id": chat.pk, "set_id": bank.pk, "tags": ["t"]})
    assert response.status_code == 201, response.content
    case = json.loads(response.content)
    assert case["case_id"] == f"session-{chat.pk}"
    assert case["input"] == {"turns": ["weather in Paris", "and in Oslo?", "and in Rome?"]}
    assert case["expected"] == [offered("Paris"), offered("Oslo"), offered("Rome")]
    assert len(case["metadata"]["run_ids"]) == 3 and case["metadata"]["source"] == "playground"
    assert EvalCase.objects.filter(eval_set=bank).count() == 3


def test_from_session_by_a_turns_trace_id_and_with_edited_turns(member, bank, chat):
    trace_id = Run.objects.order_by("started").last().trace_id
    edited = [{}, offered("Oslo"), {"final_response": "Sunny in Rome."}]
    payload = {"trace_id": trace_id, "set_id": bank.pk, "case_id": "edited", "expected": edited}
    response = post(member, "/api/eval/cases/from-session", payload)
    assert response.status_code == 201, response.content
    case = EvalCase.objects.get(eval_set=bank, case_id="edited")
    assert case.expected == edited and case.metadata["session_id"] == chat.pk
    bad = post(member, "/api/eval/cases/from-session", {**payload, "case_id": "bad", "expected": edited[:2]})
    assert bad.status_code == 422 and json.loads(bad.content)["field"] == "expected"
    assert not EvalCase.objects.filter(case_id="bad").exists()


def test_from_session_refuses_both_ids_neither_and_anothers_session(member, staff, django_user_model, bank, chat):
    both = post(member, "/api/eval/cases/from-session", {"session_id": chat.pk, "trace_id": "x", "set_id": bank.pk})
    assert both.status_code == 422 and json.loads(both.content)["field"] == "session_id"
    neither = post(member, "/api/eval/cases/from-session", {"set_id": bank.pk})
    assert neither.status_code == 422
    missing = post(member, "/api/eval/cases/from-session", {"trace_id": "no-such-trace", "set_id": bank.pk})
    assert missing.status_code == 404 and json.loads(missing.content)["field"] == "trace_id"
    other = django_user_model.objects.create_user("other-member")
    other.groups.set(member.groups.all())
    refused = post(other, "/api/eval/cases/from-session", {"session_id": chat.pk, "set_id": bank.pk})
    assert refused.status_code == 404  # another member's conversation is not theirs to read
    assert post(staff, "/api/eval/cases/from-session", {"session_id": chat.pk, "set_id": bank.pk}).status_code == 201


# -- admin --------------------------------------------------------------------------------------


def admin_form(case: EvalCase, **values: str) -> dict:
    form = {
        "eval_set": case.eval_set_id,
        "case_id": case.case_id,
        "input": json.dumps(case.input),
        "expected": json.dumps(case.expected),
        "has_expected": "on",
        "split": case.split,
        "tags": "[]",
        "metadata": "{}",
        "position": case.position,
    }
    return {**form, **values}


def test_the_admin_edits_a_conversation_case_as_json_with_the_loaders_checks(client, staff, bank):
    from django.urls import reverse

    client.force_login(staff)
    case = EvalCase.objects.filter(eval_set=bank).order_by("position").first()
    assert case is not None
    url = reverse("admin:evals_evalcase_change", args=[case.pk])
    page = client.get(url).content.decode()
    assert "A conversation case:" in page  # how to write one, beside the input
    saved = client.post(url, admin_form(case, input=json.dumps(CONVERSATION), expected=json.dumps(EXPECTED)))
    assert saved.status_code == 302, saved.content.decode()[:2000]
    case.refresh_from_db()
    assert (case.input, case.expected) == (CONVERSATION, EXPECTED)
    shown = client.get(url).content.decode()
    assert "&quot;turns&quot;: [\n    &quot;Switch off the lamp.&quot;,\n" in shown  # as JSON, a turn a line
    for values, words in (
        ({"input": json.dumps({"turns": ["ok", ""]})}, "input.turns[1]: a turn needs the user&#x27;s message"),
        (
            {"expected": json.dumps([{}, {"tool_calls": "set_device"}])},
            "expected[1].tool_calls: &#x27;tool_calls&#x27; must be a list",
        ),
        ({"expected": json.dumps([{}])}, "1 expected turn(s) for 2 user turn(s)"),
        ({"input": '{"turns": ["unclosed"'}, "Enter a valid JSON"),  # bad JSON: the form again, not a 500
        ({"input": '{"turns": ["a", "b"], "initial_state": NaN}'}, "not valid JSON"),
    ):
        answer = client.post(url, admin_form(case, **values))
        assert answer.status_code == 200, values
        assert words in answer.content.decode(), values
        case.refresh_from_db()
        assert (case.input, case.expected) == (CONVERSATION, EXPECTED)


# -- the capture page ---------------------------------------------------------------------------


def test_the_capture_page_offers_every_turn_and_saves_the_edited_conversation(client, member, bank, chat):
    from django.urls import reverse

    client.force_login(member)
    url = reverse("agents:capture", args=[chat.pk])
    page = client.get(url, {"eval_set": bank.pk})
    html = page.content.decode()
    assert page.status_code == 200
    assert json.loads(page.context["form"].initial["input"]) == {
        "turns": ["weather in Paris", "and in Oslo?", "and in Rome?"]
    }
    assert json.loads(page.context["form"].initial["expected"]) == [offered("Paris"), offered("Oslo"), offered("Rome")]
    assert html.count("<td>It is sunny in") == 3 and "get_weather" in html  # the offered turns, shown
    assert "capture only the last turn instead" in html
    # the weather target takes the chat in one call: running the conversation case would error
    assert "is not a conversational target" in html

    form = {
        "eval_set": bank.pk,
        "case_id": "weather-talk",
        "split": "dev",
        "tags": "",
        "input": page.context["form"].initial["input"],
        "then": "save",
    }
    bad = client.post(url, {**form, "expected": json.dumps([{}, {"tool_calls": {"name": "x"}}, {}])})
    assert bad.status_code == 400
    assert "expected[1].tool_calls: &#x27;tool_calls&#x27; must be a list of calls" in bad.content.decode()
    assert not EvalCase.objects.filter(case_id="weather-talk").exists()
    edited = [{}, offered("Oslo"), {"final_response": "Sunny."}]
    saved = client.post(url, {**form, "expected": json.dumps(edited)})
    assert saved.status_code == 302
    case = EvalCase.objects.get(eval_set=bank, case_id="weather-talk")
    assert case.input == {"turns": ["weather in Paris", "and in Oslo?", "and in Rome?"]} and case.expected == edited


def test_the_capture_page_can_take_the_last_turn_only(client, member, bank, chat):
    from django.urls import reverse

    client.force_login(member)
    page = client.get(reverse("agents:capture", args=[chat.pk]), {"capture": "last", "eval_set": bank.pk})
    html = page.content.decode()
    assert json.loads(page.context["form"].initial["input"])[-1] == {"role": "user", "content": "and in Rome?"}
    assert "capture the whole conversation" in html and "conversation-turns" not in html


def test_a_conversational_target_gets_no_warning(client, member, bank, tmp_path, settings):
    from django.urls import reverse

    folder = tmp_path / "talkers"
    folder.mkdir()
    (folder / "talk.py").write_text(
        "from evalcore.discovery import TargetSpec\n\n"
        "def talk(message, session):\n    return f'ok: {message}'\n\n"
        "talker = TargetSpec(id='talker', target=talk)\n"
    )
    settings.EVALSITE_AGENTS_DIR = folder
    session = start_session(user=member, target_id="talker")
    for text in ("one", "two"):
        chat_turn(session=session, content=text)
    client.force_login(member)
    html = client.get(reverse("agents:capture", args=[session.pk]), {"eval_set": bank.pk}).content.decode()
    assert "conversation-turns" in html and "is not a conversational target" not in html


def test_from_session_by_an_ingested_traces_id_captures_that_trace(client, member, viewer):
    from tests.apps.evals.test_trace_capture import ingest, text_set
    from tests.support.genai_traces import ANSWER, QUESTION

    eval_set = text_set()
    run = ingest(client, member)
    response = post(member, "/api/eval/cases/from-session", {"trace_id": run.trace_id, "set_id": eval_set.pk})
    assert response.status_code == 201, response.content
    case = json.loads(response.content)
    assert (case["input"], case["expected"]) == (QUESTION, ANSWER)
    assert case["case_id"] == f"trace-{run.trace_id[:16]}"
    assert (case["metadata"]["source"], case["metadata"]["trace_id"]) == ("trace", run.trace_id)
    assert (
        post(viewer, "/api/eval/cases/from-session", {"trace_id": run.trace_id, "set_id": eval_set.pk}).status_code
        == 403
    )


def test_from_session_refuses_a_trace_that_is_neither_a_playground_turn_nor_ingested(member, bank):
    from tests.apps.factories import make_eval_run

    eval_run = make_eval_run(bank, [True])
    trace_id = eval_run.results.select_related("run").get().run.trace_id
    response = post(member, "/api/eval/cases/from-session", {"trace_id": trace_id, "set_id": bank.pk})
    assert response.status_code == 400 and json.loads(response.content)["field"] == "trace_id"
