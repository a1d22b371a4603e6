"""Eval runs' traces out over OTLP/HTTP: `evalsite export-traces` to a local receiver (GenAI
attributes, parent links, times, scores on the root span), the automatic export of a finished
run (and a collector that is down costing only a warning), and the round trip into Evalsite's
own OTLP endpoint giving back the same spans."""

from __future__ import annotations

import json
import logging
import socket
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from apps.core.auth import create_api_token
from apps.evals.exports.otel import wait_for_exports
from apps.evals.models import EvalResult, EvalRun
from apps.traces.models import Event, Run
from apps.traces.queries import span_tree
from evalcore.otel.model import otel_span_id, otel_trace_id, to_ns
from evalsite.cli import main as evalsite_main
from tests.support.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = textwrap.dedent(
    """
    from evalcore.discovery import TargetSpec
    from tests.support.genai_traces import reader_agent

    reader = TargetSpec(id="reader", target=reader_agent(), scorers=["exact_match"])
    """
)


def run_reader_eval(tmp_path: Path) -> EvalRun:
    """`evalsite eval` of the reader agent on two cases: c1 passes, c2 fails."""
    folder = tmp_path / "agents"
    folder.mkdir(exist_ok=True)
    (folder / "reader.py").write_text(AGENT)
    cases = tmp_path / "docs.jsonl"
    rows = [
        {"id": "c1", "input": "doc-1", "expected": "done", "split": "dev"},
        {"id": "c2", "input": "doc-2", "expected": "other", "split": "dev"},
    ]
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows))
    call_command("eval", str(folder), "--set", str(cases), "--quiet")
    return EvalRun.objects.order_by("-started").first()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_export_traces_sends_each_case_with_genai_attributes_parent_links_and_scores(tmp_path, capsys):
    eval_run = run_reader_eval(tmp_path)
    with OtlpReceiver() as receiver:
        call_command("export_traces", eval_run.id, "--endpoint", receiver.url, "--header", "Authorization=Bearer t0k")
        spans = receiver.spans()
    assert f"exported 2 traces (8 spans) to {receiver.url}/v1/traces" in capsys.readouterr().out
    assert {r.path for r in receiver.received} == {"/v1/traces"}
    assert {r.headers["authorization"] for r in receiver.received} == {"Bearer t0k"}
    traces = defaultdict(list)
    for span in spans:
        traces[span.span.trace_id.hex()].append(span)
    assert len(traces) == 2
    for result in EvalResult.objects.filter(eval_run=eval_run).select_related("run"):
        run = result.run
        got = traces[otel_trace_id(run.trace_id)]
        events = list(Event.objects.filter(run=run).order_by("seq"))
        begins = {e.payload["span_id"]: e for e in events if e.type == "span_begin"}
        ends = {e.payload["span_id"]: e for e in events if e.type == "span_end"}
        # every stored span, with its parent link and its times
        expected = {
            otel_span_id(run.trace_id, sid): (
                otel_span_id(run.trace_id, b.payload["parent_span_id"]) if b.payload["parent_span_id"] else "",
                to_ns(b.ts.timestamp()),
                to_ns(ends[sid].ts.timestamp()),
            )
            for sid, b in begins.items()
        }
        assert {
            s.span.span_id.hex(): (s.span.parent_span_id.hex(), s.span.start_time_unix_nano, s.span.end_time_unix_nano)
            for s in got
        } == expected
        by_name = {s.span.name: s for s in got}
        assert set(by_name) == {"invoke_agent reader", "chat fake-model", "execute_tool fetch"}
        assert all(s.resource["service.name"] == "reader" for s in got)
        chats = [s for s in got if s.attributes["gen_ai.operation.name"] == "chat"]
        assert [
            (c.attributes["gen_ai.usage.input_tokens"], c.attributes["gen_ai.usage.output_tokens"]) for c in chats
        ] == [
            (7, 2),
            (11, 3),
        ]
        assert {c.attributes["gen_ai.request.model"] for c in chats} == {"fake-model"}
        question = result.case_id.replace("c", "doc-")
        sent = json.loads(chats[0].attributes["gen_ai.input.messages"])
        assert sent[-1] == {"role": "user", "parts": [{"type": "text", "content": question}]}
        tool = by_name["execute_tool fetch"].attributes
        assert tool["gen_ai.operation.name"] == "execute_tool" and tool["gen_ai.tool.name"] == "fetch"
        assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"doc_id": question}
        assert tool["gen_ai.tool.call.result"] == f"text of {question}"
        root = by_name["invoke_agent reader"]
        assert root.span.parent_span_id == b""
        passed = result.case_id == "c1"
        assert root.attributes["evalsite.eval_run.id"] == eval_run.id
        assert root.attributes["evalsite.case.id"] == result.case_id
        assert root.attributes["evalsite.case.status"] == ("passed" if passed else "failed")
        assert root.attributes["evalsite.score.exact_match"] is passed
        assert root.attributes["evalsite.run.id"] == run.run_id
        evaluation = [a for name, a in root.events if name == "gen_ai.evaluation.result"]
        assert evaluation == [
            {
                "gen_ai.evaluation.name": "exact_match",
                "gen_ai.evaluation.score.value": 1.0 if passed else 0.0,
                "gen_ai.evaluation.score.label": "pass" if passed else "fail",
                **(
                    {"gen_ai.evaluation.explanation": evaluation[0]["gen_ai.evaluation.explanation"]}
                    if "gen_ai.evaluation.explanation" in evaluation[0]
                    else {}
                ),
            }
        ]
        answer = json.loads(root.attributes["gen_ai.output.messages"])
        assert answer == [
            {"role": "assistant", "parts": [{"type": "text", "content": "done"}], "finish_reason": "stop"}
        ]


