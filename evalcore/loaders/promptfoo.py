"""promptfoo test cases: a ``promptfooconfig.yaml``'s ``tests``, or a promptfoo test file.

Read: a YAML config or a ``promptfooconfig.json`` (its ``tests``: inline test objects and
``file://`` references to CSV, JSON, JSONL or YAML test files, relative to the config, globs
allowed; its ``defaultTest`` vars and asserts are merged into every test; ``$ref: '#/...'``
assertions are resolved in the config), a
YAML list of tests, a JSON / JSONL test file (objects with ``vars`` / ``assert``), or a promptfoo
CSV (columns are vars, except ``__expected`` / ``__expected1``... assertions, ``__description``,
``__metadata:NAME`` and ``__metadata:NAME[]`` (comma-separated list), ``__prefix``, ``__suffix``,
``__threshold``, ``__metric``, ``__providerOutput``, ``__config:__expectedN:threshold``; every
cell stays text, as in promptfoo). A config's ``scenarios`` (each ``config`` entry crossed with
the scenario's ``tests``) are read too, and ``defaultTest`` may be a ``file://`` object.

Read as promptfoo reads them: a var whose value is a list of texts expands the test into one per
combination (a list of numbers or objects is one value; ``options.disableVarExpansion`` keeps
lists whole); ``defaultTest``'s vars, options and metadata sit under the test's, its assertions
come first (unless the test's ``options.disableDefaultAsserts``) and its threshold applies when
the test has none; assertion values are rendered with
each combination's vars (``{{ topic }}``, see :mod:`evalcore.loaders.nunjucks`; a value with
Nunjucks beyond that, or naming a var the test does not have, is reported as unscored, not
checked half-rendered or against an empty text); a ``file://`` var is
the file's text (a glob gives one combination per file, a YAML file its value as JSON text; a
script, PDF or image stays its reference, with a warning: no code is run), and a var naming
another (``'Dear {{who}}'``) is filled in, as promptfoo fills them before rendering.

Bounded: a file (with the files it names) expands to at most
:data:`~evalcore.loaders.limits.MAX_CASES` cases, checked from the vars' lengths before any
combination is built, and its YAML aliases may add at most
:data:`~evalcore.loaders.limits.MAX_YAML_NODES` values.

Each test becomes one flat record for :class:`~evalcore.loaders._records.RecordBuilder`: its vars
as fields, plus ``__id``, ``__expected`` and ``__metadata`` (see :data:`DEFAULT_COLUMNS`):

* input: the vars (an object), or the value of the only var when the whole file has one;
* id: ``auto-`` + a hash of the vars (:func:`~evalcore.loaders._records.auto_case_id`), ``-2``,
  ``-3``... for later tests with the same vars: promptfoo tests have no ids;
* expected: the first ``equals`` value, if any;
* metadata: the test's own ``metadata``, plus ``scorers`` (the assertions as scorer specs, see
  :mod:`evalcore.loaders.promptfoo_asserts`), ``unscored_assertions`` (the types with no
  equivalent or a template that could not be rendered, each with its reason, when any) and
  ``promptfoo`` (``description``, the ``assert`` list: every assertion, rendered when it was,
  else as written; ``options``, ``threshold`` when given).

``--map`` applies to that record: ``--map input=body`` makes one var the input (the other vars
go to metadata), ``--map id=qid`` takes ids from a var.
"""

from __future__ import annotations

import glob
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, NamedTuple

from evalcore.jsonvalue import MISSING, NotJSONError, to_json
from evalcore.loaders._csv import csv_records
from evalcore.loaders._io import SourceFile, open_source, split_suffix
from evalcore.loaders._jsonfile import json_records
from evalcore.loaders._jsonl import iter_jsonl_records
from evalcore.loaders._records import auto_case_id
from evalcore.loaders.limits import MAX_CASES
from evalcore.loaders.nunjucks import UndefinedVariable, UnsupportedTemplate, has_template, render
from evalcore.loaders.promptfoo_asserts import MappedAssertions, assertion_from_string, map_assertions

__all__ = [
    "DEFAULT_COLUMNS",
    "PromptfooTests",
    "is_promptfoo_config",
    "is_promptfoo_header",
    "is_promptfoo_test",
    "read_promptfoo",
]

