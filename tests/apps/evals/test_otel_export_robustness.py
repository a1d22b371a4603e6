"""`evalsite export-traces` on a repeated run and on bad endpoints: ``RUN:CASE`` names every
repeat (``RUN:CASE#N`` one), the error for an unknown run id says so; ``--endpoint notaurl`` is
a usage error at parse time (exit 2); a port with nothing listening fails at once, in one line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.evals.models import EvalRun
from evalsite.cli import main as evalsite_main
from tests.apps.evals.test_otel_export import closed_port
from tests.support.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = textwrap.dedent(
    """
    from evalcore.discovery import TargetSpec
    from tests.support.genai_traces import reader_agent

    reader = TargetSpec(id="reader", target=reader_agent(), scorers=["exact_match"])
    """
)


def repeated_run(tmp_path: Path) -> EvalRun:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "reader.py").write_text(AGENT)
    cases = tmp_path / "docs.jsonl"
    cases.write_text(json.dumps({"id": "q1", "input": "doc-1", "expected": "done", "split": "dev"}) + "\n")
    call_command("eval", str(folder), "--set", str(cases), "--repeat", "2", "--quiet")
    return EvalRun.objects.get()


def test_run_case_without_the_repeat_suffix_names_every_repeat(tmp_path, capsys):
    eval_run = repeated_run(tmp_path)
    with OtlpReceiver() as receiver:
        call_command("export_traces", f"{eval_run.id}:q1", "--endpoint", receiver.url)
        assert "exported 2 traces" in capsys.readouterr().out
        call_command("export_traces", f"{eval_run.id}:q1#1", "--endpoint", receiver.url)
        assert "exported 1 traces" in capsys.readouterr().out
    with pytest.raises(CommandError, match=r"<eval run id>:<case id>#N, N from 0"):
        call_command("export_traces", f"{eval_run.id}:q9", "--endpoint", "http://127.0.0.1:1")
    docs = (Path(__file__).resolve().parents[3] / "docs" / "otel.md").read_text()
    assert "#N" in docs and "every repeat" in docs


def test_an_endpoint_that_is_not_a_url_is_a_usage_error_at_parse_time(capsys):
    with pytest.raises(SystemExit) as raised:
        evalsite_main(["export-traces", "anything", "--endpoint", "notaurl"])
    assert raised.value.code == 2
    assert "argument --endpoint: 'notaurl' is not an http(s) URL" in capsys.readouterr().err


def test_nothing_listening_fails_at_once_in_one_line(tmp_path, capsys):
    eval_run = repeated_run(tmp_path)
    port = closed_port()
    with pytest.raises(CommandError) as raised:
        call_command("export_traces", eval_run.id, "--endpoint", f"http://127.0.0.1:{port}", "--timeout", "30")
    message = str(raised.value)
    assert message == (
        f"export to http://127.0.0.1:{port}/v1/traces failed after 0 traces (0 spans): "
        f"nothing is listening at 127.0.0.1:{port} (connection refused)"
    )
    assert "Transient error" not in capsys.readouterr().err
