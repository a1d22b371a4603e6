"""Move the modules of ``apps/evals`` into role folders (issue 24, "Rooms by role") and rewrite
every reference to them across the repository.

    python scripts/move_evals_rooms.py

Run from the repository root, once, on a tree where the move has not happened yet. It refuses to
start when a module of ``apps/evals`` is in none of the tables below (add it first), when a
target already exists, or when the move has already been made. What it does:

* ``git mv`` of each module to its folder (:data:`MOVES`); a few modules are split by definition
  (:data:`SPLITS`): ``models.py`` into ``models/`` (re-exported by ``models/__init__.py``, so
  ``apps.evals.models.X`` still works; same app label, ``db_table`` names and migrations),
  ``liveness.py`` into the executor identity the result writer needs (``results/``) and a run's
  liveness (``runs/``), ``admin.py`` into sets and runs, and two definitions that sat above their
  readers (the ``points`` label format, the demo users list) go down to the room that uses them;
* every import, dotted path (strings, docstrings, mock targets, RQ and task names, comments) and
  ``apps/evals/...py`` file path that names a moved module, in the tracked files under
  :data:`REWRITE_ROOTS`, then ruff's import sorting on the Python files it changed;
* the inner import-linter ``layers`` contract added to ``pyproject.toml``;
* ``ARCHITECTURE.md`` written anew: the folder map and where a new thing goes.

Deleted once the move is committed.
"""

# ruff: noqa: E501 - ARCHITECTURE.md's table rows, written below, are one line each

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path.cwd()
APP = ROOT / "apps" / "evals"
PKG = "apps.evals"
RUFF = str(Path(sys.executable).with_name("ruff"))

# -- the tables ---------------------------------------------------------------------------------

KEEP = {
    "__init__",
    "apps",
    "urls",
    "checks",
    "events",
}
"""Modules that stay at the top: Django's fixed names and the event hub."""

KEEP_PACKAGES = {"templatetags", "management", "migrations", "queries", "views"}
"""Folders that stay (``queries/`` and ``views/`` are role folders already)."""

MOVES = {
    # models/
    "shard_models": "models.shards",
    # sets/: writes to sets and cases
    "sets": "sets.cases",
    "set_import": "sets.file_import",
    "set_versions": "sets.versions",
    "capture": "sets.capture",
    "trace_capture": "sets.trace_capture",
    # runs/: a run's life up to the store
    "prepare": "runs.prepare",
    "execution": "runs.execution",
    "resume": "runs.resume",
    "earlystop": "runs.earlystop",
    "limits": "runs.limits",
    "run_edits": "runs.edits",
    "baseline": "runs.baseline",
    "inspect_import": "runs.inspect_import",
    "reviews": "runs.reviews",
    "casestream": "runs.casestream",
    # results/: the result writer and reading results back
    "store": "results.writer",
    "batches": "results.batches",
    "handoff": "results.handoff",
    "stored": "results.readback",
    "search_index": "results.search_index",
    # worker/: everything off the request path
    "tasks": "worker.tasks",
    "queue": "worker.queue",
    "shards": "worker.shards",
    "shardrun": "worker.shard_run",
    "shardstore": "worker.shard_writer",
    "supervisor": "worker.supervisor",
    "workers": "worker.heartbeats",
    "status": "worker.status",
    "queue_status": "worker.queue_depth",
    "rq_status": "worker.rq",
    "caseruns": "worker.caseruns",
    # exports/: every file that leaves
    "exports": "exports.downloads",
    "export_rows": "exports.run_rows",
    "export_pairs": "exports.pairs",
    "run_report_files": "exports.report_files",
    "otel_export": "exports.otel",
    # charts/: pure SVG geometry
    "charts": "charts.lines",
    "histograms": "charts.histograms",
    # api/: the routers and their schemas
    "api": "api.routes",
    "api_common": "api.common",
    "export_api": "api.exports",
    "review_api": "api.reviews",
    "status_api": "api.status",
    "pagination": "api.pagination",
    "schemas": "api.schemas",
    "rule_schemas": "api.rule_schemas",
    "slice_schemas": "api.slice_schemas",
    "set_schemas": "api.set_schemas",
    "review_schemas": "api.review_schemas",
    "run_schemas": "api.run_schemas",
    "read_models": "api.read_models",
    # views/: pages, forms, live consumers
    "capture_views": "views.capture",
    "forms": "views.forms",
    "consumers": "views.live",
    # cli/: what the commands share
    "console": "cli.console",
    "gating": "cli.gating",
    "judging": "cli.judging",
    "queued": "cli.queued",
    "serving": "cli.serving",
    "dbcheck": "cli.dbcheck",
    "error_reasons": "cli.error_reasons",
    # admin/
    "review_admin": "admin.reviews",
}
"""Old module (under ``apps.evals``) -> new module, moved whole."""


