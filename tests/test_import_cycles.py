"""The import graph has no cycle (``scripts/import_cycles.py``, pointed at by the README)."""

from __future__ import annotations

import subprocess
import sys
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "import_cycles.py"


def _script():
    spec = spec_from_file_location("import_cycles", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_finder_reports_each_cycle_once_and_nothing_else():
    edges = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},  # a -> b -> c -> a
        "d": {"e"},
        "e": set(),  # d -> e: no cycle
        "f": {"f"},  # a module importing itself
        "g": {"h"},
        "h": {"g"},
    }
    assert _script().cycles(edges) == [["a", "b", "c", "a"], ["f", "f"], ["g", "h", "g"]]


def test_the_project_has_no_import_cycle():
    """The engine, the apps and the project package have no cycle: the six-module cycle through
    agents.services, evals.api, consumers, services, store and tasks is gone, and so are the
    engine's (jsonvalue <-> types, scorers.base <-> scorers.builtin)."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "evalcore", "apps", "evalsite"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("no import cycles")


def test_the_script_exits_1_and_names_the_modules_of_a_cycle(tmp_path):
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "one.py").write_text("from cyclic import two\n")
    (package / "two.py").write_text("def f():\n    from cyclic import one\n")  # hidden in a function: still a cycle
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "cyclic"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cycle: cyclic.one -> cyclic.two -> cyclic.one" in done.stdout
