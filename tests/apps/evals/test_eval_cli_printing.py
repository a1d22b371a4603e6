"""`evalsite eval` on a target that prints: the table is not buried under its output, which is in
each case's trace (bounded), on the trace page's span tree."""

from __future__ import annotations

import json
import textwrap

import pytest
from django.core.management import call_command

from apps.evals.models import EvalResult
from apps.traces.models import Event
from apps.traces.queries import span_tree
from evalcore.capture import LIMIT_BYTES

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = textwrap.dedent(
    """
    import sys
    from evalcore.discovery import TargetSpec

    def noisy(q):
        for _ in range(10_000):
            print(f"{q}: " + "debug " * 16)  # about 1 MB per case
        print(f"{q}: deprecated", file=sys.stderr)
        return q

    spec = TargetSpec(id="noisy", target=noisy, scorers=["exact_match"])
    """
)


def test_a_printing_target_leaves_the_terminal_to_the_cli_and_its_output_to_the_trace(tmp_path, capsys):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "noisy.py").write_text(AGENT)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": w, "input": w, "expected": w, "split": "dev"}) + "\n" for w in "ab"))
    call_command("eval", str(tmp_path / "agents"), "--set", str(cases))
    terminal = capsys.readouterr()
    assert "debug" not in terminal.out and "deprecated" not in terminal.err
    assert "eval run " in terminal.out and "noisy" in terminal.out  # the table and its footer
    assert len(terminal.out) < 10_000
    for result in EvalResult.objects.select_related("run"):
        line = f"{result.case_id}: " + "debug " * 16 + "\n"
        stdout = Event.objects.get(run=result.run, name="stdout").payload
        assert (stdout["truncated"], stdout["bytes"]) == (True, 10_000 * len(line))
        kept, marker = stdout["content"].rsplit("\n", 1)
        assert marker.startswith(f"… truncated at {LIMIT_BYTES} bytes")
        assert set(kept.split("\n")[:-1]) == {line[:-1]}  # this case's lines only
        stderr = Event.objects.get(run=result.run, name="stderr").payload
        assert stderr["content"] == f"{result.case_id}: deprecated\n"
        node = next(n for n in span_tree(result.run).nodes if n.name == "stdout")
        assert node.attributes["content"] == stdout["content"]  # shown on the trace page