@dataclass
class Split:
    """A module whose definitions go to several modules.

    ``parts`` names the definitions each new module takes; the rest goes to ``rest`` (``None``:
    the rest stays where it is). The file itself is ``git mv``'d to ``rest`` (history follows).
    """

    parts: dict[str, list[str]]
    rest: str | None
    docstrings: dict[str, str] = field(default_factory=dict)
    copy: list[str] = field(default_factory=list)
    """Definitions every part that uses them gets a copy of (a module's logger)."""
    drop_imports: list[str] = field(default_factory=list)
    """Imports of these modules are left out of every part."""
    drop_lines: list[str] = field(default_factory=list)
    """Source lines holding this text are left out before splitting."""
    append: dict[str, str] = field(default_factory=dict)
    """Text appended to a part after the split."""
    facade: str | None = None
    """The package ``__init__.py`` this split writes (re-exporting every public name), if any."""
    doc_append: dict[str, str] = field(default_factory=dict)
    """A paragraph added to a part's docstring (the source's, kept)."""
    undecorate: list[str] = field(default_factory=list)
    """Definitions that leave their decorators behind (a template filter's registration)."""


SPLITS: dict[str, Split] = {
    "models": Split(
        parts={
            "models.sets": ["Split", "EvalSet", "SetVersion", "SetVersionCase", "CaseSnapshot", "EvalCase"],
            "models.reviews": ["ReviewVerdict", "Review", "ReviewRevision", "ReviewAssignment"],
            "models.workers": ["TaskWorker"],
        },
        rest="models.runs",
        docstrings={
            "models.sets": "Eval sets, their versions and their cases.",
            "models.runs": (
                "Eval runs and their per-case results.\n\n"
                "A result annotates a ``traces.Run`` (output, tokens, timings, error live there) with scores and\n"
                "the verdict; nothing is stored twice."
            ),
            "models.reviews": "People's reviews of results, their history, and who is asked to review what.",
            "models.workers": "The task workers' own rows (``apps.evals.worker.heartbeats``).",
        },
        drop_imports=["apps.evals.models.shards"],
        facade=(
            '"""The evals tables, one module per topic (:mod:`.sets`, :mod:`.runs`, :mod:`.reviews`,\n'
            ":mod:`.workers`, :mod:`.shards`), re-exported here: ``from apps.evals.models import EvalRun``\n"
            'is how every other module names them."""\n'
        ),
    ),
    "liveness": Split(
        parts={
            "results.executor": [
                "current_run_id",
                "Executor",
                "this_executor",
                "heartbeat_interval_s",
                "stale_after_s",
                "pid_alive",
                "this_namespace",
                "is_alive",
                "live_executors",
                "executor_fields",
                "database_file",
                "file_identity",
            ],
        },
        rest="runs.liveness",
        copy=["log"],
        doc_append={
            "runs.liveness": (
                "Who executes a run, its heartbeat's period and whether a process is alive:\n"
                ":mod:`apps.evals.results.executor`."
            ),
        },
        docstrings={
            "results.executor": (
                "Who executes a run: this process as stamped on a run's row, the heartbeat's period and\n"
                "staleness, whether a process or a task worker is alive, and the case whose target runs in\n"
                "this context (the result writer sets it; the exit guard reads it)."
            ),
        },
    ),
    "admin": Split(
        parts={"admin.runs": ["EvalRunAdmin", "EvalResultAdmin"]},
        rest="admin.sets",
        drop_lines=["(registers the read-only review admin)"],
        docstrings={
            "admin.sets": (
                "Authoring in the admin: sets and cases (editable, bulk actions, case-bank upload).\n\n"
                "The upload goes through the same loader and import service as the CLI (``evalcore.loaders\n"
                ".load_cases``, reading the uploaded file object itself, then ``cases.import_cases``), so the\n"
                "messages name the same file, line and field, and a bad file imports nothing."
            ),
            "admin.runs": "Eval runs and their results in the admin: read-only.",
        },
        facade=(
            '"""The evals admin: sets and cases (:mod:`.sets`), runs and results (:mod:`.runs`) and reviews\n'
            '(:mod:`.reviews`); Django\'s autodiscovery imports this package, each module registers its own."""\n'
            "\n"
            "from apps.evals.admin import reviews, runs, sets  # noqa: F401 - each registers its admin classes\n"
        ),
    ),
    "templatetags.evals_tags": Split(
        parts={"charts.lines": ["points"]},
        rest=None,
        undecorate=["points"],
        append={
            "templatetags.evals_tags": (
                "\n\n# a chart's tooltip and the pages format a delta the same way (defined with the charts)\n"
                'register.filter("points", points)\n'
            ),
        },
    ),
    "management.commands.demo_users": Split(
        parts={"cli.demo_users": ["DEMO_USERS"]},
        rest=None,
        docstrings={
            "cli.demo_users": (
                "The local demo accounts (``evalsite demo_users`` creates them, ``evalsite serve`` names\n"
                "them): user name, password, what the role may do. For a local demo only."
            ),
        },
    ),
}

