"""The playground sends each target the input shape its eval set uses (text, JSON or chat)."""

from __future__ import annotations

import textwrap

import pytest
from django.urls import reverse

from apps.agents import services
from apps.agents.models import Session
from apps.evals.sets.capture import captured_defaults

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agents_dir(tmp_path, settings):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "t.py").write_text(
        textwrap.dedent(
            """
            from evalcore.discovery import TargetSpec
            def shape(x):
                return type(x).__name__ + ":" + (x["q"] if isinstance(x, dict) else str(x)[:40])
            node = TargetSpec(id="shape", target=shape, input_kind="text")
            """
        )
    )
    settings.EVALSITE_AGENTS_DIR = folder
    return folder


@pytest.mark.parametrize(
    ("mode", "message", "reply"),
    [("text", "how many?", "str:how many?"), ("json", '{"q": "capital?"}', "dict:capital?")],
)
def test_text_and_json_modes_reach_the_target_as_their_shape(agents_dir, member, mode, message, reply):
    session = services.start_session(user=member, target_id="shape", input_mode=mode)
    turn = services.chat_turn(session=session, content=message)
    assert turn.reply.content == reply
    captured = captured_defaults(session)
    assert captured["input"] == (message if mode == "text" else {"q": "capital?"})


def test_auto_mode_follows_the_declared_input_kind_and_bad_json_is_a_form_error(agents_dir, client, member):
    client.force_login(member)
    response = client.post(reverse("agents:new_session"), {"target": "shape", "variant": "", "input_mode": "auto"})
    session = Session.objects.get()
    assert response.status_code == 302 and session.input_mode == "text"
    session.input_mode = "json"
    session.save()
    bad = client.post(reverse("agents:send", args=[session.pk]), {"content": "{not json"}, HTTP_HX_REQUEST="true")
    assert bad.status_code == 400 and b"line 1 column 2" in bad.content
    assert not session.messages.exists()