DEFAULT_COLUMNS: dict[str, str] = {"id": "__id", "expected": "__expected", "metadata": "__metadata"}
"""The record fields the reader adds beside the vars, by the case field they fill."""

_CSV_SPECIAL = (
    "__expected",
    "__description",
    "__metadata:",
    "__prefix",
    "__suffix",
    "__threshold",
    "__metric",
    "__config:",
)
_TEST_KEYS = ("vars", "assert")


class _AllColumns:
    """Every CSV column is text in a promptfoo file (``csv_records``'s ``text_columns``)."""

    def __contains__(self, name: object) -> bool:
        return True


def is_promptfoo_header(columns: list[str]) -> bool:
    """True for a CSV header with a promptfoo column (``__expected``, ``__description``, ``__metadata:x``...)."""
    return any(column.startswith(_CSV_SPECIAL) for column in columns)


def is_promptfoo_config(source: SourceFile) -> bool:
    """True for a ``promptfooconfig.json``: promptfoo's config written as JSON (read as its YAML is)."""
    return source.format == "json" and source.stem == "promptfooconfig"


def is_promptfoo_test(record: dict[str, Any]) -> bool:
    """True for a JSON record shaped as a promptfoo test: ``vars`` or ``assert``, and no ``input``."""
    return "input" not in record and any(key in record for key in _TEST_KEYS)


@dataclass(slots=True)
class PromptfooTests:
    """A promptfoo file read into flat records.

    Attributes:
        records: ``(line, record)`` per test, line in the file named (the config's ``tests``
            entry for a test read through ``file://``).
        var_names: Every var name, in first-seen order.
        warnings: What was read but cannot be honoured (assertion types with no equivalent,
            ``scenarios``, ignored columns), one line each, for the CLI to print.
        stem: The set name it suggests (a ``promptfooconfig.yaml`` is named by its folder).
    """

    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    var_names: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stem: str = ""


def read_promptfoo(source: SourceFile) -> PromptfooTests:
    """Read a promptfoo config or test file (see the module docstring).

    Args:
        source: The checked file (YAML, CSV, JSON or JSONL).

    Raises:
        CaseBankError: Invalid YAML, a test that is not an object, ``vars`` / ``assert`` of the
            wrong type, an unresolvable ``$ref``, a ``file://`` test file that is missing or of an
            unknown type, no tests, no vars at all; each naming file, line and field.
    """
    reader = _Reader(source)
    if source.format == "yaml" or is_promptfoo_config(source):
        reader.read_yaml()  # JSON is YAML, and the same limits apply
    else:
        for line, test in _file_tests(source):
            reader.add(test, line, source)
    return reader.finish()


def _file_tests(source: SourceFile) -> Iterator[tuple[int, dict[str, Any]]]:
    """The raw test objects of a CSV / JSON / JSONL / YAML test file."""
    if source.format == "csv":
        for line, row in csv_records(source, _AllColumns(), lambda _: None):
            yield line, _csv_test(source, row, line)
    elif source.format == "jsonl":
        yield from iter_jsonl_records(source)
    elif source.format == "json":
        yield from json_records(source)[1]
    elif source.format == "yaml":
        from evalcore.loaders._promptfoo_yaml import promptfoo_yaml  # PyYAML only when a YAML file is read

        data, lines = promptfoo_yaml(source)
        if not isinstance(data, list):
            raise source.error("a promptfoo YAML test file must hold a list of tests")
        yield from _numbered(source, data, lines.get("tests", {}))
    else:
        raise source.error(f"promptfoo tests cannot be read from a .{source.format} file")


