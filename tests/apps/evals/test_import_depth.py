"""A deeply nested case file is one line naming the file in the CLI (``evalsite import``, exit 2,
no traceback; it was a 2,996-line ``RecursionError``, exit 1) and in the admin upload (a 400
with the same line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.evals.models import EvalSet

EVALSITE = Path(sys.executable).with_name("evalsite")


def _nest(n: int) -> str:
    return "[" * n + "]" * n


FILES = {
    "deep500.yaml": "- id: d1\n  input: " + _nest(500) + "\n  expected: x\n",
    "promptfooconfig.yaml": "prompts: ['{{body}}']\ntests:\n  - vars:\n      body: " + _nest(500) + "\n",
    "deep.jsonl": '{"id": "d1", "input": ' + _nest(500) + ', "expected": "x"}\n',
    "deep.json": '[{"id": "d1", "input": ' + _nest(5000) + ', "expected": "x"}]',
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_cli_refuses_a_deep_file_in_one_line(tmp_path, name) -> None:
    path = tmp_path / name
    path.write_text(FILES[name])
    done = subprocess.run(
        [str(EVALSITE), "import", str(path), "--name", "d5", "--db", str(tmp_path / "x.sqlite3")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1, lines[:5]
    assert name in lines[0] and "nested" in lines[0]


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(FILES))
def test_the_admin_upload_refuses_it_with_the_same_line(client, staff, name) -> None:
    client.force_login(staff)
    answer = client.post(
        reverse("admin:evals_evalset_upload"),
        {"name": "deep", "file": SimpleUploadedFile(name, FILES[name].encode()), "split_ratios": "60/20/20"},
    )
    assert answer.status_code == 400
    text = answer.content.decode()
    assert f"{name}:" in text and "nested" in text
    assert not EvalSet.objects.filter(name="deep").exists()
