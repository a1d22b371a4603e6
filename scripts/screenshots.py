"""Refresh the 1440 px screenshots of the portal's main pages in ``docs/screenshots/``.

Usage (from the repository root; ``make screenshots`` runs it)::

    .venv/bin/python scripts/screenshots.py

It runs the browser test ``tests/e2e/test_walk_every_page.py::test_main_pages_at_1440_px_for_the_docs``
(the e2e site: ``evalsite serve`` on a temp database seeded by the CLI as in
``tests/e2e/conftest.py``, Playwright on Debian's chromium), which writes
``tests/e2e/screenshots/page_<name>.png``, then copies those files to ``docs/screenshots/``.
Exits with pytest's status when the test fails (nothing is copied then).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHOTS = REPO / "tests" / "e2e" / "screenshots"
DOCS = REPO / "docs" / "screenshots"
TEST = "tests/e2e/test_walk_every_page.py::test_main_pages_at_1440_px_for_the_docs"


def main() -> int:
    """Run the screenshot test, copy its images; the process exit status (0 when all went well)."""
    for old in SHOTS.glob("page_*.png"):
        old.unlink()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", TEST]
    status = subprocess.run(command, cwd=REPO, check=False).returncode
    if status != 0:
        print(f"screenshots: {TEST} failed (exit {status}); docs/screenshots/ left as it was", file=sys.stderr)
        return status
    DOCS.mkdir(exist_ok=True)
    written = sorted(SHOTS.glob("page_*.png"))
    for image in written:
        shutil.copy2(image, DOCS / image.name)
    print(f"screenshots: {len(written)} images written to {DOCS.relative_to(REPO)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