def _csv_test(source: SourceFile, row: dict[str, Any], line: int) -> dict[str, Any]:
    """A promptfoo CSV row as a test object, by promptfoo's column rules: an empty ``__expected``
    cell is no assertion (a filled one is read trimmed); an empty ``__metadata:`` cell is no
    metadata; ``__metadata:NAME[]`` splits on commas not escaped as ``\\,`` (trimmed, the escape
    undone); ``__config:__expectedN:threshold`` sets that assertion's threshold."""
    test: dict[str, Any] = {"vars": {}, "assert": []}
    metadata: dict[str, Any] = {}
    thresholds: dict[int, float] = {}
    for column, cell in row.items():
        if column.startswith("__expected"):
            if cell.strip():
                test["assert"].append(assertion_from_string(cell.strip()))
        elif column == "__description":
            test["description"] = cell
        elif column.startswith("__metadata:"):
            name = column[len("__metadata:") :]
            if not cell.strip():
                continue
            if name.endswith("[]"):
                metadata[name[:-2]] = [part.strip().replace("\\,", ",") for part in _UNESCAPED_COMMA.split(cell)]
            else:
                metadata[name] = cell
        elif column.startswith("__config:"):
            index = _config_index(source, column, line)
            if cell.strip():
                thresholds[index] = _number(source, cell, line, column)
        elif column in ("__prefix", "__suffix"):
            test.setdefault("options", {})[column[2:]] = cell
        elif column == "__threshold":
            if cell.strip():
                test["threshold"] = _number(source, cell, line, column)
        elif column in ("__metric", "__providerOutput"):
            test[column[2:]] = cell
        elif column.startswith("__"):
            test.setdefault("__ignored", []).append(column)
        else:
            test["vars"][column] = cell
    for index, assertion in enumerate(test["assert"]):
        if test.get("metric"):
            assertion["metric"] = test["metric"]
        if index in thresholds:
            assertion["threshold"] = thresholds[index]
    if metadata:
        test["metadata"] = metadata
    return test


_UNESCAPED_COMMA = re.compile(r"(?<!\\),")
_CONFIG_COLUMN = re.compile(r"^__config:__expected([0-9]{0,9}):threshold$")


def _config_index(source: SourceFile, column: str, line: int) -> int:
    """The assertion a ``__config:__expected[N]:threshold`` column sets (0-based)."""
    found = _CONFIG_COLUMN.match(column)
    if found is None or found.group(1) == "0":
        raise source.error(
            "a __config column is __config:__expected:threshold or __config:__expectedN:threshold (N from 1)",
            line=line,
            field=column,
        )
    return int(found.group(1)) - 1 if found.group(1) else 0


def _number(source: SourceFile, cell: str, line: int, column: str) -> float:
    try:
        return float(cell)
    except ValueError:
        raise source.error(f"{column} must be a number, got {cell!r}", line=line, field=column) from None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


