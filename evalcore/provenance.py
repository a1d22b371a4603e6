"""Where the code under test came from: the git commit of its checkout and whether it was dirty.

Django-free (the engine layer): the caller passes the folder, e.g. the agents folder of a target.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import NamedTuple


class GitProvenance(NamedTuple):
    """A checkout's commit (40-hex sha, ``""`` outside git) and its dirty flag (tracked files
    changed; untracked files do not count)."""

    sha: str
    dirty: bool


def git_provenance(path: str | Path, *, timeout_s: float = 5.0) -> GitProvenance:
    """The commit and dirty flag of the git checkout holding the folder ``path``.

    Never raises: outside a checkout, without ``git``, or when git takes longer than
    ``timeout_s`` seconds per call, the answer is ``GitProvenance("", False)``.
    """
    cwd = str(path)
    if not _maybe_in_git(Path(cwd)):
        return GitProvenance("", False)  # no git process started: a fork costs a large process time
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=True,
            ).stdout.strip()
        )
    except (OSError, subprocess.SubprocessError):
        return GitProvenance("", False)
    return GitProvenance(sha, dirty)


def _maybe_in_git(folder: Path) -> bool:
    """Whether git could find a repository for ``folder``: a ``.git`` entry (folder or file) in
    it or a parent, or ``GIT_DIR`` set. ``False`` means ``git rev-parse`` would fail."""
    if os.environ.get("GIT_DIR"):
        return True
    try:
        here = folder.resolve()
    except OSError:
        return True  # let git decide
    return any((place / ".git").exists() for place in (here, *here.parents))
