"""promptfoo's YAML: parsed as promptfoo's own parser does (the YAML 1.2 core schema), with the line
of each test. Imported only when a YAML file is read (PyYAML costs every ``evalsite`` command
~20 ms to import otherwise)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from evalcore.loaders._io import SourceFile, decode_whole


class _Loader(yaml.SafeLoader):
    """YAML with the 1.2 core schema promptfoo's parser uses: ``Yes`` / ``on`` stay text, ``010`` is ten,
    and ``2024-01-02`` stays text (as JSON would have it)."""


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


def promptfoo_yaml(source: SourceFile) -> tuple[Any, dict[int, int]]:
    """The YAML document, and the 1-based line of each item of its ``tests`` list (by index)."""
    text = decode_whole(source, source.read_bytes())
    try:
        node = yaml.compose(text, Loader=_Loader)
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise source.error(f"invalid YAML: {problem}", line=line, column=column) from None
    tests_node = node
    if isinstance(node, yaml.MappingNode):
        tests_node = next((value for key, value in node.value if key.value == "tests"), None)
    lines: dict[int, int] = {}
    if isinstance(tests_node, yaml.SequenceNode):
        lines = {index: item.start_mark.line + 1 for index, item in enumerate(tests_node.value)}
    elif tests_node is not None:
        lines = {0: tests_node.start_mark.line + 1}
    return data, lines
