"""The Makefile's test targets (issue 23): `make test-unit` and `make test-e2e` have recipes, and
`make test` runs the browser tests even when the unit suite fails, then fails overall.

The targets run against a stand-in venv (``VENV=...``) whose ``python``, ``ruff``, ``mypy``, ``mkdocs`` and
``lint-imports`` record their arguments and exit with a chosen status, so the Makefile's own
control flow is what is tested, not the suites.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    shutil.which("make") is None
    or not Path("/usr/bin/chromium").exists()
    or shutil.which("redis-server") is None
    or not (list(Path("/usr/lib/postgresql").glob("*/bin/initdb")) or shutil.which("initdb")),
    reason="needs make and the Debian packages scripts/ensure-system-packages.sh checks for",
)

# Records one line per call; `pytest -n ...` (the unit suite) exits with $UNIT_RC and
# `pytest tests/e2e ...` with $E2E_RC; every other call succeeds.
STAND_IN = """#!/bin/sh
echo "$(basename "$0") $*" >> "$CALL_LOG"
case "$*" in
  *"-m pytest"*"tests/e2e"*) exit "${E2E_RC:-0}" ;;
  *"-m pytest"*) exit "${UNIT_RC:-0}" ;;
esac
exit 0
"""


def _stand_in_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "ruff", "mypy", "lint-imports", "mkdocs"):
        tool = venv / "bin" / name
        tool.write_text(STAND_IN)
        tool.chmod(0o755)
    # Newer than pyproject.toml and setup.py: `install` has nothing to do.
    (venv / ".installed-dev").touch()
    return venv


def _make(tmp_path: Path, target: str, *, unit_rc: int = 0, e2e_rc: int = 0) -> tuple[int, list[str]]:
    venv = _stand_in_venv(tmp_path)
    log = tmp_path / "calls.log"
    env = {**os.environ, "CALL_LOG": str(log), "UNIT_RC": str(unit_rc), "E2E_RC": str(e2e_rc)}
    env.pop("MAKEFLAGS", None)
    proc = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), target, f"VENV={venv}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    calls = log.read_text().splitlines() if log.exists() else []
    # Only the pytest calls matter here (install may re-run pip if pyproject.toml just changed).
    return proc.returncode, [c for c in calls if "-m pytest" in c]


def _is_unit(call: str) -> bool:
    return "-m pytest" in call and "tests/e2e" not in call


def _is_e2e(call: str) -> bool:
    return "-m pytest" in call and "tests/e2e" in call


def test_test_unit_runs_the_unit_suite_alone(tmp_path: Path) -> None:
    rc, calls = _make(tmp_path, "test-unit")
    assert rc == 0
    assert len(calls) == 1 and _is_unit(calls[0]) and "-n" in calls[0].split()


def test_test_e2e_runs_the_browser_tests_alone(tmp_path: Path) -> None:
    rc, calls = _make(tmp_path, "test-e2e")
    assert rc == 0
    assert len(calls) == 1 and _is_e2e(calls[0]) and "addopts=" in calls[0]


def test_make_test_runs_the_browser_tests_after_a_failing_unit_suite_and_fails(tmp_path: Path) -> None:
    rc, calls = _make(tmp_path, "test", unit_rc=1)
    assert rc != 0
    assert [_is_unit(c) for c in calls] == [True, False] and _is_e2e(calls[1])


def test_make_test_fails_when_only_the_browser_tests_fail(tmp_path: Path) -> None:
    rc, calls = _make(tmp_path, "test", e2e_rc=1)
    assert rc != 0
    assert len(calls) == 2 and _is_unit(calls[0]) and _is_e2e(calls[1])


def test_make_test_passes_when_both_pass(tmp_path: Path) -> None:
    rc, calls = _make(tmp_path, "test")
    assert rc == 0
    assert len(calls) == 2


def test_the_install_step_shows_its_progress(tmp_path: Path) -> None:
    """`make demo` on a fresh clone: one line per phase and pip's own progress, never minutes of
    silence behind `pip install --quiet` (issue 23)."""
    proc = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(ROOT), "install", f"VENV={tmp_path / 'venv'}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    install = [line for line in lines if "pip install" in line and "-e " in line]
    assert len(install) == 1 and "--progress-bar on" in install[0] and "--quiet" not in install[0], install
    phases = [line for line in lines if line.startswith('echo "[')]
    assert [p.split("]")[0] for p in phases] == ['echo "[1/3', 'echo "[2/3', 'echo "[3/3'], phases
    assert any("empty cache" in line for line in lines)  # the cold-cache time is said up front
