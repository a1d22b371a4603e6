"""promptfoo's YAML: parsed as promptfoo's own parser does (the YAML 1.2 core schema), with the line
of each test. Imported only when a YAML file is read (PyYAML costs every ``evalsite`` command
~20 ms to import otherwise)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from evalcore.loaders._io import SourceFile, decode_whole
from evalcore.loaders.errors import TOO_DEEP
from evalcore.loaders.limits import MAX_DEPTH, MAX_YAML_NODES, too_deep_reason


class _TooDeep(Exception):
    """A YAML value nested deeper than the loader's ``max_depth`` (its line, 1-based)."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _Loader(yaml.SafeLoader):
    """YAML with the 1.2 core schema promptfoo's parser uses: ``Yes`` / ``on`` stay text, ``010`` is ten,
    and ``2024-01-02`` stays text (as JSON would have it).

    Composing is recursive (a few Python frames per level): a document nested deeper than
    ``max_depth`` (:data:`~evalcore.loaders.limits.MAX_DEPTH`) is refused as it is composed, long
    before Python's recursion limit (500 ``[`` used to end in a 3,000-line ``RecursionError``)."""

    max_depth = 100
    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            # the file's own levels around a value (a promptfoo config's tests, test, vars, var)
            # come on top; each field is checked exactly once it is a case (evalcore.loaders._records)
            if self._depth > self.max_depth + 5:
                raise _TooDeep(self.peek_event().start_mark.line + 1)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = str(loader.construct_scalar(node))  # type: ignore[arg-type]
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


_YAML12: dict[str, tuple[str, str]] = {
    "tag:yaml.org,2002:bool": (r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    "tag:yaml.org,2002:int": (r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    "tag:yaml.org,2002:float": (
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
}
_Loader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML12 and not tag.endswith(":timestamp")]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag, (_pattern, _first) in _YAML12.items():
    _Loader.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _aliased_size(root: yaml.Node, source: SourceFile) -> tuple[int, int]:
    """``(values the document stands for once every alias is expanded, distinct values written)``.

    Composing a document is cheap (an alias is one more reference to its anchor's node); the
    cost comes later, when the value is copied, serialised or walked as the tree it stands for.
    Counted with one visit per distinct node, so a billion-leaf alias tree costs microseconds.

    Raises:
        CaseBankError: An anchor that contains an alias to itself (a value without end).
    """
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            children = _children(node)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            continue
        if key in sizes:
            continue
        if key in open_:
            line = node.start_mark.line + 1
            raise source.error("a YAML alias refers to the value it is inside of (a value without end)", line=line)
        open_.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_:
                line = child.start_mark.line + 1
                raise source.error("a YAML alias refers to the value it is inside of (a value without end)", line=line)
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)], len(sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def promptfoo_yaml(source: SourceFile) -> tuple[Any, dict[str, dict[int, int]]]:
    """The YAML document, and the 1-based line of each item of its ``tests`` and ``scenarios``
    lists (``{"tests": {index: line}, "scenarios": {...}}``; a document that is a list gives its
    items' lines under ``tests``).

    Raises:
        CaseBankError: Invalid YAML, or aliases that add more values to the document than
            :data:`~evalcore.loaders.limits.MAX_YAML_NODES` allows (checked on the composed
            document, before any value is built).
    """
    text = decode_whole(source, source.read_bytes())
    try:
        limit = MAX_YAML_NODES.value()
        max_depth = MAX_DEPTH.value()
    except ValueError as exc:
        raise source.error(str(exc)) from None
    loader = _Loader(text)
    loader.max_depth = max_depth
    try:
        node = loader.get_single_node()
        if node is not None:
            expanded, written = _aliased_size(node, source)
            if expanded - written > limit:
                raise source.error(
                    f"YAML aliases expand this file to {expanded:,} values ({written:,} written), "
                    f"over the limit of {limit:,} values added by aliases ({MAX_YAML_NODES.how_to_raise()}); "
                    "nothing imported"
                )
        data = loader.construct_document(node) if node is not None else None
    except _TooDeep as exc:
        raise source.error(too_deep_reason(max_depth), line=exc.line) from None
    except RecursionError:  # the last resort (EVALSITE_IMPORT_MAX_DEPTH raised high): never a traceback
        raise source.error(TOO_DEEP) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise source.error(f"invalid YAML: {problem}", line=line, column=column) from None
    finally:
        loader.dispose()
    lines: dict[str, dict[int, int]] = {}
    for section in ("tests", "scenarios"):
        found = node if section == "tests" and not isinstance(node, yaml.MappingNode) else None
        if isinstance(node, yaml.MappingNode):
            found = next((value for key, value in node.value if key.value == section), None)
        if isinstance(found, yaml.SequenceNode):
            lines[section] = {index: item.start_mark.line + 1 for index, item in enumerate(found.value)}
        elif found is not None:
            lines[section] = {0: found.start_mark.line + 1}
    return data, lines
