"""``evalsite init [DIR]``: a project folder to start from.

It writes ``agents/calculator.py`` (an example target: no model, no dependency, two variants, two
scorers), ``sets/example.jsonl`` (12 cases over train / dev / test), ``.env`` (every setting a
project may want, commented out), ``.gitignore`` and a short ``README.md``, from
``evalsite/project_template/`` (shipped in the wheel). It refuses to overwrite a file that
exists (exit code 2, nothing written) unless ``--force``. It needs no Django and writes no data
folder: the first ``evalsite`` command run in the project makes ``var/``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

TEMPLATE_DIR = Path(__file__).resolve().parent / "project_template"
"""The files ``init`` copies (``env`` and ``gitignore`` become ``.env`` and ``.gitignore``:
a wheel's package data holds no dotfiles by default)."""

FILES: tuple[tuple[str, str], ...] = (
    ("agents/calculator.py", "agents/calculator.py"),
    ("sets/example.jsonl", "sets/example.jsonl"),
    ("env", ".env"),
    ("gitignore", ".gitignore"),
    ("README.md", "README.md"),
)
"""(file in the template, file in the project), in the order they are listed."""


class ProjectExists(Exception):
    """Files ``init`` would overwrite (without ``--force``), relative to the project folder."""

    def __init__(self, folder: Path, existing: list[Path]) -> None:
        self.folder, self.existing = folder, existing
        names = ", ".join(str(p) for p in existing)
        super().__init__(f"{folder} already has {names}")


@dataclass(frozen=True, slots=True)
class Created:
    """What :func:`init_project` did: the project folder and the files written in it."""

    folder: Path
    files: list[Path]


def init_project(folder: Path, *, force: bool = False) -> Created:
    """Write the project template into ``folder`` (created with its parents when missing).

    Existing files are checked first, so a refusal writes nothing.

    Raises:
        ProjectExists: Some of the files exist and ``force`` is false.
        NotADirectoryError: ``folder`` is a file.
        OSError: The folder cannot be written.
    """
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is a file, not a folder")
    targets = [(TEMPLATE_DIR / source, folder / dest) for source, dest in FILES]
    existing = [dest.relative_to(folder) for _, dest in targets if dest.exists() or dest.is_symlink()]
    if existing and not force:
        raise ProjectExists(folder, existing)
    written = []
    for source, dest in targets:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink():
            dest.unlink()  # --force replaces a link with the file, never writes through it
        shutil.copyfile(source, dest)
        written.append(dest)
    return Created(folder=folder, files=written)


def next_steps(created: Created, named: str) -> list[str]:
    """The lines printed after a project is created (``named``: the folder as the user typed it)."""
    cd = [] if named in ("", ".") else [f"  cd {named}"]
    return [
        f"Created an Evalsite project in {created.folder}:",
        *(f"  {path.relative_to(created.folder)}" for path in created.files),
        "",
        "Next steps:",
        *cd,
        "  evalsite eval agents --set sets/example.jsonl --target calculator --variant careful",
        "  evalsite eval agents --set sets/example.jsonl --target calculator --variant hasty",
        "  evalsite createsuperuser && evalsite serve     # the portal at http://127.0.0.1:8000/",
        "",
        "Results go to var/ in the project folder; settings in .env (see README.md).",
    ]


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``evalsite init`` (also read by ``scripts/gen_reference.py`` for the docs)."""
    parser = argparse.ArgumentParser(
        prog="evalsite init",
        description="Create an Evalsite project: an agents folder with an example target, a small "
        "case bank (sets/example.jsonl) and a .env template.",
    )
    parser.add_argument("dir", nargs="?", default=".", help="the project folder (default: the current one)")
    parser.add_argument("--force", action="store_true", help="overwrite the files init writes when they exist")
    return parser


def main(argv: list[str]) -> int:
    """``evalsite init [DIR] [--force]``; returns the exit code (0 done, 2 refused)."""
    args = build_parser().parse_args(argv)
    folder = Path(args.dir).absolute()
    try:
        created = init_project(folder, force=args.force)
    except ProjectExists as exc:
        sys.stderr.write(f"evalsite init: error: {exc}; nothing written (--force overwrites them)\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"evalsite init: error: {exc}\n")
        return 2
    print("\n".join(next_steps(created, args.dir)))
    return 0
