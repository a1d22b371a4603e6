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


def test_the_result_writers_run_and_event_rows_hold_no_nul_character():
    """A target raising ``ValueError("bad\\x00value")``, reporting a model or a finish reason with a
    NUL, or a span attribute holding one ended the whole run on PostgreSQL (the bulk writer's
    rows kept the NUL in the event payload, the model and the finish reason)."""
    from apps.core.bulk import encoders
    from apps.traces.rows import event_values, finished_run_values
    from evalcore.tracing import TraceEvent
    from evalcore.types import ErrorInfo, RunRecord

    enc = encoders()
    event = TraceEvent(
        trace_id="t", run_id="r", seq=0, ts=1.0, type="span_end", name="to\x00ol", payload={"a": "b\x00"}
    )
    row = event_values(1, event, enc)
    assert "\x00" not in repr(row) and "\\u0000" not in row[6]  # name, payload
    assert json.loads(row[6]) == {"a": f"b{R}"} and row[5] == f"to{R}ol"
    record = RunRecord(
        case_id="c",
        run_id="r",
        trace_id="t",
        output={"x": "y\x00"},
        error=ErrorInfo(type="ValueError", message="bad\x00value"),
        model="m\x00",
        metadata={"finish_reason": "st\x00op", "k": "v\x00"},
    )
    values = finished_run_values(record, None, "target", enc)
    assert not any(isinstance(v, str) and ("\x00" in v or "\\u0000" in v) for v in values), values
    assert values[5] == f"st{R}op" and values[7] == f"m{R}"
    assert json.loads(values[12])["message"] == f"bad{R}value"


# -- lone UTF-16 surrogates: text Python holds and UTF-8 cannot encode, so no database stores it --

SURROGATE = "\ud83d"  # the first half of 😀 (U+1F600), cut from its pair


def test_a_surrogate_code_point_is_stored_as_the_replacement_character():
    """A lone surrogate failed the result writer on SQLite too (the driver's UTF-8 encoding raises
    ``UnicodeEncodeError``): every stored string has each surrogate replaced by U+FFFD, one per
    code point, and text without one is returned as it is (the same object)."""
    from apps.core.storable import storable, storable_text, utf8_encodable

    assert storable_text(f"half {SURROGATE} emoji") == f"half {R} emoji"
    assert storable_text("\udc80\x00é\ud83d\ude00") == f"{R}{R}é{R}{R}"  # surrogateescape's byte, a NUL, a split pair
    plain = "café 😀 今天"
    assert storable_text(plain) is plain and utf8_encodable(plain) and not utf8_encodable(SURROGATE)
    assert storable({f"k{SURROGATE}": [f"v{SURROGATE}", 1, None]}) == {f"k{R}": [f"v{R}", 1, None]}


def test_the_bulk_writer_and_the_model_fields_store_no_surrogate():
    from apps.core.bulk import clean_text, json_text

    text = json_text({"out": [f"a{SURROGATE}b"], f"k{SURROGATE}": 1}, [])
    assert text is not None and json.loads(text) == {"out": [f"a{R}b"], f"k{R}": 1}
    text.encode("utf-8")  # what the driver does with it
    assert clean_text(f"x{SURROGATE}y", []) == f"x{R}y"
    session = Session.objects.create(target_id="t", title=f"a{SURROGATE}")
    message = Message.objects.create(
        session=session, role="assistant", content=f"c{SURROGATE}", tool_calls=[{"name": f"n{SURROGATE}"}]
    )
    message.refresh_from_db()
    session.refresh_from_db()
    assert (session.title, message.content, message.tool_calls) == (f"a{R}", f"c{R}", [{"name": f"n{R}"}])


def test_the_result_writers_run_and_event_rows_hold_no_surrogate():
    """Outputs, errors, models, finish reasons, metadata and span attributes (names, keys, values)."""
    from apps.core.bulk import encoders
    from apps.traces.rows import event_values, finished_run_values
    from evalcore.tracing import TraceEvent
    from evalcore.types import ErrorInfo, RunRecord

    enc = encoders()
    event = TraceEvent(
        trace_id="t",
        run_id="r",
        seq=0,
        ts=1.0,
        type="span_end",
        name=f"to{SURROGATE}ol",
        payload={f"a{SURROGATE}": f"b{SURROGATE}"},
    )
    row = event_values(1, event, enc)
    repr(row).encode("utf-8")
    assert json.loads(row[6]) == {f"a{R}": f"b{R}"} and row[5] == f"to{R}ol" and R in row[7]
    assert row[8] == len(row[7].encode())  # the payload's size, as stored
    record = RunRecord(
        case_id="c",
        run_id="r",
        trace_id="t",
        output={"x": f"y{SURROGATE}"},
        error=ErrorInfo(type="ValueError", message=f"bad{SURROGATE}value"),
        model=f"m{SURROGATE}",
        metadata={"finish_reason": f"st{SURROGATE}op", "k": f"v{SURROGATE}"},
    )
    values = finished_run_values(record, None, "target", enc)
    for value in values:
        if isinstance(value, str):
            value.encode("utf-8")
    assert values[5] == f"st{R}op" and values[7] == f"m{R}"
    assert json.loads(values[12])["message"] == f"bad{R}value"
    assert json.loads(values[6]) == {"x": f"y{R}"}
