"""Every fenced code block of the docs site (``docs/**/*.md``) and the README runs in a test
(issue 24, "The house, second step"): a sample that drifts from the code fails here.

One test per block (``page:line:language``), so pytest-xdist spreads them. What each kind gets:

* ``python``: a block whose first line is ``# some/path.py`` is a file the reader writes: it is
  written into a temporary project folder, and when it lies in ``agents/`` that folder is
  imported as ``evalsite targets`` does (every module loads, no problem reported). Any other block runs as a script
  (``python -``) in a temporary project folder, with its own SQLite database.
* ``bash`` / ``sh`` / ``console`` / ``shell``: every ``evalsite`` command in the block is parsed by
  that command's own argparse parser (an unknown option or a missing argument fails), then the
  block runs with ``bash -e`` in a temporary project folder (``examples/`` linked in, the page's
  ``# agents/...`` files written, a migrated SQLite database of its own): every command must
  succeed.
* ``json`` / ``jsonl``: parsed; a block holding a case (``id`` with ``input`` or ``turns``) is
  loaded with the real case loader (:func:`evalcore.loaders.load_cases`). ``yaml``: parsed, as
  ``ini``.
* ``text`` (and an untagged fence): output or a synopsis, not code; each ``evalsite`` line in it
  names only options that command has (``docs/cli.md``'s synopsis checked against the parsers).

A shell block marked ``<!-- run-with: stored-runs -->`` runs after a set named ``qa`` and two
eval runs of it were stored; its commands' ``RUN_ID`` / ``EVAL_RUN_ID`` / ``A`` / ``B`` are
those runs' ids.

A block that cannot run here carries an HTML comment on the line right before its fence:
``<!-- not-run: why -->`` (needs a network service, a running portal, the reader's own files, a
build...) or ``<!-- tested-in: tests/some_test.py -->`` (run as written by that test, which names
the page). A not-run block is still checked as far as it can be (``python``: compiled; shell:
each ``evalsite`` command parsed) and then skipped with its reason, so ``pytest -rs`` lists them
all and the summary counts them.

Run: ``.venv/bin/python -m pytest -q -p no:cacheprovider -rs tests/test_docs_blocks.py``
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PAGES = sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"])
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*\{?\.?(?P<lang>[\w+-]*)[^`]*$")
"""An opening fence: its language is the first word of the info string (```python title="x"`` and
``{.python}`` too)."""
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not-run|tested-in|run-with):\s*(?P<reason>.*?)\s*-->\s*$")
SHELL = {"bash", "sh", "console", "shell"}
TEXT = {"text", ""}
OPERATORS = {"&&", "||", "|", ";", "&"}
REDIRECTS = {">", ">>", "<", "2>", "&>"}
TIMEOUT_S = 120


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    """The page, relative to the repository root (``docs/cli.md``)."""
    line: int
    """1-based line of the opening fence."""
    lang: str
    """The fence's language (``""`` when untagged)."""
    text: str
    """The block's content, its fence's indentation removed."""
    marker: str | None
    """``not-run``, ``tested-in`` or ``run-with`` when the line before the fence says so."""
    reason: str
    """The marker's text."""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}:{self.lang or 'untagged'}"


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file; an unclosed fence is an error naming the line."""
    lines = path.read_text().splitlines()
    page = str(path.relative_to(ROOT))
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence = opened["indent"], opened["fence"]
        body: list[str] = []
        j = i + 1
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")  # as long, or longer
        while j < len(lines) and not closing.match(lines[j]):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if j == len(lines):
            raise AssertionError(f"{page}:{i + 1}: a code fence that is never closed")
        marker = MARKER.match(lines[i - 1]) if i else None
        found.append(
            Block(
                page=page,
                line=i + 1,
                lang=opened["lang"].lower(),
                text="\n".join(body) + "\n",
                marker=marker["kind"] if marker else None,
                reason=marker["reason"] if marker else "",
            )
        )
        i = j + 1
    return found


BLOCKS = [block for page in PAGES for block in blocks_of(page)]


# -- shell commands ----------------------------------------------------------------------------


def shell_commands(text: str) -> list[list[str]]:
    """The simple commands of a shell block: continuations joined, comments, redirections and
    leading ``VAR=value`` assignments removed; one word list per command."""
    joined = re.sub(r"\\\n\s*", " ", text)
    commands: list[list[str]] = []
    for line in joined.splitlines():
        lex = shlex.shlex(line, posix=True, punctuation_chars="&|;<>")
        lex.whitespace_split = True
        lex.commenters = "#"
        words: list[str] = []
        skip_next = False
        for token in lex:
            if skip_next:
                skip_next = False
                continue
            if token in OPERATORS:
                commands.append(words)
                words = []
            elif token in REDIRECTS or (token.endswith(">") and token[:-1].isdigit()):
                skip_next = True
            else:
                words.append(token)
        commands.append(words)
    cleaned = []
    for words in commands:
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words = words[1:]
        if words:
            cleaned.append(words)
    return cleaned


def evalsite_parser(command: str) -> argparse.ArgumentParser:
    """The argparse parser of ``evalsite COMMAND`` (as typed: ``import-run`` too)."""
    from django.core.management import get_commands, load_command_class

    from evalsite.cli import COMMAND_ALIASES
    from evalsite.scaffold import build_parser

    if command == "init":
        return build_parser()
    name = COMMAND_ALIASES.get(command, command)
    app = get_commands().get(name)
    assert app is not None, f"`evalsite {command}`: no such command"
    return load_command_class(app, name).create_parser("evalsite", command)


def option_names(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of a parser and of its subcommands' parsers."""
    names = {"--db"}  # read by the `evalsite` script itself (evalsite.cli.take_db_option)
    for action in parser._actions:
        names.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                names |= option_names(sub)
    return names


def without_db(args: list[str]) -> list[str]:
    """``--db PATH`` / ``--db=PATH`` removed, as the ``evalsite`` script does before Django starts."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--db":
            skip = True
        elif not arg.startswith("--db="):
            out.append(arg)
    return out


def check_evalsite_command(words: list[str], where: str) -> None:
    """Parse one ``evalsite ...`` command with its parser; ``...`` (elided arguments) only has its
    options' names checked."""
    from django.core.management import CommandError

    assert len(words) > 1, f"{where}: `evalsite` without a command"
    parser = evalsite_parser(words[1])
    args = words[2:]
    if "..." in args or any(a.endswith("...") for a in args):
        check_option_names(" ".join(words), where)
        return
    try:
        parser.parse_args(without_db(args))
    except (CommandError, SystemExit) as exc:
        raise AssertionError(f"{where}: `{' '.join(words)}` does not parse: {exc}") from exc


def check_option_names(line: str, where: str) -> None:
    """Each ``--option`` a synopsis line gives ``evalsite COMMAND`` is one of that command's."""
    command = line.split()[1]
    known = option_names(evalsite_parser(command))
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line))
    assert named <= known, f"{where}: `evalsite {command}` has no option {', '.join(sorted(named - known))}"


def check_shell_block(block: Block) -> None:
    """Parse every ``evalsite`` command of a shell block."""
    for words in shell_commands(commands_of(block)):
        if words[0] == "evalsite":
            check_evalsite_command(words, block.id)


# -- running -----------------------------------------------------------------------------------


def run(args: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None) -> None:
    """Run a command; a failure shows its output."""
    done = subprocess.run(args, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, (
        f"exit {done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    )


def file_blocks(page: str) -> dict[str, str]:
    """The page's Python blocks that are files (first line ``# some/path.py``): path -> text."""
    files = {}
    for block in BLOCKS:
        if block.page == page and block.lang == "python":
            first = block.text.split("\n", 1)[0]
            if re.match(r"^# [\w./-]+\.py$", first):
                files[first[2:]] = block.text
    return files


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, made once per session (per xdist worker) and copied per block."""
    folder = tmp_path_factory.mktemp("docs-db")
    env = project_env(folder, folder / "template.sqlite3")
    run([str(BIN / "evalsite"), "migrate", "--verbosity", "0"], folder, env)
    return folder / "template.sqlite3"


def project_env(folder: Path, db: Path) -> dict[str, str]:
    """The environment a block runs in: the venv first on PATH, its own data folder and
    database, no ``.env``, no other database or queue configured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALSITE_", "PYTEST_")) and k != "DATABASE_URL"}
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "EVALSITE_DB": str(db),
            "EVALSITE_DATA_DIR": str(folder / "var"),
            "EVALSITE_ENV_FILE": "",
            "DJANGO_SETTINGS_MODULE": "evalsite.settings",
        }
    )
    return env


def project(block: Block, tmp_path: Path, migrated_db: Path | None) -> tuple[Path, dict[str, str]]:
    """A temporary project folder for a block: ``examples/`` linked in, the page's files written."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "examples").symlink_to(ROOT / "examples")
    for name, text in file_blocks(block.page).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    db = folder / "var" / "evalsite.sqlite3"
    db.parent.mkdir(parents=True, exist_ok=True)
    if migrated_db is not None:
        shutil.copyfile(migrated_db, db)
    return folder, project_env(folder, db)


DISCOVER = """
from evalcore.discovery import discover_targets
found = discover_targets("agents")
assert not found.problems, [f"{p.path}: {p.message}" for p in found.problems]
assert found.targets, "the agents folder declares no target"
"""
"""Imports an agents folder as ``evalsite targets`` does; fails on any module's problem."""


def run_python(block: Block, tmp_path: Path) -> None:
    first = block.text.split("\n", 1)[0]
    if re.match(r"^# [\w./-]+\.py$", first):
        folder, env = project(block, tmp_path, None)
        path = first[2:]
        if path.startswith("agents/"):
            run([sys.executable, "-"], folder, env, stdin=DISCOVER)
        else:
            run([sys.executable, path], folder, env)
        return
    folder, env = project(block, tmp_path, None)
    prelude = (
        "import django\ndjango.setup()\n" if re.search(r"^\s*(from|import) (django|apps)\b", block.text, re.M) else ""
    )
    run([sys.executable, "-"], folder, env, stdin=prelude + block.text)


STORED_RUNS_AGENT = """
from evalcore.discovery import target


@target(id="docs-echo", scorers=["exact_match"])
def echo(question):
    return "4"
"""
STORED_RUNS_SET = "".join(
    json.dumps({"id": f"q{i}", "input": f"{i}+{4 - i}", "expected": "4" if i < 3 else "5", "split": "dev"}) + "\n"
    for i in range(1, 5)
)
PLACEHOLDERS = re.compile(r"(?<![\w-])(RUN_ID|EVAL_RUN_ID|A|B)(?![\w-])")


def stored_runs(folder: Path, env: dict[str, str]) -> dict[str, str]:
    """``<!-- run-with: stored-runs -->``: a set named ``qa`` (4 cases) and two finished eval
    runs of it; returns the placeholders a block may use (``RUN_ID``, ``EVAL_RUN_ID``, ``A``,
    ``B``) -> eval run ids."""
    (folder / "agents").mkdir(exist_ok=True)
    (folder / "agents" / "docs_echo.py").write_text(STORED_RUNS_AGENT)
    (folder / "sets").mkdir(exist_ok=True)
    (folder / "sets" / "qa.jsonl").write_text(STORED_RUNS_SET)
    evalsite = str(BIN / "evalsite")
    run([evalsite, "import", "sets/qa.jsonl"], folder, env)
    ids = []
    for variant in ("a", "b"):
        report = folder / f"run-{variant}.json"
        run([evalsite, "eval", "agents", "--set", "qa", "--target", "docs-echo", "--variant", variant, "--quiet",
             "--json", str(report)], folder, env)  # fmt: skip
        ids.append(json.loads(report.read_text())["eval_run"]["id"])
    return {"RUN_ID": ids[0], "EVAL_RUN_ID": ids[0], "A": ids[0], "B": ids[1]}


def with_placeholders(text: str, values: dict[str, str]) -> str:
    """The block with each placeholder word of its ``evalsite`` commands (not its comments)
    replaced by a stored run's id."""
    out = []
    for line in text.splitlines():
        command, hash_, comment = line.partition("  #")
        if command.lstrip().startswith("evalsite "):
            command = PLACEHOLDERS.sub(lambda m: values[m.group(1)], command)
        out.append(command + hash_ + comment)
    return "\n".join(out) + "\n"


def commands_of(block: Block) -> str:
    """The block as a script: a ``console`` block's ``$ `` lines only (the rest is output)."""
    if block.lang != "console":
        return block.text
    return "".join(line[2:] + "\n" for line in block.text.splitlines() if line.startswith("$ "))


def run_shell(block: Block, tmp_path: Path, migrated_db: Path) -> None:
    check_shell_block(block)
    folder, env = project(block, tmp_path, migrated_db)
    text = commands_of(block)
    if block.marker == "run-with":
        assert block.reason == "stored-runs", f"{block.id}: run-with knows only stored-runs, not {block.reason!r}"
        text = with_placeholders(text, stored_runs(folder, env))
    run(["bash", "-e", "-o", "pipefail", "-c", text], folder, env)


def check_data(block: Block, tmp_path: Path) -> None:
    if block.lang == "yaml":
        yaml.safe_load(block.text)
        return
    if block.lang == "ini":
        configparser.ConfigParser().read_string(block.text)
        return
    values = (
        [json.loads(line) for line in block.text.splitlines() if line.strip()]
        if block.lang == "jsonl"
        else [json.loads(block.text)]
    )
    cases = [v for v in values if isinstance(v, dict) and "id" in v and ("input" in v or "turns" in v)]
    if cases:
        from evalcore.loaders import load_cases

        path = tmp_path / "cases.jsonl"
        path.write_text("".join(json.dumps(case) + "\n" for case in cases))
        loaded = load_cases(path)
        assert [c.id for c in loaded.cases] == [c["id"] for c in cases]


def check_text(block: Block) -> None:
    lines = [line for line in re.sub(r"\\\n\s*", " ", block.text).splitlines() if line.startswith("evalsite ")]
    for line in lines:
        check_option_names(line.split("  #", 1)[0], block.id)


# -- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_code_block(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    kind = block.lang
    if block.marker == "tested-in":
        test_file = ROOT / block.reason
        assert test_file.is_file(), f"{block.id}: tested-in names no file: {block.reason}"
        page_name = Path(block.page).name
        assert page_name in test_file.read_text(), f"{block.id}: {block.reason} does not read {page_name}"
        pytest.skip(f"{block.id}: tested in {block.reason}")
    if block.marker == "not-run":
        assert block.reason, f"{block.id}: a not-run marker says why"
        if kind == "python":
            compile(block.text, block.id, "exec")
        elif kind in SHELL:
            check_shell_block(block)
        elif kind in TEXT:
            check_text(block)
        pytest.skip(f"{block.id}: not run: {block.reason}")
    if kind == "python":
        run_python(block, tmp_path)
    elif kind in SHELL:
        run_shell(block, tmp_path, request.getfixturevalue("migrated_db"))
    elif kind in {"json", "jsonl", "yaml", "ini"}:
        check_data(block, tmp_path)
    elif kind in TEXT:
        check_text(block)
    else:
        raise AssertionError(f"{block.id}: no check for a ```{kind} block: add one here or mark it not-run")


def test_the_blocks_are_found_and_counted() -> None:
    """The walk finds the samples (a broken fence pattern would silently test nothing), and the
    blocks that cannot run here stay a minority, each with its reason."""
    by_page = {b.page for b in BLOCKS}
    assert {"README.md", "docs/targets.md", "docs/case-banks.md", "docs/reference/cli.md"} <= by_page
    not_run = [b for b in BLOCKS if b.marker in ("not-run", "tested-in")]
    run_here = [b for b in BLOCKS if b.marker in (None, "run-with")]
    assert all(b.reason for b in not_run)
    assert len(run_here) > len(not_run), [b.id for b in not_run]
    untagged = [b.id for b in BLOCKS if b.lang == "" and not b.marker]
    assert untagged == [], "give these blocks a language (```text for output or a synopsis)"
