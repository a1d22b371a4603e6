"""Targets declared in a folder of Python modules.

A module exposes a target by assigning a :class:`TargetSpec` at module level (or decorating a
function with :func:`target`)::

    # agents/qa.py
    from evalcore.discovery import TargetSpec, target

    @target(id="echo", scorers=["exact_match"])
    def echo(question):
        return question

    bm25 = TargetSpec(
        id="qa-bm25",
        variants={"k2": make_agent(k=2), "k4": make_agent(k=4)},
        scorers=["citation_set"],
    )

Every ``*.py`` file in the folder (not starting with ``_``) is imported under a private module
name, ``evalsite_agents_<hash of the folder>.<file stem>``: the folder is a package of that name,
so modules import their siblings relatively (``from . import helpers``, ``from ._data import
ROWS``). ``sys.path`` is never changed (two folders with a ``helpers.py`` each never see each
other's). A module that fails to import is reported as a :class:`DiscoveryProblem` and never
hides the others.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import sys
import threading
import traceback
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalcore.errors import InvalidInputError
from evalcore.targets import ResolvedTarget, resolve_target


class UnknownVariantError(InvalidInputError):
    """A variant label that the target does not declare (the message lists those it does)."""

    field = "variant"


@dataclass
class TargetSpec:
    """A target declaration.

    Attributes:
        id: Unique id across the folder (letters, digits, ``-_.``).
        target: The target (function, Node, Pipeline, agent) when it has no named variants.
        variants: Named variants, label -> target. When set, a run must pick one of them
            (``default_variant`` or the first when none is given).
        default_variant: Label used when none is given.
        scorers: Default scorer specs (CLI strings or ``{name, args}``); ``--scorer`` overrides.
        description: One line for listings.
        model: Model name recorded on eval runs, when the target has one.
        default_set: Path (relative to the agents folder) of the eval set it is usually run on.
        input_kind: The shape of the target's input, for the playground: ``"conversation"``
            (``[{role, content}]`` messages, the default), ``"text"`` (a string) or ``"json"``
            (any JSON value typed by the user).
        input_schema: Optional JSON-schema-like declaration of a ``json`` target's input, e.g.
            ``{"type": "object", "properties": {"question": {"type": "string"}}}``: the
            playground offers it as an input template and, when it has exactly one string
            property, sends plain text as that property.
        rules: Instructions the target is given, checked by the ``rule_adherence`` scorer
            (``{"id", "text"}`` dicts, ``(id, text)`` pairs or ``evalcore.rules.Rule``; see
            :mod:`evalcore.rules.model`, which also reads ``rules.toml`` in the agents folder).
    """

    id: str
    target: Any = None
    variants: Mapping[str, Any] = field(default_factory=dict)
    default_variant: str | None = None
    scorers: list[Any] = field(default_factory=list)
    description: str = ""
    model: str | None = None
    default_set: str | None = None
    input_kind: str = "conversation"
    input_schema: dict[str, Any] | None = None
    rules: list[Any] = field(default_factory=list)
    module: str = ""

    def __post_init__(self) -> None:
        if self.target is None and not self.variants:
            raise ValueError(f"target {self.id!r}: give a target or variants")
        if self.input_kind not in ("conversation", "text", "json"):
            raise ValueError(f"target {self.id!r}: input_kind must be conversation, text or json")

    def resolve(self, variant: str | None = None) -> tuple[ResolvedTarget, str]:
        """The resolved target for a variant label, and the label to record.

        Without named variants any label is a free provenance label. With named variants an
        unknown label is an error.

        Raises:
            UnknownVariantError: The label names no declared variant.
        """
        if self.variants:
            label = variant or self.default_variant or next(iter(self.variants))
            if label not in self.variants:
                known = ", ".join(self.variants)
                raise UnknownVariantError(f"target {self.id!r} has no variant {label!r} (variants: {known})")
            return resolve_target(self.variants[label]), label
        return resolve_target(self.target), variant or ""

    @property
    def kind(self) -> str:
        """``node``, ``agent`` or ``pipeline`` (of the default variant)."""
        return self.resolve(None)[0].kind


def target(
    *,
    id: str | None = None,
    scorers: list[Any] | None = None,
    description: str = "",
    model: str | None = None,
    default_set: str | None = None,
) -> Callable[[Callable[..., Any]], TargetSpec]:
    """Decorator declaring a function as a target (the function's name is the default id)."""

    def wrap(fn: Callable[..., Any]) -> TargetSpec:
        return TargetSpec(
            id=id or fn.__name__,
            target=fn,
            scorers=list(scorers or []),
            description=description or ((fn.__doc__ or "").strip().splitlines() or [""])[0],
            model=model,
            default_set=default_set,
        )

    return wrap


@dataclass(slots=True)
class DiscoveryProblem:
    """A module that could not be loaded, or a declaration that clashes."""

    path: str
    message: str


@dataclass(slots=True)
class Discovery:
    """What a folder exposes: targets by id, and the problems met."""

    targets: dict[str, TargetSpec]
    problems: list[DiscoveryProblem]


_import_lock = threading.Lock()
AGENTS_MODULE_PREFIX = "evalsite_agents_"
"""Agents-folder modules are imported as ``evalsite_agents_<hash of the folder>.<file stem>``."""


def scorer_label(scorer: Any) -> str:
    """How a target's scorer is shown in listings, whatever form it was declared in.

    Args:
        scorer: A CLI string (``"exact_match"``, ``"numeric_match:tolerance=0.01"``), a
            ``{name, args}`` dict, a :class:`~evalcore.scorers.base.Scorer` instance or a plain
            function (a predicate).

    Returns:
        The string as written, the dict's or scorer's name, or the function's name, e.g.
        ``"same_rows (function)"``.
    """
    if isinstance(scorer, str):
        return scorer
    if isinstance(scorer, Mapping):
        return str(scorer.get("name", scorer))
    name = getattr(scorer, "name", None)
    if isinstance(name, str) and not callable(name) and not isinstance(scorer, type):
        return name
    if callable(scorer):
        return f"{getattr(scorer, '__name__', type(scorer).__name__)} (function)"
    return repr(scorer)


def rebind_agents_scorer_specs(specs: list[dict[str, Any]], folder: str | Path) -> list[dict[str, Any]]:
    """Point stored scorer specs that name functions of an agents folder at that folder's modules.

    A predicate declared in an agents folder is stored by the private module name it was
    imported under (``evalsite_agents_1a2b3c4d.targets.same_rows``), which no new process can
    import. Given the run's recorded folder, each such reference is replaced by the function
    itself, found by file stem and qualified name in the folder imported afresh (so it also works
    when the folder was imported under another name, e.g. moved or reached by another path).

    Args:
        specs: Stored ``{name, args, version}`` scorer specs.
        folder: The agents folder the run was started from.

    Returns:
        The specs, with each ``args`` value that names an agents-folder function replaced by the
        function; other specs unchanged.

    Raises:
        FileNotFoundError: ``folder`` does not exist.
        LookupError: A referenced module or function is not in the folder (any more); the
            message names it and the folder.
    """
    if not any(_names_agents_function(value) for spec in specs for value in (spec.get("args") or {}).values()):
        return specs
    discovery = discover_targets(folder)
    root = Path(folder).resolve()
    prefix = AGENTS_MODULE_PREFIX + hashlib.sha1(str(root).encode()).hexdigest()[:8]
    rebound: list[dict[str, Any]] = []
    for spec in specs:
        args = dict(spec.get("args") or {})
        for key, value in args.items():
            if not _names_agents_function(value):
                continue
            _, stem, qualname = value.split(".", 2)
            module = sys.modules.get(f"{prefix}.{stem}")
            if module is None:
                broken = next((p.message for p in discovery.problems if Path(p.path).stem == stem), None)
                why = f": it does not import ({broken})" if broken else ": no such module there"
                raise LookupError(f"scorer {spec.get('name')!r} uses {stem}.{qualname} from {folder}/{stem}.py{why}")
            obj: Any = module
            try:
                for attr in qualname.split("."):
                    obj = getattr(obj, attr)
            except AttributeError:
                raise LookupError(
                    f"scorer {spec.get('name')!r} uses {qualname!r}, which {folder}/{stem}.py no longer defines"
                ) from None
            args[key] = obj
        rebound.append({**spec, "args": args})
    return rebound


def _names_agents_function(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(AGENTS_MODULE_PREFIX) and value.count(".") >= 2


def discover_targets(folder: str | Path) -> Discovery:
    """Import every module in ``folder`` and collect its :class:`TargetSpec` declarations.

    Each declaration is returned as a copy whose ``module`` is the file it was found in (the
    module's own object is never changed). A declaration reached from two modules (one imports
    the other's) counts once, from the first file by name.

    Raises:
        FileNotFoundError: ``folder`` does not exist or is not a directory.
    """
    root = Path(folder).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"agents folder not found: {folder}")
    targets: dict[str, TargetSpec] = {}
    seen: set[int] = set()
    problems: list[DiscoveryProblem] = []
    prefix = AGENTS_MODULE_PREFIX + hashlib.sha1(str(root).encode()).hexdigest()[:8]
    with _import_lock:
        _folder_package(prefix, root)
        for stale in [name for name in sys.modules if name.startswith(prefix + ".")]:
            del sys.modules[stale]  # a fresh import of the whole folder
        for path in sorted(root.glob("*.py")):
            if path.name.startswith("_"):
                continue
            name = f"{prefix}.{path.stem}"
            try:
                # already imported in this pass when a sibling imported it (``from . import x``)
                module = sys.modules.get(name) or _import_file(path, name)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
                where = f" (line {last[0].lineno})" if last and last[0].filename == str(path) else ""
                problems.append(DiscoveryProblem(str(path), f"{type(exc).__name__}: {exc}{where}"))
                continue
            for value in list(vars(module).values()):
                if not isinstance(value, TargetSpec) or id(value) in seen:
                    continue
                seen.add(id(value))
                if value.id in targets:
                    problems.append(
                        DiscoveryProblem(
                            str(path), f"target id {value.id!r} already declared in {targets[value.id].module}"
                        )
                    )
                    continue
                targets[value.id] = replace(value, module=str(path))
    return Discovery(targets=dict(sorted(targets.items())), problems=problems)


def _folder_package(name: str, root: Path) -> types.ModuleType:
    """The package ``name`` whose modules are the files of ``root`` (made once, then reused)."""
    package = sys.modules.get(name)
    if package is not None and list(getattr(package, "__path__", ())) == [str(root)]:
        return package
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [str(root)]
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    return package


def _import_file(path: Path, module_name: str) -> types.ModuleType:
    """Import ``path`` afresh as ``module_name`` (a module of its folder's package)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # registered while it runs: dataclasses and pickling look modules up by name
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module