def test_one_case_or_one_run_id_and_the_hyphenated_command(tmp_path, capsys):
    eval_run = run_reader_eval(tmp_path)
    with OtlpReceiver() as receiver:
        call_command("export_traces", eval_run.id, "--case", "c2", "--endpoint", receiver.url)
        assert "exported 1 traces (4 spans)" in capsys.readouterr().out
        call_command("export_traces", f"{eval_run.id}:c1", "--endpoint", f"{receiver.url}/v1/traces")
        assert "exported 1 traces (4 spans)" in capsys.readouterr().out
        roots = [s.attributes["evalsite.case.id"] for s in receiver.spans() if "evalsite.case.id" in s.attributes]
    assert roots == ["c2", "c1"]
    with pytest.raises(CommandError, match="no eval run or run 'nope'"):
        call_command("export_traces", "nope", "--endpoint", "http://127.0.0.1:1")
    with pytest.raises(CommandError, match="give --endpoint"):
        call_command("export_traces", eval_run.id)
    for bad in ("0", "-1", "nan", "inf"):  # refused by name before any request (urllib3 refused 0 late)
        with pytest.raises(CommandError, match=f"--timeout {bad}: give a number of seconds above 0"):
            call_command("export_traces", eval_run.id, "--endpoint", "http://127.0.0.1:1", "--timeout", bad)
    with pytest.raises(SystemExit) as raised:
        evalsite_main(["export-traces", "--help"])
    assert raised.value.code == 0 and "--endpoint" in capsys.readouterr().out


def test_a_collector_that_is_down_or_refuses_is_a_clear_error(tmp_path):
    eval_run = run_reader_eval(tmp_path)
    port = closed_port()
    with pytest.raises(CommandError, match=rf"export to http://127.0.0.1:{port}/v1/traces failed after 0 traces"):
        call_command("export_traces", eval_run.id, "--endpoint", f"http://127.0.0.1:{port}", "--timeout", "1")
    with OtlpReceiver(status=401) as receiver, pytest.raises(CommandError, match="401"):
        call_command("export_traces", eval_run.id, "--endpoint", receiver.url)


def test_a_finished_run_is_exported_by_itself_when_an_endpoint_is_set(tmp_path):
    with OtlpReceiver() as receiver:
        with override_settings(EVALSITE_OTLP_ENDPOINT=receiver.url, EVALSITE_OTLP_HEADERS="x-team=evals"):
            eval_run = run_reader_eval(tmp_path)
        assert wait_for_exports(30)
        spans = receiver.wait_for_spans(8)
    assert len(spans) == 8
    assert {s.attributes.get("evalsite.eval_run.id") for s in spans} == {eval_run.id, None}
    assert receiver.received[0].headers["x-team"] == "evals"