PACKAGES = {
    "models": None,  # written by its split
    "admin": None,
    "sets": "Writes to eval sets and their cases: imports, versions, captures.",
    "runs": "A run's life up to the store: prepare, execute, resume, stop early, edit, compare with a baseline.",
    "results": (
        "The result writer and reading results back: the writer, its batches and hand-off, a stored\n"
        "run read as engine values, the search index, and who executes a run."
    ),
    "worker": (
        "Everything off the request path: tasks, the shard queue, shards and their writer, the\n"
        "supervisor, workers' heartbeats, queue depth and RQ, and what ``/status/`` shows."
    ),
    "exports": "Every file that leaves: downloads, report files, OTLP traces.",
    "charts": "Server-rendered SVG geometry: line charts and histograms (the templates draw them).",
    "api": "The evals JSON API: one router per area, its schemas beside it (mounted by ``evalsite.api``).",
    "cli": "What the commands share: database readiness, printing, the judge options, the queue executor.",
}
"""New folders and the docstring of their ``__init__.py`` (kept when the folder already has one)."""

LAYERS_CONTRACT = """
[[tool.importlinter.contracts]]
name = "Rooms of apps.evals: a folder imports only from its own layer or lower ones"
type = "layers"
layers = [
    "apps.evals.management",
    "apps.evals.views | apps.evals.api | apps.evals.cli | apps.evals.templatetags",
    "apps.evals.worker",
    "apps.evals.runs | apps.evals.admin",
    "apps.evals.sets | apps.evals.exports",
    "apps.evals.queries",
    "apps.evals.charts | apps.evals.results",
    "apps.evals.models",
]
"""

REWRITE_ROOTS = (
    "apps",
    "evalsite",
    "evalcore",
    "tests",
    "scripts",
    "bench",
    "docs",
    "examples",
    "README.md",
    "ARCHITECTURE.md",
    "pyproject.toml",
    "Makefile",
    "setup.py",
    "manage.py",
    "mkdocs.yml",
)
REWRITE_SUFFIXES = {".py", ".md", ".toml", ".html", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".sh", ".json", ""}
SELF = "scripts/move_evals_rooms.py"


# -- helpers ------------------------------------------------------------------------------------


def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    if cmd[0] == RUFF and not any(part.endswith(".py") for part in cmd):
        return subprocess.CompletedProcess(cmd, 0, "", "")  # no files: never the whole tree
    done = subprocess.run(cmd, cwd=ROOT, text=True, capture_output=True)
    if check and done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    return done


def path_of(module: str) -> Path:
    """``worker.tasks`` -> apps/evals/worker/tasks.py."""
    return APP.joinpath(*module.split(".")).with_suffix(".py")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def top_names(source: str) -> list[str]:
    """Names a module defines at its top level (functions, classes, assigned names)."""
    names: list[str] = []
    for node in ast.parse(source).body:
        names += _defined(node)
    return names


