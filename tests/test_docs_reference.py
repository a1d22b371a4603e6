"""The generated reference pages (``docs/reference/``) match the code: ``scripts/gen_reference.py
--check`` regenerates the CLI, API and settings pages and compares them with the committed ones,
so a new option, route or ``EVALSITE_*`` variable fails here until the pages are regenerated
(``make docs-reference``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gen_reference.py"


def test_the_committed_reference_pages_are_what_the_code_generates() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_every_evalsite_variable_the_code_reads_is_documented() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gen_reference
    finally:
        sys.path.remove(str(SCRIPT.parent))
    read = gen_reference.names_read(ROOT / s for s in gen_reference.SOURCES)
    assert "EVALSITE_DB" in read and "EVALSITE_OTLP_ENDPOINT" in read
    assert sorted(set(read) ^ set(gen_reference.SETTINGS)) == []
    page = (ROOT / "docs" / "reference" / "settings.md").read_text()
    assert [name for name in read if f"| `{name}` |" not in page] == []


def test_the_cli_page_lists_every_command_and_option() -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for command in ("init", "eval", "import", "import-run", "export", "export-traces", "rescore", "serve", "token"):
        assert f"## `evalsite {command}`" in page
    assert "| `--gate GATE` |" in page and "| `--judge-samples JUDGE_SAMPLES` |" in page
    assert "--pythonpath" not in page.split("## `evalsite init`", 1)[1]  # Django's options: once, at the top