def test_a_collector_that_is_down_never_fails_the_run(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="apps.evals.exports.otel")
    port = closed_port()
    with override_settings(EVALSITE_OTLP_ENDPOINT=f"http://127.0.0.1:{port}", EVALSITE_OTLP_TIMEOUT_S=1):
        eval_run = run_reader_eval(tmp_path)
    assert eval_run.status == "finished" and eval_run.n_done == 2
    assert wait_for_exports(30)
    warning = next(r for r in caplog.records if r.name == "apps.evals.exports.otel")
    assert warning.levelno == logging.WARNING
    assert f"eval run {eval_run.id}: traces not exported to http://127.0.0.1:{port}/v1/traces" in warning.getMessage()
    assert f"evalsite export-traces {eval_run.id}" in warning.getMessage()


def test_a_run_sent_to_evalsites_own_endpoint_comes_back_with_the_same_spans(tmp_path, live_server, member):
    eval_run = run_reader_eval(tmp_path)
    token = create_api_token(user=member)[1]
    call_command(
        "export_traces",
        eval_run.id,
        "--endpoint",
        f"{live_server.url}/api/otlp",
        "--header",
        f"Authorization=Bearer {token}",
    )
    for result in EvalResult.objects.filter(eval_run=eval_run).select_related("run"):
        original = result.run
        ingested = Run.objects.get(run_id=f"otlp:{otel_trace_id(original.trace_id)}")
        assert ingested.target_id == "reader" and ingested.owner == member
        assert ingested.metadata["evalsite"]["evalsite.case.id"] == result.case_id
        assert (ingested.status, ingested.final_answer, ingested.model) == (
            original.status,
            original.final_answer,
            original.model,
        )
        assert (ingested.tokens_in, ingested.tokens_out) == (original.tokens_in, original.tokens_out)
        assert ingested.step_metrics["llm_calls"] == original.step_metrics["llm_calls"] == 2

        def shape(run):
            return [
                (n.depth, n.kind, n.name, n.status, n.tokens_in, n.tokens_out, n.elapsed_ms, n.attributes)
                for n in span_tree(run).nodes
            ]

        def without_ids(rows):
            return [(*row[:-1], {k: v for k, v in row[-1].items() if k != "parent_span_id"}) for row in rows]

        assert without_ids(shape(ingested)) == without_ids(shape(original))
        stored = list(Event.objects.filter(run=original).order_by("seq").values_list("type", "name", "ts"))
        back = list(Event.objects.filter(run=ingested).order_by("seq").values_list("type", "name", "ts"))
        assert back == stored


def test_an_evalsite_eval_process_sends_its_traces_before_it_exits(tmp_path):
    """A one-shot `evalsite eval` with EVALSITE_OTLP_ENDPOINT: the background export finishes
    before the process does (the interpreter's shutdown stopped the exporter's thread pools, and
    every automatic export from the CLI failed with "cannot schedule new futures")."""
    import os
    import subprocess
    import sys

    from tests.support.databases import subprocess_db_env

    root = Path(__file__).resolve().parents[3]
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "reader.py").write_text(AGENT)
    cases = tmp_path / "docs.jsonl"
    cases.write_text(json.dumps({"id": "c1", "input": "doc-1", "expected": "done", "split": "dev"}) + "\n")
    with OtlpReceiver() as receiver:
        env = {
            **os.environ,
            **subprocess_db_env(tmp_path / "db.sqlite3"),
            "EVALSITE_OTLP_ENDPOINT": receiver.url,
            "PYTHONPATH": str(root),
        }
        done = subprocess.run(
            [sys.executable, "-m", "evalsite.cli", "eval", str(folder), "--set", str(cases), "--quiet"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        assert "cannot schedule new futures" not in done.stderr and "export failed" not in done.stderr
        # the process has exited: what it sent is all there is
        assert len(receiver.spans()) == 4, done.stderr