def _defined(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


# -- preflight ----------------------------------------------------------------------------------


def preflight() -> None:
    problems: list[str] = []
    if not (APP / "liveness.py").exists() and path_of("results.executor").exists():
        sys.exit("the move has already been made")
    for path in sorted(APP.glob("*.py")):
        name = path.stem
        if name not in KEEP and name not in MOVES and name not in SPLITS:
            problems.append(f"{rel(path)}: in no table (add it to MOVES, SPLITS or KEEP)")
    for path in sorted(p for p in APP.iterdir() if p.is_dir() and p.name != "__pycache__"):
        if path.name not in KEEP_PACKAGES and path.name not in PACKAGES:
            problems.append(f"{rel(path)}/: a folder in no table")
    for old, new in MOVES.items():
        if not path_of(old).exists():
            problems.append(f"{rel(path_of(old))}: missing (moved already?)")
        if path_of(new).exists():
            problems.append(f"{rel(path_of(new))}: already exists")
    for old, split in SPLITS.items():
        if not path_of(old).exists():
            problems.append(f"{rel(path_of(old))}: missing")
        for new in split.parts:
            if path_of(new).exists() and new not in MOVES.values():
                problems.append(f"{rel(path_of(new))}: already exists")
        names = set(top_names(path_of(old).read_text()))
        for wanted in split.parts.values():
            for name in wanted:
                if name not in names:
                    print(f"note: {old}.{name} no longer exists; skipped")
    if problems:
        sys.exit("refused:\n  " + "\n  ".join(problems))
    for old, split in SPLITS.items():
        plan_split(old, split, quiet=True)


# -- where each old name now lives --------------------------------------------------------------


@dataclass
class Index:
    """Old module -> new module, and (old module, name) -> new module for split ones."""

    module: dict[str, str] = field(default_factory=dict)
    names: dict[str, dict[str, str]] = field(default_factory=dict)
    facades: set[str] = field(default_factory=set)

    def target(self, old: str, name: str | None) -> str:
        if name is not None and name in self.names.get(old, {}):
            return self.names[old][name]
        return self.module[old]


def build_index() -> Index:
    index = Index()
    for old, new in MOVES.items():
        index.module[old] = new
        index.names[old] = dict.fromkeys(top_names(path_of(old).read_text()), new)
    for old, split in SPLITS.items():
        rest = split.rest or old
        index.module[old] = rest
        index.names[old] = dict.fromkeys(top_names(path_of(old).read_text()), rest)
        for new, wanted in split.parts.items():
            for name in wanted:
                index.names[old][name] = new
    # a package that re-exports every name keeps its old dotted name working: leave it alone
    index.facades = {"models"}
    return index


# -- moving and splitting -----------------------------------------------------------------------


def git_mv(old: str, new: str) -> None:
    target = path_of(new)
    target.parent.mkdir(parents=True, exist_ok=True)
    run("git", "mv", rel(path_of(old)), rel(target))


def make_packages() -> None:
    for folder, doc in PACKAGES.items():
        init = APP / folder / "__init__.py"
        (APP / folder).mkdir(exist_ok=True)
        if init.exists() or doc is None:
            continue
        init.write_text(f'"""{doc}"""\n')
        run("git", "add", rel(init))


@dataclass
class Unit:
    names: list[str]
    text: str
    used: set[str]
    index: int = -1
    """Its place in the source (-1: not from it)."""
    gap: int = 1
    """Blank lines above it in the source."""


def _used_names(node: ast.AST) -> set[str]:
    """The names a statement reads from its module: every name read, less those it binds inside
    a function or class of its own (parameters, local variables)."""
    read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    local: set[str] = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            args = inner.args
            local |= {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
            for sub in ast.walk(inner):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    local.add(sub.id)
    return read - local


def parse_units(source: str, drop_imports: list[str], undecorate: list[str] = ()) -> tuple[str, list[str], list[Unit]]:
    """(docstring as written, import statements, units): each unit a top-level statement with
    the comments above it, and a string right after an assignment (its docstring)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    body = list(tree.body)
    doc = ""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        doc = ast.get_source_segment(source, body[0]) or ""
        body = body[1:]
    imports: list[str] = []
    while body and isinstance(body[0], ast.Import | ast.ImportFrom):
        node = body.pop(0)
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, ast.ImportFrom) and node.module in drop_imports:
            continue
        imports.append("".join(lines[node.lineno - 1 : node.end_lineno]).rstrip("\n"))
    units: list[Unit] = []
    cursor = _first_line(body[0]) if body else len(lines) + 1
    while cursor > 1 and lines[cursor - 2].lstrip().startswith("#"):
        cursor -= 1
    for node in body:
        end = node.end_lineno or node.lineno
        chunk = lines[cursor - 1 : end]
        if _defined(node) and _defined(node)[0] in undecorate and getattr(node, "decorator_list", None):
            first = _first_line(node)
            chunk = lines[cursor - 1 : first - 1] + lines[node.lineno - 1 : end]
            node.decorator_list = []  # the registration stays behind
        gap = 0
        while chunk and not chunk[0].strip():
            chunk, gap = chunk[1:], gap + 1
        text = "".join(chunk).rstrip("\n") + "\n"
        if units and not _defined(node) and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            units[-1].text += "\n" * gap + text  # an attribute docstring
            cursor = end + 1
            continue
        units.append(Unit(_defined(node), text, _used_names(node), index=len(units), gap=gap))
        cursor = end + 1
    return doc, imports, units


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


@dataclass
class SplitPlan:
    doc: str
    imports: list[str]
    source: str
    placed: dict[str, list[Unit]]
    needs: dict[str, dict[str, set[str]]]


def plan_split(old: str, split: Split, *, quiet: bool = False) -> SplitPlan:
    """Which definitions go where, and what each part must import from the others; exits on
    a problem (a part would import another that imports it), before anything is written."""
    source = path_of(old).read_text()
    for line in split.drop_lines:
        kept = [row for row in source.splitlines(keepends=True) if line not in row]
        if len(kept) == len(source.splitlines()) and not quiet:
            print(f"note: {old}: line not found, nothing dropped: {line}")
        source = "".join(kept)
    doc, imports, units = parse_units(source, split.drop_imports, split.undecorate)
    home: dict[str, str] = {}
    for new, wanted in split.parts.items():
        for name in wanted:
            home[name] = new
    rest = split.rest or old
    placed: dict[str, list[Unit]] = {}
    for unit in units:
        dests = {home.get(name, rest) for name in unit.names} or {rest}
        if not unit.names and not quiet:
            print(f"note: {old}: a statement that defines nothing goes to {rest}: {unit.text.splitlines()[0][:80]}")
        if len(dests) > 1:
            sys.exit(f"{old}: one statement defines names bound for {dests}")
        dest = dests.pop()
        if set(unit.names) & set(split.copy):
            for part in {*split.parts, rest}:
                placed.setdefault(part, []).append(unit)
            continue
        placed.setdefault(dest, []).append(unit)
    defined_in = {name: part for part, us in placed.items() for u in us for name in u.names if name not in split.copy}
    for part, text in split.append.items():
        placed.setdefault(part, []).append(Unit([], text.strip("\n") + "\n", _used_names(ast.parse(text))))
    # a copied unit stays only where it is used
    for part, us in placed.items():
        used = set().union(*(u.used for u in us if not set(u.names) & set(split.copy)))
        placed[part] = [u for u in us if not (set(u.names) & set(split.copy)) or set(u.names) & used]
    needs: dict[str, dict[str, set[str]]] = {}
    for part, us in placed.items():
        used = set().union(*(u.used for u in us))
        for name in used:
            other = defined_in.get(name)
            if other and other != part:
                needs.setdefault(part, {}).setdefault(other, set()).add(name)
    for part, others in needs.items():
        for other in others:
            if part in needs.get(other, {}):
                sys.exit(f"{old}: {part} and {other} would import each other: {needs[part]} / {needs[other]}")
    return SplitPlan(doc, imports, source, placed, needs)


def split_module(old: str, split: Split, index: Index) -> list[Path]:
    """Split ``old`` per ``split``; returns the files written."""
    plan = plan_split(old, split)
    doc, imports, source, placed, needs = plan.doc, plan.imports, plan.source, plan.placed, plan.needs
    written: list[Path] = []
    if split.rest is not None:
        git_mv(old, split.rest)
    for part, us in placed.items():
        path = path_of(part)
        cross = [
            f"from {PKG}.{other} import {', '.join(sorted(names))}"
            for other, names in sorted(needs.get(part, {}).items())
        ]
        body = _join(us)
        if part == old or (path.exists() and part not in split.docstrings and part != split.rest):
            # a module that stays (or one moved already): keep its head, add the imports it needs
            current = path.read_text() if path.exists() else source
            if part == old:
                head_doc, head_imports = doc, imports
                text = _module(head_doc, head_imports + cross, body)
            else:
                text = _append(current, imports + cross, body)
        else:
            part_doc = _quoted(split.docstrings[part]) if part in split.docstrings else doc
            if part in split.doc_append:
                part_doc = part_doc[:-3].rstrip() + "\n\n" + split.doc_append[part] + "\n" + '"""'
            text = _module(part_doc, imports + cross, body)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        run("git", "add", rel(path))
        written.append(path)
    if split.facade is not None:
        init = path_of(old.split(".")[0] + ".__init__")
        if old == "models":
            text = _models_facade(split, placed, index)
        else:
            text = split.facade
        init.write_text(text)
        run("git", "add", rel(init))
        written.append(init)
    return written


def _join(units: list[Unit]) -> str:
    """The units one after the other: as far apart as in the source where they were neighbours
    there, else two blank lines before a def or class and one before anything else."""
    out = ""
    previous: Unit | None = None
    for unit in units:
        if previous is not None:
            if unit.index >= 0 and unit.index == previous.index + 1:
                out += "\n" * unit.gap
            else:
                first_code = next((r for r in unit.text.splitlines() if not r.lstrip().startswith("#")), "")
                out += "\n\n" if first_code.startswith(("def ", "class ", "async def ", "@")) else "\n"
        out += unit.text
        previous = unit
    return out


def _module(doc: str, imports: list[str], body: str) -> str:
    """``doc`` as written, quotes and all."""
    head = f"{doc}\n\nfrom __future__ import annotations\n\n" if doc else "from __future__ import annotations\n\n"
    return head + "\n".join(imports) + "\n\n\n" + body.lstrip("\n")


def _quoted(doc: str) -> str:
    """A docstring as written: closing quotes on a line of their own after several paragraphs."""
    return f'"""{doc}\n"""' if "\n\n" in doc else f'"""{doc}"""'


def _append(current: str, imports: list[str], body: str) -> str:
    tree = ast.parse(current)
    last_import = max(
        (n.end_lineno or n.lineno for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)), default=0
    )
    lines = current.splitlines(keepends=True)
    text = "".join(lines[:last_import]) + "\n".join(imports) + "\n" + "".join(lines[last_import:])
    return text.rstrip("\n") + "\n\n\n" + body


def _models_facade(split: Split, placed: dict[str, list[Unit]], index: Index) -> str:
    parts = {**{p: [n for u in us for n in u.names] for p, us in placed.items()}}
    parts["models.shards"] = top_names(path_of("models.shards").read_text())
    lines = [split.facade or "", "from __future__ import annotations", ""]
    exported: list[str] = []
    for part in sorted(parts):
        names = sorted(n for n in parts[part] if not n.startswith("_"))
        exported += names
        lines.append(f"from {PKG}.{part} import (")
        lines += [f"    {n}," for n in names]
        lines.append(")")
    lines += ["", "__all__ = ["] + [f'    "{n}",' for n in sorted(exported)] + ["]", ""]
    return "\n".join(lines)


# -- rewriting references -----------------------------------------------------------------------


def files_to_rewrite() -> list[Path]:
    out = run("git", "ls-files", "-z", "--", *REWRITE_ROOTS).stdout.split("\0")
    files = []
    for name in out:
        if not name or name == SELF:
            continue
        path = ROOT / name
        if path.is_file() and (path.suffix in REWRITE_SUFFIXES or path.name == "Makefile"):
            files.append(path)
    return files


class Rewriter:
    def __init__(self, index: Index) -> None:
        self.index = index
        olds = sorted((o for o in index.module if o not in index.facades), key=len, reverse=True)
        self.dotted = re.compile(
            r"(?<![\w.])apps\.evals\.(" + "|".join(re.escape(o) for o in olds) + r")(?!\w)(?:\.([A-Za-z_]\w*))?"
        )
        self.slashed = re.compile(
            r"(?<![\w/])apps/evals/(" + "|".join(re.escape(o.replace(".", "/")) for o in olds) + r")\.py\b"
        )
        self.warnings: list[str] = []

    def new_dotted(self, match: re.Match[str]) -> str:
        old, name = match.group(1), match.group(2)
        new = self.index.target(old, name)
        if name is None and old in SPLITS and SPLITS[old].parts:
            self.warnings.append(f"bare mention of split module apps.evals.{old} -> apps.evals.{new}")
        return f"{PKG}.{new}" + (f".{name}" if name else "")

    def new_slashed(self, match: re.Match[str]) -> str:
        old = match.group(1).replace("/", ".")
        return "apps/evals/" + self.index.module[old].replace(".", "/") + ".py"

    def text(self, text: str) -> str:
        text = self.dotted.sub(self.new_dotted, text)
        return self.slashed.sub(self.new_slashed, text)

    def python(self, path: Path, source: str) -> str:
        """Imports rewritten name by name (a split module's names go to their new homes), then
        every other mention as text."""
        try:
            tree = ast.parse(source)
        except SyntaxError:
            self.warnings.append(f"{rel(path)}: not parsed; text rewrite only")
            return self.text(source)
        offsets = [0]
        for row in source.splitlines(keepends=True):
            offsets.append(offsets[-1] + len(row))
        imports: list[tuple[int, int, int, dict[str, list[tuple[str, str | None]]]]] = []
        renames: dict[str, str] = {}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            groups = self.import_from(node, renames)
            if groups is None:
                continue
            start = offsets[node.lineno - 1] + node.col_offset
            end = offsets[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)
            imports.append((start, end, node.col_offset, groups))
        spans = [(s, e) for s, e, _, _ in imports]
        edits, aliased = self.rename_edits(source, renames, offsets, spans)
        for start, end, indent, groups in imports:
            lines = []
            for module, names in groups.items():
                shown = []
                for name, asname in names:
                    if asname == "\x01":  # a renamed module: its uses renamed, or aliased back
                        old = next(o for o, n in renames.items() if n == name)
                        asname = old if old in aliased else None
                    shown.append(f"{name} as {asname}" if asname else name)
                lines.append(_import_line(module, shown, indent))
            edits.append((start, end, ("\n" + " " * indent).join(lines)))
        edits.sort()
        out: list[str] = []
        placeholders: list[str] = []
        pos = 0
        for start, end, replacement in edits:
            out.append(source[pos:start])
            out.append(f"\x00{len(placeholders)}\x00")
            placeholders.append(replacement)
            pos = end
        out.append(source[pos:])
        text = self.text("".join(out))
        return re.sub("\x00(\\d+)\x00", lambda m: placeholders[int(m.group(1))], text)

    def import_from(
        self, node: ast.ImportFrom, renames: dict[str, str]
    ) -> dict[str, list[tuple[str, str | None]]] | None:
        module = node.module or ""
        groups: dict[str, list[tuple[str, str | None]]] = {}
        if module == PKG:
            moved = [a for a in node.names if a.name in self.index.module and a.name not in self.index.facades]
            if not moved:
                return None
            for alias in node.names:
                if alias not in moved:
                    groups.setdefault(PKG, []).append((alias.name, alias.asname))
                    continue
                parent, _, leaf = self.index.module[alias.name].rpartition(".")
                if alias.asname is None and leaf != alias.name:
                    renames[alias.name] = leaf
                    groups.setdefault(f"{PKG}.{parent}", []).append((leaf, "\x01"))
                elif leaf == (alias.asname or alias.name):
                    groups.setdefault(f"{PKG}.{parent}", []).append((leaf, None))
                else:
                    groups.setdefault(f"{PKG}.{parent}", []).append((leaf, alias.asname))
        elif module.startswith(PKG + "."):
            old = module[len(PKG) + 1 :]
            if old not in self.index.module or old in self.index.facades:
                return None
            for alias in node.names:
                new = self.index.target(old, alias.name)
                groups.setdefault(f"{PKG}.{new}", []).append((alias.name, alias.asname))
        else:
            return None
        return groups

    def rename_edits(
        self, source: str, renames: dict[str, str], offsets: list[int], spans: list[tuple[int, int]]
    ) -> tuple[list[tuple[int, int, str]], set[str]]:
        """Uses of a module imported as ``from apps.evals import X`` whose file got another name
        ``Y``: ``X.attr`` becomes ``Y.attr`` when every use of ``X`` is an attribute access and
        ``Y`` is no name of the file yet; otherwise the import says ``Y as X`` (returned)."""
        edits: list[tuple[int, int, str]] = []
        aliased: set[str] = set()
        if not renames:
            return edits, aliased
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        layout = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
        names_in_file = set()
        for i, tok in enumerate(tokens):
            before = next((t.string for t in reversed(tokens[:i]) if t.type not in layout), "")
            if tok.type != tokenize.NAME or before == ".":
                continue  # an attribute is no name of the file
            after = tokens[i + 1].string if i + 1 < len(tokens) else ""
            if not (after == "=" and before in ("(", ",")):  # a keyword argument is none either
                names_in_file.add(tok.string)
        for old, new in renames.items():
            uses: list[int] = []
            safe = new not in names_in_file
            for i, tok in enumerate(tokens):
                if tok.type != tokenize.NAME or tok.string != old:
                    continue
                offset = offsets[tok.start[0] - 1] + tok.start[1]
                if any(s <= offset < e for s, e in spans):
                    continue
                if i and tokens[i - 1].string == ".":
                    continue
                if i + 1 >= len(tokens) or tokens[i + 1].string != ".":
                    safe = False
                uses.append(offset)
            if safe:
                edits += [(u, u + len(old), new) for u in uses]
            else:
                aliased.add(old)
        return edits, aliased


def _alias(name: str, asname: str | None) -> str:
    return f"{name} as {asname}" if asname else name


def _import_line(module: str, names: list[str], indent: int = 0) -> str:
    one = f"from {module} import {', '.join(names)}"
    if indent + len(one) <= 120:
        return one
    pad = " " * indent
    return f"from {module} import (\n" + "".join(f"{pad}    {n},\n" for n in names) + f"{pad})"


def rewrite_all(index: Index) -> list[Path]:
    rewriter = Rewriter(index)
    changed: list[Path] = []
    for path in files_to_rewrite():
        try:
            source = path.read_text()
        except UnicodeDecodeError:
            continue
        if "apps.evals" not in source and "apps/evals" not in source:
            continue
        new = rewriter.python(path, source) if path.suffix == ".py" else rewriter.text(source)
        if new != source:
            path.write_text(new)
            changed.append(path)
    for warning in sorted(set(rewriter.warnings)):
        print(f"note: {warning}")
    return changed


# -- pyproject, ARCHITECTURE --------------------------------------------------------------------


def add_contract() -> None:
    path = ROOT / "pyproject.toml"
    text = path.read_text()
    if "Rooms of apps.evals" in text:
        return
    start = text.index("[tool.importlinter]")
    nxt = re.search(r"^\[(?!\[)(?!tool\.importlinter)", text[start + 1 :], re.M)
    at = start + 1 + nxt.start() if nxt else len(text)
    text = text[:at].rstrip("\n") + "\n" + LAYERS_CONTRACT + "\n" + text[at:]
    path.write_text(text)


def write_architecture() -> None:
    (ROOT / "ARCHITECTURE.md").write_text(ARCHITECTURE)
    named = re.findall(r"`((?:apps|evalcore|evalsite)/[a-z_/.]+\.(?:py|html|css))`", ARCHITECTURE)
    missing = [p for p in named if not (ROOT / p).exists()]
    for p in missing:
        print(f"note: ARCHITECTURE.md names {p}, which does not exist")


ARCHITECTURE = """\
# Architecture

The folder map, and which file to copy when you add something.

## Floors

```
evalsite        settings, root urls, asgi/routing, the one NinjaAPI and its error mapping, templates,
                static files, the project folder (paths.py) and `evalsite init` (scaffold.py)
apps.evals      eval sets, cases, runs, results, reviews: the rooms below
apps.agents     playground sessions, the cached target registry
apps.traces     runs (traces) and their events, the OTLP endpoint and store
apps.core       what every app shares: role checks, render_page, ReadOnlyAdmin, API tokens, bulk writes
evalcore        the engine: cases, targets, runner, scorers, judge, stats, gates, splits, loaders, otel.
                Never imports Django (it runs in a notebook or plain pytest)
```

A module imports only from its own floor or a lower one. A lower floor that needs something from a
higher one gets it through an event or a registered source (`apps.evals.events`, `apps.agents.examples`).

## The rooms of `apps/evals`

One Django app (label `evals`), folders by role; the same topic name repeats across them
(`runs/`, `queries/`, `api/routes.py`, `views/eval_runs.py`), so a path can be guessed.

```
management/     the commands: parse, call a service, print; they decide nothing
views/ | api/ | cli/ | templatetags/
                pages, forms, live consumers (views/live.py) | the JSON routers and their schemas |
                what the commands share (console, gating, judging, the queue executor, serve) | filters
worker/         off the request path: tasks, the shard queue, shards and their writer, supervisor,
                workers' heartbeats, queue depth, RQ, what /status/ shows
runs/ | admin/  a run's life up to the store: its config, prepare, execute, resume, liveness and
                the exit guard, early stop, limits, edits, baseline, reviews, Inspect imports | admin
sets/ | exports/
                writes to sets and cases: imports, versions, captures | every file that leaves:
                downloads, report files, OTLP traces
queries/        reads (selectors), one function per question, used by pages, API and CLI
charts/ | results/
                SVG geometry | the result writer, its batches and hand-off, read-back, search
                index, who executes a run (results/executor.py)
models/         the tables, one module per topic, re-exported: `from apps.evals.models import EvalRun`
```

Only Django's fixed names stay at the top: `apps.py`, `urls.py`, `checks.py`, `events.py`,
`templatetags/`, `management/`, `migrations/`. A folder imports only from its own layer or lower
ones, and siblings (`|`) not from each other. One module holds one idea that fits its folder; a
long module that holds one idea is fine.

## Where a new thing goes

| to add | put it in | copy |
|---|---|---|
| a scorer | a module in `evalcore/scorers/`, its class in `BUILTIN_SCORERS` (`evalcore/scorer_registry.py`); tests in `tests/evalcore/` | `evalcore/scorers/numbers.py` |
| a case-bank format | a reader in `evalcore/loaders/_NAME.py` yielding `(line, record)`, picked by suffix in `open_source` (`evalcore/loaders/_io.py`), dispatched in `plan_records` (`evalcore/loaders/peers.py`) | `evalcore/loaders/_jsonl.py` |
| another tool's past runs | a reader in `evalcore/loaders/`, a service in `apps/evals/runs/` writing through `apps.evals.results.batches.BatchWriter`, a command | `evalcore/loaders/inspect_log.py`, `apps/evals/runs/inspect_import.py`, `apps/evals/management/commands/import_run.py` |
| a page | a view in `apps/evals/views/`, its reads in `apps/evals/queries/`, a template in `evalsite/templates/evals/`, a URL in `apps/evals/urls.py` | `apps/evals/views/sets.py` + `evalsite/templates/evals/sets.html` |
| an API route | a function on a router in `apps/evals/api/` with `response=` a schema beside it, `@paginate(Pages)` for a list, reads from `apps/evals/queries/`, domain errors raised | `list_eval_runs` in `apps/evals/api/routes.py` |
| a read | a function in `apps/evals/queries/` (a module per topic) | `apps/evals/queries/slices.py` |
| a write to sets or cases | `apps/evals/sets/` | `apps/evals/sets/versions.py` |
| a step of a run | `apps/evals/runs/` | `apps/evals/runs/earlystop.py` |
| a background task | a `@task()` function in `apps/evals/worker/tasks.py` calling a service, enqueued by the function beside it | `run_eval_task` + `enqueue_eval_run` |
| an export | rows in `apps/evals/exports/`, a route in `apps/evals/api/exports.py`, a command | `apps/evals/exports/pairs.py` |
| a CLI command | `apps/evals/management/commands/NAME.py`, its shared helpers in `apps/evals/cli/` | `apps/evals/management/commands/rescore.py` |
| a model field | the model in `apps/evals/models/TOPIC.py` and a migration named for its topic | `apps/evals/migrations/0006_evalrun_heartbeat.py` |
| a file the wheel ships | under `evalsite/`, `apps/`, `evalcore/` or `examples/`, its extension in `DATA` in `setup.py` when new | `evalsite/static/evalsite/site.css` |
| a setting from the environment | `evalsite/settings.py` (read once), a line in `evalsite/project_template/env` | `EVALSITE_SHARD_SIZE` |

## Checks

`make lint`: ruff, import-linter (the floors, the engine without Django, the scorers, the rooms of
`apps.evals`), mypy, and `python scripts/import_cycles.py evalcore apps evalsite` (no cycle).
"""


# -- main ---------------------------------------------------------------------------------------


def main() -> None:
    preflight()
    index = build_index()
    candidates = [rel(p) for p in files_to_rewrite() if p.suffix == ".py"]
    check = run(RUFF, "format", "--check", *candidates, check=False).stdout
    unformatted = set(re.findall(r"^Would reformat: (.+)$", check, re.M))
    # references first, on the tree as it stands (the moves then carry rewritten files)
    changed = rewrite_all(index)
    make_packages()
    for old, new in MOVES.items():
        git_mv(old, new)
    written: list[Path] = []
    for old, split in SPLITS.items():
        written += split_module(old, split, index)
    add_contract()
    write_architecture()
    moved = {path_of(old): path_of(new) for old, new in MOVES.items()}
    moved.update({path_of(old): path_of(s.rest) for old, s in SPLITS.items() if s.rest})
    changed = [moved.get(p, p) for p in changed]
    run("git", "add", "--", *(rel(p) for p in changed + written), "pyproject.toml", "ARCHITECTURE.md")
    py = sorted({rel(p) for p in [*written, *changed] if p.suffix == ".py" and p.exists()})
    # the imports it wrote, sorted the project's way; what a split part no longer uses, dropped
    parts = [rel(p) for p in written if p.name != "__init__.py"]
    run(RUFF, "check", "--fix", "--select", "F401", *parts, check=False)
    run(RUFF, "check", "--fix", "--select", "I001,RUF022", *py, check=False)
    was_formatted = [
        p
        for p in py
        if p not in unformatted
        and not any(p == rel(moved_to) and rel(old) in unformatted for old, moved_to in moved.items())
    ]
    run(RUFF, "format", *was_formatted, check=False)
    run("git", "add", "--", *py)
    print(f"moved {len(MOVES)} modules, split {len(SPLITS)}, rewrote {len(changed)} files")
    if unformatted:
        print("left unformatted as they were: " + ", ".join(sorted(unformatted)))


if __name__ == "__main__":
    main()
