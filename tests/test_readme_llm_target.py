"""The README's LLM-backed target (its first code sample) runs as written: `evalsite eval` on it,
the model a local stand-in OpenAI-compatible server that asks for the tool, then answers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from apps.evals.models import EvalResult
from tests.support.stand_in_llm import StandInLLM, completion_body

ROOT = Path(__file__).resolve().parents[1]


def readme_samples() -> tuple[str, str]:
    """The README's first Python block and the shell block after it."""
    text = (ROOT / "README.md").read_text()
    python = re.search(r"```python\n(# agents/support\.py\n.*?)```", text, re.DOTALL)
    shell = re.search(r"```bash\n((?:mkdir -p agents sets.*\n)?echo .*?sets/support\.jsonl\n.*?)```", text, re.DOTALL)
    assert python and shell, "the README's LLM-backed target sample moved"
    assert text.index(python.group(1)) < text.index("## Quick start"), "it belongs above the Quick start"
    return python.group(1), shell.group(1)


def model(body: dict[str, Any]) -> dict[str, Any]:
    """Asks for order_status(A1) first; once the tool answered, answers with what it said."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return completion_body(f"Order A1 has {last['content']}.", usage=(30, 8))
    return completion_body(None, tool_calls=[{"name": "order_status", "arguments": {"order_id": "A1"}}])


@pytest.mark.django_db(transaction=True)
def test_the_readme_llm_backed_target_runs_against_an_openai_compatible_endpoint(tmp_path, monkeypatch):
    python, shell = readme_samples()
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "support.py").write_text(python)
    case_line = re.search(r"echo '(.*)' > sets/support\.jsonl", shell)
    assert case_line is not None
    (tmp_path / "sets").mkdir()
    (tmp_path / "sets" / "support.jsonl").write_text(case_line.group(1) + "\n")
    assert "--target support" in shell and "EVALSITE_MODEL_BASE_URL=" in shell
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stand-in")
    monkeypatch.delenv("EVALSITE_MODEL_API_KEY_ENV", raising=False)
    with StandInLLM(responder=model) as llm:
        monkeypatch.setenv("EVALSITE_MODEL_BASE_URL", llm.base_url)
        call_command(
            "eval", str(tmp_path / "agents"), "--set", str(tmp_path / "sets" / "support.jsonl"),
            "--target", "support", "--quiet",
        )  # fmt: skip
        sent = [r.body for r in llm.chat_requests]
    result = EvalResult.objects.select_related("run").get()
    assert (result.status, result.run.final_answer) == ("passed", "Order A1 has shipped.")
    assert [body["model"] for body in sent] == ["gpt-4o-mini", "gpt-4o-mini"]
    assert sent[0]["messages"][0] == {"role": "system", "content": "Answer in one short sentence."}
    assert sent[0]["tools"][0]["function"]["name"] == "order_status"
    assert {k: sent[1]["messages"][-1][k] for k in ("role", "content")} == {"role": "tool", "content": "shipped"}
