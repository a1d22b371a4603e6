"""Stored text never holds a NUL character (U+0000): PostgreSQL cannot store one (the write fails,
and a result writer's whole batch with it), so the model fields and the bulk writer store U+FFFD
in its place, on every backend (apps.core.storable)."""

from __future__ import annotations

import json

import pytest

from apps.agents.models import Message, Session
from apps.core.bulk import clean_text, json_text
from apps.core.storable import NUL_REPLACEMENT as R

pytestmark = pytest.mark.django_db


def test_the_model_fields_store_the_replacement_character():
    session = Session.objects.create(target_id="t", title="a\x00title")
    message = Message.objects.create(
        session=session, role="assistant", content="out\x00put", tool_calls=[{"na\x00me": "x\x00", "n": 1}]
    )
    message.refresh_from_db()
    session.refresh_from_db()
    assert (session.title, message.content) == (f"a{R}title", f"out{R}put")
    assert message.tool_calls == [{f"na{R}me": f"x{R}", "n": 1}]


def test_the_bulk_writer_stores_the_replacement_character_and_leaves_other_text_alone():
    assert json.loads(json_text({"out": ["a\x00b"]}, [])) == {"out": [f"a{R}b"]}
    assert json.loads(json_text({"code": "\\u0000 spelled out"}, [])) == {"code": "\\u0000 spelled out"}
    assert clean_text("x\x00y", []) == f"x{R}y" and clean_text("plain", []) == "plain"
