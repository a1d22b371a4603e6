"""The engine never imports Django (checked in a fresh interpreter and by import-linter), and
the layers contract over the whole project holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_importing_the_whole_engine_loads_no_django():
    code = (
        "import pkgutil, importlib, sys, evalcore\n"
        "for m in pkgutil.walk_packages(evalcore.__path__, 'evalcore.'):\n"
        "    if m.name.endswith('.local'): continue\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in {'django', 'ninja', 'channels', 'daphne'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_import_linter_contract_holds():
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "The engine never imports Django KEPT" in out.stdout
    assert "Layers: a module imports only from its own layer or lower ones KEPT" in out.stdout
    assert "0 broken" in out.stdout
