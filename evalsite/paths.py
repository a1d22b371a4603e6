"""Where Evalsite finds things: the project folder, its data, its agents, the example suites.

The **project folder** is the current working directory: the folder ``evalsite init`` made, or a
checkout's root. Everything Evalsite writes goes to its ``var/`` (the data folder), never into
the installed package; the example suites are read from the checkout when there is one, else
from the copy installed with the package. Imported by the settings, so no Django here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parent.parent
"""The folder holding the ``evalsite`` package: a checkout's root, or ``site-packages``."""

INSTALLED_EXAMPLES = "evalsite_examples"
"""The name the wheel installs ``examples/`` under (a data package beside ``evalsite``; setup.py)."""


def data_dir(env: Mapping[str, str] = os.environ, cwd: Path | None = None) -> Path:
    """The data folder: ``$EVALSITE_DATA_DIR``, else ``var/`` of the project folder.

    It holds the SQLite database (unless ``EVALSITE_DB`` / ``DATABASE_URL`` say otherwise), the
    secret key and the judge cache. Returned as an absolute path (a relative
    ``EVALSITE_DATA_DIR`` is taken from ``cwd``, default the current directory), so child
    processes agree on it.
    """
    base = cwd or Path.cwd()
    configured = env.get("EVALSITE_DATA_DIR", "").strip()
    return base / configured if configured else base / "var"


def is_checkout(root: Path = SOURCE_ROOT) -> bool:
    """Whether ``root`` is a source checkout (its ``pyproject.toml`` and ``examples/`` beside
    the package), as opposed to the ``site-packages`` of an installed wheel."""
    return (root / "pyproject.toml").is_file() and (root / "examples").is_dir()


def examples_dir(root: Path = SOURCE_ROOT) -> Path:
    """The example suites (``sets/``, ``agents/``, ``peers/``, ``ci/``).

    A checkout's own ``examples/`` when run from one (so editing them takes effect at once),
    else the copy the wheel installed beside the package (``evalsite_examples``).
    """
    return root / "examples" if is_checkout(root) else root / INSTALLED_EXAMPLES


def agents_dir(env: Mapping[str, str] = os.environ, cwd: Path | None = None) -> Path:
    """The agents folder the portal offers: ``$EVALSITE_AGENTS_DIR``, else the project folder's
    ``agents/`` when it has one (``evalsite init`` makes it), else the example agents."""
    base = cwd or Path.cwd()
    configured = env.get("EVALSITE_AGENTS_DIR", "").strip()
    if configured:
        return base / configured
    project = base / "agents"
    return project if project.is_dir() else examples_dir() / "agents"


def env_file(env: Mapping[str, str] = os.environ, cwd: Path | None = None) -> Path | None:
    """The environment file the ``evalsite`` command reads: ``$EVALSITE_ENV_FILE``, else
    ``.env`` of the project folder; ``None`` when ``EVALSITE_ENV_FILE`` is set empty (read none)."""
    configured = env.get("EVALSITE_ENV_FILE")
    if configured is not None and not configured.strip():
        return None
    return (cwd or Path.cwd()) / (configured.strip() if configured else ".env")


def load_env_file(env: MutableMapping[str, str] = os.environ, cwd: Path | None = None) -> Path | None:
    """Read the project's ``.env`` (see :func:`env_file`) into ``env`` with python-dotenv.

    Variables already set win over the file's. Returns the file read, or ``None`` when there is
    none (a missing file is not an error).
    """
    path = env_file(env, cwd)
    if path is None:
        return None
    if not path.is_file():
        if (env.get("EVALSITE_ENV_FILE") or "").strip():  # named explicitly: say it is missing
            named = env["EVALSITE_ENV_FILE"]
            sys.stderr.write(f"evalsite: warning: EVALSITE_ENV_FILE={named}: no such file ({path})\n")
        return None
    from dotenv import dotenv_values  # only when there is a file: every command starts here

    for name, value in dotenv_values(path).items():
        if value is not None and name not in env:
            env[name] = value
    return path
