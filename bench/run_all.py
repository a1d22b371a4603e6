"""Run every benchmark in bench/ (``make bench``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    failed = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"== {script.name}")
        failed |= subprocess.run([sys.executable, str(script)]).returncode
    raise SystemExit(failed)
