"""The trace viewer (issue 26): the span tree as an ARIA treegrid with duration bars, the selected
span's detail (a conversation, tool arguments and results, model, tokens, error text), the case's
input and honest status on top, deep links that work without JS, and a 2,000-span trace in a
bounded number of queries. Our own traces, imported Inspect logs and OTLP-ingested ones alike."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from apps.core.auth import create_api_token
from apps.evals.models import EvalRun
from apps.traces.models import Event, Run
from apps.traces.queries import span_tree
from tests.apps.factories import add_trace, make_eval_run, make_eval_set
from tests.evalcore.test_otel import otlp_json
from tests.support.big_trace import add_big_trace, big_trace_events, make_trace_run
from tests.support.genai_traces import QUESTION, support_spans

pytestmark = pytest.mark.django_db

INSPECT_LOG = Path(__file__).resolve().parents[2] / "fixtures" / "inspect_logs" / "biology_qa.json"


def page(client: Client, run: Run, **params: str) -> str:
    response = client.get(reverse("traces:detail", args=[run.pk]), params)
    assert response.status_code == 200
    return response.content.decode()


def rows(body: str) -> list[str]:
    """The treegrid's rows (their opening tags)."""
    grid = body[body.index('role="treegrid"') : body.index("</table>")]
    return re.findall(r"<tr id=\"span-[^>]*>", grid)


def attr(row: str, name: str) -> str | None:
    found = re.search(rf'{name}="([^"]*)"', row)
    return found.group(1) if found else None


def detail(body: str) -> str:
    return body[body.index('id="span-detail"') :]


def test_the_tree_is_a_treegrid_with_levels_expansion_selection_and_bars(client: Client, viewer: User) -> None:
    run = make_trace_run("small")
    add_big_trace(run, 25)
    client.force_login(viewer)
    body = page(client, run)
    assert 'role="treegrid"' in body and 'aria-label="Spans of trace small"' in body
    tree_rows = rows(body)
    tree = span_tree(run)
    # one row per span and non-chat event, in depth-first order; chat messages live in the detail
    assert [attr(r, "data-span") for r in tree_rows] == [n.span_id for n in tree.rows]
    assert len([n for n in tree.nodes if n.is_span]) == 25 and len(tree_rows) == 25
    root, first_chat = tree_rows[0], tree_rows[1]
    assert attr(root, "aria-level") == "1" and attr(root, "aria-expanded") == "true"
    assert attr(first_chat, "aria-level") == "2" and attr(first_chat, "aria-expanded") is None
    # the selected row (the root by default) is the one focusable row
    assert [attr(r, "aria-selected") for r in tree_rows].count("true") == 1
    assert attr(root, "aria-selected") == "true" and attr(root, "tabindex") == "0"
    assert {attr(r, "tabindex") for r in tree_rows[1:]} == {"-1"}
    # a nested sub-agent is a level deeper than its tool call
    sub = next(r for r in tree_rows if attr(r, "data-span") == "sub-9")
    assert attr(sub, "aria-level") == "3"
    # duration bars are SVG rects sized by attributes (the CSP allows no inline script; no style needed)
    bars = re.findall(r'<rect x="([0-9.]+)" width="([0-9.]+)"', body)
    assert len(bars) == 25 and bars[0][0] == "0.00" and float(bars[0][1]) > 95  # the root spans the trace
    assert all(0 <= float(x) <= 100 and 0 < float(w) <= 100 for x, w in bars)
    # every row is a no-JS link to its deep link
    assert '<a href="?span=chat-0#span-chat-0">gpt-x</a>' in body
    assert "100→12" in body  # the first chat's tokens


def test_status_is_colour_and_word_and_a_failed_tool_is_never_ok(client: Client, viewer: User) -> None:
    run = make_trace_run("fails")
    add_big_trace(run, 250)  # the 50th and the 100th tool calls fail
    client.force_login(viewer)
    body = page(client, run)
    failed = next(r for r in rows(body) if attr(r, "data-span") == "tool-49")
    assert attr(failed, "class") == "st-error"
    cell = body[body.index('id="span-tool-49"') :]
    assert '<td class="tv-state">error</td>' in cell[: cell.index("</tr>")]
    assert "2 spans failed" in body  # tool-49 and tool-99, said beside the run's status


