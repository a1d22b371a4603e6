"""The traces app: storing a run with its events, the span tree read back, who may read a run,
and credentials redacted in every stored column."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps.traces.models import Event, Run
from apps.traces.queries import span_tree
from apps.traces.services import save_run
from evalcore.tracing import TraceEvent
from evalcore.types import ErrorInfo, RunRecord

pytestmark = pytest.mark.django_db

T = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC
SECRET = "sk-test-abcdefgh12345678"


def event(seq: int, type_: str, name: str, payload: dict, dt_ms: float = 0.0, run_id: str = "r1") -> TraceEvent:
    return TraceEvent(
        trace_id=f"t-{run_id}", run_id=run_id, seq=seq, ts=T + dt_ms / 1000, type=type_, name=name, payload=payload
    )


def agent_events(run_id: str = "r1") -> list[TraceEvent]:
    """agent > (chat, search tool (> a log message), judge chat), ended with a finish reason."""
    rows = [
        ("span_begin", "agent", {"span_id": "a", "parent_span_id": None, "kind": "invoke_agent"}, 0),
        ("span_begin", "gpt-x", {"span_id": "c", "parent_span_id": "a", "kind": "chat"}, 1),
        (
            "span_end",
            "gpt-x",
            {
                "span_id": "c",
                "parent_span_id": "a",
                "kind": "chat",
                "elapsed_ms": 40.0,
                "tokens_in": 100,
                "tokens_out": 20,
                "status": "ok",
            },
            41,
        ),
        (
            "span_begin",
            "search",
            {"span_id": "s", "parent_span_id": "a", "kind": "execute_tool", "arguments": {"query": "paris"}},
            42,
        ),
        ("message", "log", {"parent_span_id": "s", "text": "looking up"}, 43),
        (
            "span_end",
            "search",
            {
                "span_id": "s",
                "parent_span_id": "a",
                "kind": "execute_tool",
                "elapsed_ms": 5.0,
                "status": "error",
                "error": {"type": "Timeout", "message": "slow"},
            },
            47,
        ),
        ("span_begin", "judge", {"span_id": "j", "parent_span_id": "a", "kind": "chat", "role": "judge"}, 48),
        (
            "span_end",
            "judge",
            {
                "span_id": "j",
                "parent_span_id": "a",
                "kind": "chat",
                "elapsed_ms": 2.0,
                "tokens_in": 999,
                "tokens_out": 999,
            },
            50,
        ),
        (
            "span_end",
            "agent",
            {
                "span_id": "a",
                "parent_span_id": None,
                "kind": "invoke_agent",
                "elapsed_ms": 60.0,
                "finish_reason": "length",
            },
            60,
        ),
    ]
    return [event(i, ty, name, payload, dt, run_id) for i, (ty, name, payload, dt) in enumerate(rows)]


def record(run_id: str = "r1", **extra) -> RunRecord:
    fields = {"output": "Paris", "started_at": T, "elapsed_ms": 61.23456, "model": "gpt-x", **extra}
    return RunRecord(case_id="c1", run_id=run_id, trace_id=f"t-{run_id}", **fields)


def test_save_run_folds_the_events_into_the_run_row():
    run = save_run(record(), agent_events(), target_id="agent-1")
    run.refresh_from_db()
    assert (run.run_id, run.trace_id, run.target_id) == ("r1", "t-r1", "agent-1")
    assert run.status == "ok" and run.final_answer == "Paris" and run.model == "gpt-x"
    assert run.elapsed_ms == 61.235 and run.started.timestamp() == T
    # the judge's chat is scoring, not the target's work: its tokens and call are left out
    assert (run.tokens_in, run.tokens_out) == (100, 20)
    assert run.step_metrics == {
        "llm_calls": 1,
        "tool_calls": 1,
        "steps": [
            {"kind": "chat", "name": "gpt-x", "elapsed_ms": 40.0},
            {"kind": "execute_tool", "name": "search", "elapsed_ms": 5.0},
        ],
    }
    assert run.finish_reason == "length"  # from the root span's end
    assert run.private is False and run.owner is None and run.error is None


def test_save_run_writes_one_event_row_per_event_with_preview_and_size():
    events = agent_events()
    run = save_run(record(), events, target_id="agent-1")
    rows = list(Event.objects.filter(run=run).order_by("seq"))
    assert [(e.seq, e.type, e.name) for e in rows] == [(e.seq, e.type, e.name) for e in events]
    assert [e.ts.timestamp() for e in rows] == pytest.approx([e.ts for e in events])
    tool_begin = rows[3]
    assert tool_begin.payload == events[3].payload and tool_begin.trace_id == "t-r1"
    assert (
        tool_begin.preview
        == '{"span_id": "s", "parent_span_id": "a", "kind": "execute_tool", "arguments": {"query": "paris"}}'
    )
    assert tool_begin.payload_bytes == len(tool_begin.preview.encode())


def test_a_long_payload_preview_is_cut_with_an_ellipsis_but_the_payload_is_whole():
    big = {"text": "é" * 1000}
    run = save_run(record(), [event(0, "message", "log", big)], target_id="t")
    row = Event.objects.get(run=run)
    assert len(row.preview) == 300 and row.preview.endswith("…") and row.preview.startswith('{"text": "ééé')
    assert row.payload == big and row.payload_bytes == len('{"text": ""}') + 2000


def test_run_status_and_finish_reason_follow_the_error():
    timed_out = save_run(record("r-to", error=ErrorInfo("Timeout", "took 30 s")), [], target_id="t")
    crashed = save_run(record("r-err", error=ErrorInfo("ValueError", "boom")), [], target_id="t")
    fine = save_run(
        record("r-ok", tokens_in=7, tokens_out=3, metadata={"finish_reason": "tool_calls"}),
        agent_events("r-ok"),
        target_id="t",
    )
    assert (timed_out.status, timed_out.finish_reason) == ("timeout", "error")
    assert (crashed.status, crashed.finish_reason) == ("error", "error")
    assert crashed.error == {"type": "ValueError", "message": "boom"}
    # the record's own tokens and finish reason win over the events'
    assert (fine.status, fine.finish_reason, fine.tokens_in, fine.tokens_out) == ("ok", "tool_calls", 7, 3)
    bare = save_run(record("r-bare"), [], target_id="t")
    assert (bare.finish_reason, bare.tokens_in, bare.tokens_out) == ("stop", None, None)
    assert bare.step_metrics == {"llm_calls": 0, "tool_calls": 0, "steps": []}


def test_span_tree_nests_spans_and_events_with_offsets_and_timings():
    run = save_run(record(), agent_events(), target_id="t")
    tree = span_tree(run)
    assert [(n.span_id, n.kind, n.depth) for n in tree.nodes] == [
        ("a", "invoke_agent", 0),
        ("c", "chat", 1),
        ("s", "execute_tool", 1),
        ("event-4", "message", 2),
        ("j", "chat", 1),
    ]
    agent, chat, tool, message, _judge = tree.nodes
    assert (agent.elapsed_ms, agent.status, agent.attributes) == (60.0, "ok", {"finish_reason": "length"})
    assert (chat.offset_ms, chat.elapsed_ms, chat.tokens_in, chat.tokens_out) == (1.0, 40.0, 100, 20)
    assert tool.attributes == {"arguments": {"query": "paris"}}
    assert (tool.status, tool.error) == ("error", {"type": "Timeout", "message": "slow"})
    assert (message.status, message.attributes, message.is_span) == ("", {"text": "looking up"}, False)
    assert tool.is_span and tree.total_ms == 60.0 and tree.n_events == 9 and tree.truncated is False


def test_span_tree_keeps_orphans_and_open_spans_and_truncates_long_traces():
    events = [
        event(0, "span_end", "lost", {"span_id": "x", "parent_span_id": "gone", "kind": "node", "elapsed_ms": 3.0}),
        event(1, "span_begin", "open", {"span_id": "o", "parent_span_id": None, "kind": "node"}, 10),
        event(2, "error", "crash", {"parent_span_id": "o", "message": "it broke"}, 250),
    ]
    run = save_run(record(), events, target_id="t")
    tree = span_tree(run)
    assert [(n.name, n.depth, n.status) for n in tree.nodes] == [
        ("lost", 0, "ok"),
        ("open", 0, "open"),
        ("crash", 1, ""),
    ]
    assert tree.nodes[2].error == "it broke" and tree.total_ms == 250.0
    cut = span_tree(run, limit=2)
    assert cut.truncated is True and cut.n_events == 2 and [n.name for n in cut.nodes] == ["lost", "open"]


def test_secrets_are_redacted_in_errors_and_metadata_but_never_in_what_the_target_produced(monkeypatch):
    monkeypatch.setenv("EVALSITE_TEST_API_KEY", SECRET)
    said = f"Bearer {SECRET} and http://bob:pw123456@host/v1"
    leaky = [
        event(0, "message", f"call {SECRET}", {"text": said}),
        event(1, "error", "crash", {"message": f"refused {SECRET} at http://bob:pw123456@host/v1"}),
        event(2, "span_end", "tool", {"span_id": "s1", "arguments": said, "error": {"message": SECRET}}),
    ]
    run = save_run(
        record(
            output=said,
            error=ErrorInfo("AuthError", f"Incorrect API key provided: {SECRET}"),
            metadata={"url": "https://user:hunter2hunter2@llm.local/v1"},
        ),
        leaky,
        target_id="t",
    )
    stored_run = Run.objects.filter(pk=run.pk).values("error", "metadata", "final_answer").get()
    message, error, span = Event.objects.filter(run=run).order_by("seq").values("name", "payload", "preview")
    text = repr([stored_run["error"], stored_run["metadata"], message["name"], error, span["payload"]["error"]])
    assert SECRET not in text and "hunter2hunter2" not in text and "pw123456" not in text
    assert stored_run["error"]["message"] == "Incorrect API key provided: [redacted]"
    assert stored_run["metadata"]["url"] == "https://llm.local/v1"
    assert error["payload"]["message"] == "refused [redacted] at http://host/v1" and SECRET not in error["preview"]
    # what the target produced (output, messages, a call's arguments) is kept as produced (rs3-17)
    assert stored_run["final_answer"] == said and message["payload"]["text"] == said and SECRET in message["preview"]
    assert span["payload"]["arguments"] == said and span["payload"]["error"] == {"message": "[redacted]"}


def test_nan_in_a_payload_is_refused_naming_the_field_and_nothing_is_written():
    with pytest.raises(ValueError, match=r"Event.payload\['score'\]: nan is not valid JSON"):
        save_run(record(), [event(0, "message", "m", {"score": float("nan")})], target_id="t")
    assert not Run.objects.exists() and not Event.objects.exists()


# -- who may read a run: through the trace pages -----------------------------------------------


@pytest.fixture
def runs_of_two_people(django_user_model, member):
    other = django_user_model.objects.create_user("alice", password="alice-pass-123")
    public = save_run(record("team"), [], target_id="eval")
    mine = save_run(record("mine"), [], target_id="play", private=True, owner=member)
    theirs = save_run(record("theirs"), [], target_id="play", private=True, owner=other)
    orphan = save_run(record("orphan"), [], target_id="play", private=True, owner=None)
    return {"public": public, "mine": mine, "theirs": theirs, "orphan": orphan}


def listed_run_ids(client) -> set[str]:
    body = client.get(reverse("traces:list")).content.decode()
    return set(re.findall(r'href="/traces/(\d+)/"', body))


def test_a_member_reads_team_runs_and_own_private_runs_only(client, member, runs_of_two_people):
    runs = runs_of_two_people
    client.force_login(member)
    assert listed_run_ids(client) == {str(runs["public"].pk), str(runs["mine"].pk)}
    for name, status in (("public", 200), ("mine", 200), ("theirs", 404), ("orphan", 404)):
        assert client.get(reverse("traces:detail", args=[runs[name].pk])).status_code == status, name


def test_staff_reads_every_run(client, staff, runs_of_two_people):
    client.force_login(staff)
    assert listed_run_ids(client) == {str(r.pk) for r in runs_of_two_people.values()}
    for run in runs_of_two_people.values():
        assert client.get(reverse("traces:detail", args=[run.pk])).status_code == 200


def test_the_trace_list_filters_by_target(client, member, runs_of_two_people):
    client.force_login(member)
    body = client.get(reverse("traces:list"), {"target": "play"}).content.decode()
    assert set(re.findall(r'href="/traces/(\d+)/"', body)) == {str(runs_of_two_people["mine"].pk)}
