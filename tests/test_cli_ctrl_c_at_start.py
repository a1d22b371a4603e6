"""A Ctrl-C that lands before any command handles it (imports, Django's start-up) ends the
``evalsite`` process with one line and exit 130, as a handled Ctrl-C does: never a traceback."""

from __future__ import annotations

import subprocess
import sys

from tests.support.signals import default_signals_in_child

# the user's Ctrl-C arrives while the project's .env is read, the first step of every command
PRESS_CTRL_C_AT_START = """
import os, signal, sys
import evalsite.paths
evalsite.paths.load_env_file = lambda *a, **k: os.kill(os.getpid(), signal.SIGINT)
from evalsite.cli import main
main(sys.argv[1:])
"""


def test_ctrl_c_during_start_up_is_one_line_and_exit_130(tmp_path):
    for command in (["targets"], ["eval", "agents", "--set", "x.jsonl"]):
        done = subprocess.run(
            [sys.executable, "-c", PRESS_CTRL_C_AT_START, *command],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            preexec_fn=default_signals_in_child,
            timeout=120,
        )
        assert done.returncode == 130, done
        assert done.stderr.strip() == "evalsite: interrupted (Ctrl-C)", done.stderr