def test_the_selected_spans_detail_renders_server_side_from_the_deep_link(client: Client, viewer: User) -> None:
    run = make_trace_run("deep")
    add_big_trace(run, 120)
    client.force_login(viewer)
    body = page(client, run, span="tool-49")
    tree_rows = rows(body)
    selected = [attr(r, "data-span") for r in tree_rows if attr(r, "aria-selected") == "true"]
    assert selected == ["tool-49"]
    pane = detail(body)
    assert 'data-span="tool-49"' in pane and "get_order" in pane
    assert '<pre class="error" id="span-error">TimeoutError: orders service timed out</pre>' in pane
    assert '<h3>Arguments</h3><pre class="tv-json">{\n  &quot;id&quot;: 42\n}</pre>' in pane
    assert "<h3>Result</h3><pre>shipped</pre>" in pane  # the failed call's tool message, shown once
    assert pane.count("shipped") == 1
    assert 'href="?span=root#span-root"' in pane  # the span's path, root first
    # an unknown span id says so and falls back to the first span
    missing = page(client, run, span="nope")
    assert "This trace has no span" in missing and 'aria-selected="true" tabindex="0"' in rows(missing)[0]


def test_the_detail_partial_is_what_the_viewers_js_fetches(client: Client, viewer: User) -> None:
    run = make_trace_run("partial")
    add_big_trace(run, 10)
    client.force_login(viewer)
    response = client.get(
        reverse("traces:detail", args=[run.pk]),
        {"span": "chat-1"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="span-detail",
    )
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body and 'role="treegrid"' not in body
    assert 'id="span-detail-title" data-span="chat-1"' in body


def test_a_chat_span_shows_its_prompt_and_its_answer_with_tool_calls(client: Client, viewer: User) -> None:
    run = make_trace_run("chat")
    add_big_trace(run, 6)
    client.force_login(viewer)
    pane = detail(page(client, run, span="chat-1"))
    sent = pane[pane.index('id="span-sent"') : pane.index("</ol>")]
    roles = re.findall(r'<div class="tv-role"><span class="tv-who">([a-z]+)', sent)
    # what the model had seen: system, user, its first answer (a tool call), the tool's result
    assert roles == ["system", "user", "assistant", "tool"]
    assert "Where is order 42?" in sent and "shipped" in sent
    said = pane[pane.index('id="span-said"') :]
    assert "calls <b>get_order</b>" in said and "call-1" in said
    assert '<pre class="tv-json">{\n  &quot;id&quot;: 42\n}</pre>' in said  # arguments pretty-printed
    assert '<dt>model</dt><dd class="mono">gpt-x</dd>' in pane and "101 in · 12 out" in pane
    assert "<dt>latency</dt><dd>3 ms</dd>" in pane


def test_a_long_transcript_shows_its_ends_and_says_how_many_are_left_out(client: Client, viewer: User) -> None:
    run = make_trace_run("long")
    add_big_trace(run, 200)
    client.force_login(viewer)
    pane = detail(page(client, run))  # the root agent: its whole transcript
    assert pane.count('class="tv-msg') == 40 and "messages not shown" in pane


def test_the_case_input_and_honest_status_come_from_the_eval_result(client: Client, viewer: User) -> None:
    eval_set = make_eval_set("honest", 2)
    eval_run = make_eval_run(eval_set, ["failed", "errored"])
    failed, errored = eval_run.results.order_by("case_id")
    for result in (failed, errored):
        add_trace(result.run)
    assert failed.run.status == "ok"  # the target answered: the case still failed
    client.force_login(viewer)
    body = page(client, failed.run)
    status = body[body.index('id="trace-status"') :]
    assert status[: status.index("</span></h1>")].endswith("✗</span> failed")
    assert "case verdict in eval run" in body
    assert "what is 0 + 0?" in body[body.index('id="trace-input"') :]
    body = page(client, errored.run)
    assert re.search(r'id="trace-status"[^>]*><span aria-hidden="true">⚠</span> errored', body)


def test_a_run_without_an_eval_result_shows_its_own_status(client: Client, viewer: User) -> None:
    run = make_trace_run("crashed", status="error")
    run.error = {"type": "ValueError", "message": "boom"}
    run.save()
    add_trace(run)
    client.force_login(viewer)
    body = page(client, run)
    assert re.search(r'id="trace-status"[^>]*><span aria-hidden="true">⚠</span> error', body)
    assert "ValueError: boom" in body


def test_values_from_the_trace_are_escaped_in_rows_and_detail(client: Client, viewer: User) -> None:
    run = make_trace_run("hostile")
    evil = '<script>alert("x")</script>'
    Event.objects.create(
        run=run,
        trace_id=run.trace_id,
        seq=0,
        ts=run.started,
        type="span_begin",
        name=evil,
        payload={"span_id": '"><b>', "parent_span_id": None, "kind": evil},
    )
    Event.objects.create(
        run=run,
        trace_id=run.trace_id,
        seq=1,
        ts=run.started,
        type="span_end",
        name=evil,
        payload={"span_id": '"><b>', "kind": evil, "elapsed_ms": "slow", "tokens_in": evil, "status": evil},
    )
    client.force_login(viewer)
    body = page(client, run)
    assert evil not in body and '"><b>' not in body
    row = rows(body)[0]
    assert attr(row, "class") == "st-error"  # an unknown status is not ok


def test_an_imported_inspect_log_reads_as_a_conversation(client: Client, viewer: User) -> None:
    call_command("import_run", str(INSPECT_LOG), "--add-cases")
    eval_run = EvalRun.objects.get()
    result = eval_run.results.order_by("case_id").first()
    assert result is not None
    client.force_login(viewer)
    tree = span_tree(result.run)
    chat = next(n for n in tree.nodes if n.kind == "chat")
    body = page(client, result.run, span=chat.span_id)
    pane = detail(body)
    assert 'id="span-sent"' in pane and '<span class="tv-who">user' in pane
    assert 'id="span-said"' in pane and '<span class="tv-who">assistant' in pane
    assert str(result.status) in body[body.index('id="trace-status"') :][:200]


def test_an_otlp_ingested_trace_shows_its_messages_and_tool_call(client: Client, member: User) -> None:
    token = create_api_token(user=member, name="prod")[1]
    body = otlp_json(encode_spans(support_spans(fail_tool=True)).SerializeToString())
    response = client.post(
        "/api/otlp/v1/traces", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 200
    run = Run.objects.get()
    tree = span_tree(run)
    chat = next(n for n in tree.nodes if n.kind == "chat")
    tool = next(n for n in tree.nodes if n.kind == "execute_tool")
    client.force_login(member)
    assert QUESTION in page(client, run).split('id="trace-input"')[1][:2000]
    pane = detail(page(client, run, span=chat.span_id))
    assert 'id="span-sent"' in pane and QUESTION in pane
    tool_pane = detail(page(client, run, span=tool.span_id))
    assert "TimeoutError: orders service timed out" in tool_pane and "<h3>Arguments</h3>" in tool_pane
    tool_row = next(r for r in rows(page(client, run)) if attr(r, "data-span") == tool.span_id)
    assert attr(tool_row, "class") == "st-error"


def test_a_2000_span_trace_renders_in_a_bounded_number_of_queries(
    client: Client, viewer: User, django_assert_max_num_queries: Any
) -> None:
    run = make_trace_run("big")
    n_events = add_big_trace(run, 2000)
    assert n_events == len(big_trace_events(2000))
    client.force_login(viewer)
    with django_assert_max_num_queries(8):
        body = page(client, run, span="tool-700")
    assert len(rows(body)) == 2000
    assert "Only the first" not in body  # nothing truncated
    with django_assert_max_num_queries(6):
        client.get(
            reverse("traces:detail", args=[run.pk]),
            {"span": "chat-3"},
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET="span-detail",
        )
