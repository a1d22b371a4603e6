"""Fixtures of the security tests: a second member, a private playground chat, an eval run."""

from __future__ import annotations

import textwrap

import pytest

from apps.agents.services import chat_turn, start_session

SECRET = "SECRET-PRIVATE-NOTE-123"
"""Typed into a member's playground chat; no one but its owner and staff may ever see it."""


@pytest.fixture
def member2(django_user_model):
    """Another member (reads, runs, playground): a teammate, not the chat's owner."""
    from django.contrib.auth.models import Group

    from tests.conftest import ensure_roles

    ensure_roles()
    user = django_user_model.objects.create_user("member2", password="member2-pass-123")
    user.groups.add(Group.objects.get(name="member"))
    return user


@pytest.fixture
def echo_agents(tmp_path, settings):
    """An agents folder with ``echo`` (repeats the last message, with a traced tool call)."""
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "echo.py").write_text(
        textwrap.dedent(
            """
            from evalcore.discovery import TargetSpec

            async def echo(messages, ctx):
                text = messages[-1]["content"]
                with ctx.tracer.span("execute_tool", "remember", arguments={"note": text}) as span:
                    span.set(result=text)
                return "you said: " + text

            spec = TargetSpec(id="echo", target=echo)
            """
        )
    )
    settings.EVALSITE_AGENTS_DIR = folder
    return folder


@pytest.fixture
def private_chat(member, echo_agents):
    """``member``'s playground session holding :data:`SECRET`; returns ``(session, run)``."""
    session = start_session(user=member, target_id="echo")
    turn = chat_turn(session=session, content=f"my private note {SECRET}")
    return session, turn.run
