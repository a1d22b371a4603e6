"""rs3-17 in the playground: a turn's answer and the typed message are stored as they were (they
are fed back to the target on the next turn and can be captured into a set); a turn's error text
is redacted (an endpoint may echo a key)."""

from __future__ import annotations

import textwrap

import pytest

from apps.agents.models import Message
from apps.agents.services import chat_turn, start_session
from evalcore.redact import REDACTED

pytestmark = pytest.mark.django_db

KEY = "sk-live-0123456789abcdefXYZ"
AGENTS = f"""
from evalcore.discovery import target

@target(id="parrot", scorers=["exact_match"])
def parrot(text):
    if text == "fail":
        raise PermissionError("endpoint refused {KEY}")
    return "you said: " + text
"""


@pytest.fixture
def agents_dir(tmp_path, settings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("EVALSITE_MODEL_BASE_URL", "http://evalsite:pw12345678@127.0.0.1:9/v1")
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "parrot_agent.py").write_text(textwrap.dedent(AGENTS))
    settings.EVALSITE_AGENTS_DIR = folder
    return folder


def test_a_playground_answer_is_stored_as_produced_and_an_error_is_redacted(member, agents_dir):
    session = start_session(user=member, target_id="parrot", input_mode="text")
    said = f"evalsite uses pw12345678 and {KEY}"
    turn = chat_turn(session=session, content=said)
    assert turn.reply.content == f"you said: {said}"
    assert Message.objects.get(pk=turn.reply.pk).content == f"you said: {said}"
    assert Message.objects.get(pk=turn.user_message.pk).content == said
    failed = chat_turn(session=session, content="fail")
    stored = Message.objects.get(pk=failed.reply.pk).content
    assert KEY not in stored and stored == f"[error] PermissionError: endpoint refused {REDACTED}"