_VAR_KEPT_AS_REFERENCE = frozenset(
    "py js cjs mjs ts cts mts pdf jpg jpeg png gif bmp webp svg mp4 webm ogg mov avi wmv mkv m4v".split()
)
_REFERENCE = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def _is_file_ref(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("file://")


def _resolve_references(variables: dict[str, Any]) -> dict[str, Any]:
    """Vars naming other vars (``greeting: 'Hi {{name}}'``) filled in, as promptfoo does before
    rendering: one reference at a time, at most five rounds, an unknown name left as written."""
    out = dict(variables)
    for _ in range(5):
        changed = False
        for key, value in out.items():
            if not isinstance(value, str):
                continue
            found = _REFERENCE.search(value)
            if found is None or found.group(1) not in out:
                continue
            other = out[found.group(1)]
            text = other if isinstance(other, str) else render("{{ v }}", {"v": other})
            out[key] = value[: found.start()] + text + value[found.end() :]
            changed = True
        if not changed:
            break
    return out


def _values(value: Any) -> list[Any]:
    """The values a var takes, by promptfoo's rule: a list whose first item is text is one value
    per item; any other value (a list of numbers or objects, an empty list included) is one."""
    if isinstance(value, list) and value and isinstance(value[0], str):
        return value
    return [value]


class _Rendered(NamedTuple):
    """:func:`_rendered`'s answer."""

    checked: list[dict[str, Any]]
    """The assertions to map to scorers, their values rendered."""
    kept: list[dict[str, Any]]
    """Every assertion, in order, for the case's metadata: rendered when it was, else as written."""
    unscored: list[str]
    """The reason for each assertion left out of ``checked``."""
    undefined: list[tuple[int, dict[str, Any], str]]
    """``(index, assertion as written, variable)`` for each one naming a var the test lacks."""


def _rendered(asserts: list[dict[str, Any]], vars_: dict[str, Any]) -> _Rendered:
    """The assertions with their values rendered with the vars, as promptfoo renders them before
    checking (a text value, and each text item of a list; ``file://`` references are not). One
    whose template goes beyond ``{{ var.path }}``, or names a var (or field) the test does not
    hold, is not checked: promptfoo would render the missing var as nothing, and an empty needle
    is no verdict. It stays in ``kept`` as written, its reason in ``unscored``."""
    out = _Rendered([], [], [], [])
    for index, assertion in enumerate(asserts):
        value = assertion.get("value")
        kind = assertion.get("type", "?")
        try:
            if isinstance(value, str) and has_template(value) and not value.startswith("file://"):
                rendered = {**assertion, "value": render(value, vars_, strict=True)}
            elif isinstance(value, list) and any(isinstance(v, str) and has_template(v) for v in value):
                items = [
                    render(v, vars_, strict=True) if isinstance(v, str) and not v.startswith("file://") else v
                    for v in value
                ]
                rendered = {**assertion, "value": items}
            else:
                rendered = assertion
        except UnsupportedTemplate:
            out.kept.append(assertion)
            out.unscored.append(f"{kind} (Nunjucks beyond {{{{ var }}}})")
            continue
        except UndefinedVariable as exc:
            out.kept.append(assertion)
            out.unscored.append(f"{kind} ({{{{ {exc.name} }}}} is not one of the test's vars)")
            out.undefined.append((index, assertion, exc.name))
            continue
        out.checked.append(rendered)
        out.kept.append(rendered)
    return out


def _numbered(source: SourceFile, items: list[Any], lines: dict[int, int]) -> Iterator[tuple[int, dict[str, Any]]]:
    for index, item in enumerate(items):
        line = lines.get(index, 1)
        if not isinstance(item, dict):
            raise source.error(f"a promptfoo test must be an object, got {type(item).__name__}", line=line)
        yield line, item


class _Reader:
    """Collects tests (from the config and the files it names) and flattens them into records."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.config: dict[str, Any] = {}
        self.default: dict[str, Any] = {}
        self.out = PromptfooTests(stem=source.stem)
        self.var_seen: set[str] = set()
        self.occurrences: dict[str, int] = {}
        self.unscored: dict[str, list[int]] = {}
        self.var_files: dict[str, Any] = {}
        self.warned_transform = False
        self.tests_read = 0
        try:
            self.max_cases = MAX_CASES.value()
        except ValueError as exc:
            raise source.error(str(exc)) from None

    def read_yaml(self) -> None:
        source = self.source
        from evalcore.loaders._promptfoo_yaml import promptfoo_yaml  # PyYAML only when a YAML file is read

        data, sections = promptfoo_yaml(source)
        lines = sections.get("tests", {})
        if isinstance(data, list):
            for line, test in _numbered(source, data, lines):
                self.add(test, line, source)
            return
        if not isinstance(data, dict):
            raise source.error("expected a promptfoo config (an object with 'tests') or a list of tests")
        self.config = data
        if source.stem == "promptfooconfig" and source.path is not None and source.path.resolve().parent.name:
            self.out.stem = source.path.resolve().parent.name
        default = data.get("defaultTest") or {}
        if isinstance(default, str):
            default = self._default_file(default)
        if isinstance(default, dict):
            self.default = default
        else:
            self.out.warnings.append(f"defaultTest {default!r} is not an object: not applied")
        tests = data.get("tests")
        scenarios = data.get("scenarios")
        if tests is None and not scenarios:
            raise source.error("this promptfoo config has no 'tests': there are no cases to import", field="tests")
        for index, entry in enumerate([] if tests is None else tests if isinstance(tests, list) else [tests]):
            line = lines.get(index, 1)
            if isinstance(entry, str):
                for path in self._resolve(entry, line):
                    for _, test in _file_tests(open_source(path)):
                        self.add(test, line, source)
            elif isinstance(entry, dict) and "path" in entry and not any(k in entry for k in _TEST_KEYS):
                raise source.error(
                    f"a test generator ({entry['path']!r}) makes its tests by running code: Evalsite does not run it; "
                    "import the tests it writes instead",
                    line=line,
                    field="tests",
                )
            elif isinstance(entry, dict):
                self.add(entry, line, source)
            else:
                raise source.error(f"a test must be an object or a file:// path, got {entry!r}", line=line)
        if scenarios:
            self._scenarios(scenarios, sections.get("scenarios", {}))

    def _default_file(self, entry: str) -> Any:
        """A ``defaultTest: file://...`` read (one YAML or JSON object, relative to the config)."""
        from evalcore.loaders._promptfoo_yaml import promptfoo_yaml

        (path,) = self._resolve(entry, 1, kinds=("yaml", "json"), what="defaultTest")
        return promptfoo_yaml(open_source(path))[0]

    def _scenarios(self, scenarios: Any, lines: dict[int, int]) -> None:
        """promptfoo's ``scenarios``: every ``config`` entry of a scenario crossed with each of its
        ``tests``, merged as promptfoo merges them (vars, options and metadata key by key: the
        test over the config entry over ``defaultTest``; assertions: the config entry's, then the
        test's, after ``defaultTest``'s)."""
        source = self.source
        for index, scenario in enumerate(scenarios if isinstance(scenarios, list) else [scenarios]):
            line = lines.get(index, 1)
            if not isinstance(scenario, dict):
                raise source.error(
                    "a scenario must be an object with 'config' and 'tests'", line=line, field="scenarios"
                )
            configs = scenario.get("config") or []
            tests = scenario.get("tests") or [{}]
            if not isinstance(configs, list) or not isinstance(tests, list):
                raise source.error("a scenario's 'config' and 'tests' must be lists", line=line, field="scenarios")
            for data in configs:
                for test in tests:
                    if not isinstance(data, dict) or not isinstance(test, dict):
                        raise source.error(
                            "a scenario's config entries and tests must be objects", line=line, field="scenarios"
                        )
                    merged = {**data, **test}
                    for key in ("vars", "metadata"):
                        merged[key] = {**_object(data.get(key)), **_object(test.get(key))}
                    merged["options"] = _object(test.get("options"))
                    merged["assert"] = [*_list(data.get("assert")), *_list(test.get("assert"))]
                    self.add(merged, line, source)

    def _resolve(
        self, entry: str, line: int, *, kinds: tuple[str, ...] = ("csv", "json", "jsonl", "yaml"), what: str = "tests"
    ) -> list[Path]:
        """The files a ``file://`` tests entry names (a glob may name several), relative to the config."""
        if not entry.startswith("file://"):
            raise self.source.error(f"a {what} entry that is text must be a file:// path, got {entry!r}", line=line)
        relative = entry[len("file://") :]
        if self.source.path is None:  # an upload: no folder of its own, and no reading the server's files
            raise self.source.error(
                f"{entry}: a config read from an upload cannot name other files; import the test file itself",
                line=line,
                field=what,
            )
        base = self.source.path.parent
        if any(char in relative for char in "*?["):
            found = sorted(Path(name) for name in glob.glob(str(base / relative)))  # absolute patterns too
        else:
            found = [base / relative]
        for path in found:
            fmt = split_suffix(path)[0]
            if kinds and fmt not in kinds:
                raise self.source.error(
                    f"{entry}: promptfoo {what} {'are' if what == 'tests' else 'is'} read from "
                    f"{', '.join('.' + kind for kind in kinds)} files",
                    line=line,
                    field=what,
                )
            if not path.is_file():
                raise self.source.error(f"{entry}: no such file ({path})", line=line, field=what)
        if not found:
            raise self.source.error(f"{entry}: the pattern matches no file", line=line, field=what)
        return found

    def add(self, test: dict[str, Any], line: int, where: SourceFile) -> None:
        """Flatten one test into records: ``defaultTest`` merged in, one record per combination
        of its list-valued vars, its assertion values rendered with each combination's vars."""
        raw_vars = test.get("vars", {})
        if raw_vars is None:
            raw_vars = {}
        if not isinstance(raw_vars, dict):
            raise where.error(f"'vars' must be an object, got {type(raw_vars).__name__}", line=line, field="vars")
        asserts = test.get("assert") or []
        if not isinstance(asserts, list):
            raise where.error("'assert' must be a list of assertions", line=line, field="assert")
        test_index = self.tests_read
        self.tests_read += 1
        own_defaults = _object(test.get("options")).get("disableDefaultAsserts") is not True
        test = self._with_defaults(test)
        merged_vars = {**_object(self.default.get("vars")), **raw_vars}
        every = [*(self._default_asserts() if own_defaults else []), *asserts]
        resolved = [self._assertion(a, line, where, i) for i, a in enumerate(every)]
        for ignored in test.get("__ignored", []):
            self.out.warnings.append(f"{where.display}:{line}: column {ignored!r} is not read")
        names = list(merged_vars)
        if "transformVars" in _object(test.get("options")) and not self.warned_transform:
            self.warned_transform = True
            self.out.warnings.append(
                f"{where.display}:{line}: options.transformVars is code promptfoo runs on the vars: not run here, "
                "the vars are imported as written"
            )
        expand = not _object(test.get("options")).get("disableVarExpansion")
        choices = [self._choices(name, value, line, expand=expand) for name, value in merged_vars.items()]
        self._check_size(choices, where, line)
        for combo in product(*choices):
            loaded = {name: self._var_value(name, value, line) for name, value in zip(names, combo, strict=True)}
            vars_ = self._json(_resolve_references(loaded), where, line, "vars")
            rendered = _rendered(resolved, vars_)
            mapped = map_assertions(rendered.checked)
            for kind in mapped.unscored:
                self.unscored.setdefault(kind, []).append(line)
            for kind in rendered.unscored:
                if "is not one of the test's vars" not in kind:  # those are warned about one by one
                    self.unscored.setdefault(kind, []).append(line)
            mapped.unscored.extend(rendered.unscored)
            for index, assertion, name in rendered.undefined:
                warning = (
                    f"{where.display}:{line}: test {test_index}, assert[{index}] "
                    f"({assertion.get('type', '?')}: {assertion.get('value')!r}): "
                    f"{{{{ {name} }}}} is not one of the test's vars; promptfoo would render it as nothing, "
                    "so this assertion is not scored (kept as written in the case's metadata)"
                )
                if warning not in self.out.warnings:  # once, not once per combination of vars
                    self.out.warnings.append(warning)
            self.out.records.append((line, self._record(test, vars_, rendered.kept, mapped, where, line)))

    def _choices(self, name: str, value: Any, line: int, *, expand: bool) -> list[Any]:
        """The values a var takes across a test's combinations (one, unless it expands)."""
        if not expand:
            return [value]
        return self._var_files(name, value, line) if _is_file_ref(value) else _values(value)

    def _var_files(self, name: str, value: str, line: int) -> list[Any]:
        """A ``file://`` var's files: one value per file a glob matches, as promptfoo expands it."""
        paths = self._resolve(value, line, kinds=(), what=f"vars.{name}")
        if len(paths) == 1 and not any(char in value for char in "*?["):
            return [value]
        assert self.source.path is not None  # _resolve refused an upload
        base = self.source.path.parent
        # written relative to the config, as the user would: a value (and an id) not tied to this machine
        return [f"file://{path.relative_to(base) if path.is_relative_to(base) else path}" for path in paths]

    def _var_value(self, name: str, value: Any, line: int) -> Any:
        """A var as promptfoo hands it to the prompt: a ``file://`` value is the file's text
        (trimmed), a YAML file's value as JSON text; a script (``.py``, ``.js``...), a PDF or an
        image stays its reference, with a warning (Evalsite runs no code from a case file)."""
        if not _is_file_ref(value):
            return value
        cached = self.var_files.get(value)
        if cached is not None:
            return cached
        path = Path(value[len("file://") :])
        if not path.is_absolute():
            path = self._resolve(value, line, kinds=(), what=f"vars.{name}")[0]
        suffix = path.suffix.lower().lstrip(".")
        if suffix in _VAR_KEPT_AS_REFERENCE:
            self.out.warnings.append(
                f"{self.source.display}:{line}: var {name!r} is {value} (a script, PDF or media file): "
                "kept as its file:// reference, not read"
            )
            loaded: Any = value
        elif suffix in ("yaml", "yml"):
            from evalcore.loaders._promptfoo_yaml import promptfoo_yaml

            data = promptfoo_yaml(open_source(path))[0]
            loaded = json.dumps(
                self._json(data, self.source, line, f"vars.{name}"), ensure_ascii=False, separators=(",", ":")
            )
        else:
            try:
                loaded = path.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise self.source.error(
                    f"{value}: cannot be read as UTF-8 text ({exc})", line=line, field=f"vars.{name}"
                ) from None
        self.var_files[value] = loaded
        return loaded

    def _with_defaults(self, test: dict[str, Any]) -> dict[str, Any]:
        """The test with ``defaultTest``'s options and metadata under its own, and its threshold
        when it has none (vars and assertions are merged by :meth:`add`)."""
        default = self.default
        if not default:
            return test
        merged = dict(test)
        for key in ("options", "metadata"):
            if key in default or key in test:
                merged[key] = {**_object(default.get(key)), **_object(test.get(key))}
        if merged.get("threshold") is None and default.get("threshold") is not None:
            merged["threshold"] = default["threshold"]
        return merged

    def _check_size(self, choices: list[list[Any]], where: SourceFile, line: int) -> None:
        """Refuse a test whose combinations would take the file past the case limit, before
        any is built (the product of the vars' lengths is known up front)."""
        combinations = math.prod(len(values) for values in choices)
        if len(self.out.records) + combinations <= self.max_cases:
            return
        lists = [len(values) for values in choices if len(values) > 1]
        how = (
            f"this test's {len(lists)} list-valued var(s) ({' x '.join(str(n) for n in lists)}) make "
            f"{combinations:,} combinations"
            if combinations > 1
            else "this test"
        )
        raise where.error(
            f"{how}, taking the file past {self.max_cases:,} cases, the limit per file "
            f"({MAX_CASES.how_to_raise()}); nothing imported",
            line=line,
            field="vars" if combinations > 1 else None,
        )

    def _default_asserts(self) -> list[Any]:
        extra = self.default.get("assert") or []
        return extra if isinstance(extra, list) else []

    def _assertion(self, assertion: Any, line: int, where: SourceFile, index: int) -> dict[str, Any]:
        if isinstance(assertion, dict) and "$ref" in assertion:
            assertion = self._ref(assertion["$ref"], line, where, index)
        if not isinstance(assertion, dict) or not isinstance(assertion.get("type"), str):
            raise where.error("an assertion must be an object with a 'type'", line=line, field=f"assert[{index}]")
        return assertion

    def _ref(self, ref: Any, line: int, where: SourceFile, index: int) -> Any:
        """A ``$ref: '#/a/b'`` resolved as a JSON pointer into the config."""
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise where.error(f"$ref {ref!r}: only '#/...' references into the config are read", line=line)
        value: Any = self.config
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(value, dict) or part not in value:
                raise where.error(f"$ref {ref!r} names nothing in the config", line=line, field=f"assert[{index}]")
            value = value[part]
        return value

    def _json(self, value: Any, where: SourceFile, line: int, what: str) -> Any:
        try:
            return to_json(value)
        except NotJSONError as exc:
            raise where.error(f"{what} holds a value JSON cannot: {exc}", line=line, field=what) from None

    def _record(
        self,
        test: dict[str, Any],
        vars_: dict[str, Any],
        asserts: list[dict[str, Any]],
        mapped: MappedAssertions,
        where: SourceFile,
        line: int,
    ) -> dict[str, Any]:
        for name in vars_:
            if name not in self.var_seen:
                self.var_seen.add(name)
                self.out.var_names.append(name)
        key = json.dumps(vars_, sort_keys=True, ensure_ascii=False)
        occurrence = self.occurrences[key] = self.occurrences.get(key, 0) + 1
        user_metadata = test.get("metadata") or {}
        if not isinstance(user_metadata, dict):
            raise where.error("'metadata' must be an object", line=line, field="metadata")
        kept = ("description", "options", "threshold", "metric", "providerOutput")
        original: dict[str, Any] = {key: test[key] for key in kept if key in test}
        original["assert"] = asserts
        metadata = {**user_metadata, "promptfoo": self._json(original, where, line, "test")}
        if mapped.specs:
            metadata["scorers"] = mapped.specs
        if mapped.unscored:
            metadata["unscored_assertions"] = mapped.unscored
        record: dict[str, Any] = {**vars_, "__id": auto_case_id(vars_, occurrence=occurrence), "__metadata": metadata}
        if mapped.expected is not MISSING:
            record["__expected"] = self._json(mapped.expected, where, line, "assert")
        return record

    def finish(self) -> PromptfooTests:
        if not self.out.records:
            raise self.source.error("no promptfoo tests in this file: there are no cases to import")
        if not self.out.var_names:
            raise self.source.error("the promptfoo tests have no vars: nothing to use as the case input", field="vars")
        for kind, lines in self.unscored.items():
            where = ", ".join(str(n) for n in lines[:5]) + (", ..." if len(lines) > 5 else "")
            self.out.warnings.append(
                f"{len(lines)} '{kind}' assertion(s) have no Evalsite equivalent and are not scored "
                f"(line {where}; kept in each case's metadata.unscored_assertions)"
            )
        return self.out
