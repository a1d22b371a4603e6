"""Where the public data of ``shared/realdata`` is: beside the checkout (as in CI and on a
developer's machine), or wherever ``$EVALSITE_REALDATA`` points."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def realdata_dir() -> Path:
    """``<checkout>/../shared/realdata``, unless ``EVALSITE_REALDATA`` names another folder."""
    return Path(os.environ.get("EVALSITE_REALDATA") or REPO.parent / "shared" / "realdata")


REALDATA = realdata_dir()
