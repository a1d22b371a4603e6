"""Playground: each turn a traced run; capture a conversation as an eval case."""

from __future__ import annotations

import json
import textwrap

import pytest
from django.urls import reverse

from apps.agents.models import Message, Session
from apps.agents.services import chat_turn, start_session
from apps.evals.models import EvalCase
from apps.evals.sets.capture import DuplicateCaseError, capture_session_as_case, captured_defaults
from apps.traces.models import Event, Run
from tests.apps.factories import make_eval_set

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def agents_dir(tmp_path, settings):
    """A target that looks up the weather with a traced tool call, then answers."""
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "weather.py").write_text(
        textwrap.dedent(
            """
            from evalcore.discovery import TargetSpec
            from evalcore.types import TargetOutput

            async def weather(messages, ctx):
                city = messages[-1]["content"].split()[-1].strip("?")
                args = {"city": city}
                with ctx.tracer.span("execute_tool", "get_weather", arguments=args) as span:
                    span.set(result="sunny")
                turns = sum(1 for m in messages if m["role"] == "user")
                return TargetOutput(
                    output=f"It is sunny in {city} (turn {turns})",
                    metadata={"tool_calls": [{"name": "get_weather", "arguments": args}]},
                )

            weather_bot = TargetSpec(id="weather", target=weather)
            """
        )
    )
    settings.EVALSITE_AGENTS_DIR = folder
    return folder


def test_chat_turn_is_a_traced_run_with_the_whole_conversation(member, agents_dir):
    session = start_session(user=member, target_id="weather")
    chat_turn(session=session, content="weather in Paris")
    turn = chat_turn(session=session, content="and in Oslo?")
    assert turn.reply.content == "It is sunny in Oslo (turn 2)"
    assert turn.reply.tool_calls == [{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    assert turn.run.target_id == "weather" and turn.run.status == "ok"
    kinds = [e.payload.get("kind") for e in Event.objects.filter(run=turn.run, type="span_end")]
    assert "execute_tool" in kinds
    assert Run.objects.count() == 2
    assert [m.role for m in session.messages.order_by("id")] == ["user", "assistant", "user", "assistant"]


def test_capture_creates_case_with_final_answer_and_tool_trajectory(member, agents_dir):
    session = start_session(user=member, target_id="weather")
    chat_turn(session=session, content="weather in Paris")
    turn = chat_turn(session=session, content="and in Oslo?")
    eval_set = make_eval_set("captured", 2)
    EvalCase.objects.filter(eval_set=eval_set).update(expected={"answer": "x", "tool_calls": []})
    defaults = captured_defaults(session, eval_set)
    case = capture_session_as_case(
        session=session,
        eval_set=eval_set,
        split="dev",
        tags=["weather"],
        case_id="oslo",
        input=defaults["input"],
        expected=defaults["expected"],
        user=member,
    )
    # two turns: one conversation case, each turn's answer and tool calls offered as its expected value
    # (per turn, not in the shape of the set's single-turn cases)
    assert case.input == {"turns": ["weather in Paris", "and in Oslo?"]}
    assert case.expected == [
        {
            "final_response": "It is sunny in Paris (turn 1)",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
        },
        {
            "final_response": "It is sunny in Oslo (turn 2)",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
        },
    ]
    assert case.metadata["session_id"] == session.pk and turn.run.run_id in case.metadata["run_ids"]
    assert case.position == 2 and case.split == "dev" and case.tags == ["weather"]
    with pytest.raises(DuplicateCaseError):
        capture_session_as_case(
            session=session,
            eval_set=eval_set,
            split="dev",
            tags=[],
            case_id="oslo",
            input=[],
            expected=None,
            user=member,
        )


def test_playground_pages_and_htmx_send(client, member, agents_dir):
    client.force_login(member)
    page = client.get(reverse("agents:playground"))
    assert page.status_code == 200 and b"weather" in page.content
    assert client.get(reverse("agents:playground"), **HX).status_code == 200
    created = client.post(reverse("agents:new_session"), {"target": "weather"})
    session = Session.objects.get(user=member)
    assert created["Location"] == reverse("agents:session", args=[session.pk])
    sent = client.post(reverse("agents:send", args=[session.pk]), {"content": "weather in Rome"}, **HX)
    assert sent.status_code == 200
    text = sent.content.decode()
    assert "It is sunny in Rome" in text and "<html" not in text
    run = Message.objects.get(session=session, role="assistant").run
    assert reverse("traces:detail", args=[run.pk]) in text
    whole = client.get(reverse("agents:session", args=[session.pk]))
    assert b"Add this conversation as an eval case" in whole.content
    assert client.get(reverse("agents:session", args=[session.pk]), HTTP_HX_TARGET="chat", **HX).status_code == 200
    # a plain (non-htmx) post redirects back to the chat
    assert client.post(reverse("agents:send", args=[session.pk]), {"content": "in Lima"}).status_code == 302


def test_capture_form_prefills_validates_json_and_reports_duplicates(client, member, agents_dir):
    client.force_login(member)
    session = start_session(user=member, target_id="weather")
    chat_turn(session=session, content="weather in Paris")
    eval_set = make_eval_set("cap", 1)
    url = reverse("agents:capture", args=[session.pk])
    form = client.get(url).content.decode()
    # the set's cases expect a string: the last answer is pre-filled as a JSON string
    assert "&quot;It is sunny in Paris (turn 1)&quot;" in form and "cases expect a string" in form
    bad = client.post(url, {"eval_set": eval_set.pk, "case_id": "p1", "split": "dev", "input": "[", "expected": "{}"})
    assert bad.status_code == 400 and "not valid JSON" in bad.content.decode()
    good = {
        "eval_set": eval_set.pk,
        "case_id": "p1",
        "split": "train",
        "tags": "weather, captured",
        "input": json.dumps([{"role": "user", "content": "weather in Paris"}]),
        "expected": json.dumps("sunny"),
    }
    saved = client.post(url, good)
    assert saved.status_code == 302
    case = EvalCase.objects.get(eval_set=eval_set, case_id="p1")
    assert case.tags == ["weather", "captured"] and case.expected == "sunny"
    again = client.post(url, good)
    assert again.status_code == 400 and "already has a case" in again.content.decode()


def test_playground_access(client, viewer, member, django_user_model, agents_dir):
    session = start_session(user=member, target_id="weather")
    assert client.get(reverse("agents:playground")).status_code == 302  # anonymous -> login
    client.force_login(viewer)
    assert client.get(reverse("agents:playground")).status_code == 403
    assert client.post(reverse("agents:send", args=[session.pk]), {"content": "hi"}).status_code == 403
    other = django_user_model.objects.create_user("other-member")
    from django.contrib.auth.models import Group

    other.groups.add(Group.objects.get(name="member"))
    client.force_login(other)
    assert client.get(reverse("agents:session", args=[session.pk])).status_code == 404  # not theirs
    assert client.get(reverse("agents:session", args=[999999])).status_code == 404
    assert client.get(reverse("agents:send", args=[session.pk])).status_code == 405
    assert client.get(reverse("agents:new_session")).status_code == 405
