"""Tools an agent can call, declared from typed Python functions.

The JSON schema the model sees and the validation of the arguments it sends both come from
one pydantic model built from the function's signature, so they cannot disagree. Parameter
descriptions come from ``Annotated[..., Field(description=...)]`` or from the Google-style
``Args:`` section of the docstring.

A tool never raises into the agent loop: invalid arguments and exceptions raised by the tool
come back as a :class:`ToolResult` whose ``content`` is an error text for the model to read.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast, overload

import pydantic

from evalcore._util.threads import run_blocking
from evalcore.jsonvalue import to_json
from evalcore.targets import RunContext

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Tool names the chat-completions API accepts."""

_ARGS_HEADERS = ("args:", "arguments:", "parameters:")
_SECTION_RE = re.compile(r"^(returns?|raises?|yields?|examples?|notes?|attributes?):\s*$", re.IGNORECASE)


@dataclass(slots=True)
class ToolResult:
    """The outcome of one tool call.

    Attributes:
        content: The text the model receives as the ``role: tool`` message (the value as
            text or JSON, or an ``Error: ...`` line).
        value: The tool's return value (``None`` on error).
        error: Why the call failed (invalid arguments, the tool raised), else ``None``.
    """

    content: str
    value: Any = None
    error: str | None = None

    @property
    def is_error(self) -> bool:
        """True when the call failed."""
        return self.error is not None


class Tool:
    """A typed Python function (sync or async) exposed to a model as a tool.

    Parameters become JSON-schema properties (``str``, ``int``, ``float``, ``bool``,
    ``list[...]``, ``Literal[...]``, enums, ``X | None``, pydantic models, defaults). A
    parameter annotated :class:`~evalcore.targets.RunContext` is not shown to the model;
    the agent passes its run context there.

    Args:
        fn: The function. Its docstring's first paragraph is the description.
        name: Tool name (defaults to the function name; ``[A-Za-z0-9_-]{1,64}``).
        description: Overrides the docstring summary.

    Raises:
        ValueError: On an invalid name or a ``*args`` / ``**kwargs`` parameter.
        TypeError: When a parameter type has no JSON schema.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        if not _NAME_RE.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match [A-Za-z0-9_-]{{1,64}}")
        summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
        self.description = description if description is not None else summary
        self._ctx_param: str | None = None
        self.arguments_model = self._build_model(arg_docs)
        self._schema = _inline_refs(_clean_schema(self.arguments_model.model_json_schema()))

    def _build_model(self, arg_docs: dict[str, str]) -> type[pydantic.BaseModel]:
        signature = inspect.signature(self.fn)
        try:
            hints = typing.get_type_hints(self.fn, include_extras=True)
        except NameError as exc:  # a string annotation naming a type defined in a local scope
            raise TypeError(f"tool {self.name!r}: cannot resolve a parameter annotation ({exc})") from exc
        fields: dict[str, Any] = {}
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ValueError(f"tool {self.name!r}: *args / **kwargs cannot be described to a model")
            annotation = hints.get(param.name, Any)
            if annotation is RunContext:
                self._ctx_param = param.name
                continue
            default = ... if param.default is param.empty else param.default
            doc = arg_docs.get(param.name)
            # Only pass a description when the docstring has one, so Annotated[..., Field(description=...)] wins.
            field_info = pydantic.Field(default, description=doc) if doc else pydantic.Field(default)
            fields[param.name] = (annotation, field_info)
        model_name = "".join(part.capitalize() for part in re.split(r"[_-]", self.name)) + "Arguments"
        try:
            model = pydantic.create_model(
                model_name,
                __config__=pydantic.ConfigDict(extra="forbid"),
                **fields,
            )
            model.model_json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
            raise TypeError(f"tool {self.name!r}: a parameter type has no JSON schema: {exc}") from exc
        return cast(type[pydantic.BaseModel], model)

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments object (a copy)."""
        return cast(dict[str, Any], json.loads(json.dumps(self._schema)))

    def openai_schema(self) -> dict[str, Any]:
        """The chat-completions tool declaration ``{"type": "function", "function": {...}}``."""
        function: dict[str, Any] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = self.parameters
        return {"type": "function", "function": function}

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check and coerce arguments; returns the keyword arguments to call the function with.

        Raises:
            pydantic.ValidationError: When the arguments do not fit the schema.
        """
        parsed = self.arguments_model.model_validate(arguments)
        # Attribute values, not model_dump(): enums, nested models and dates keep their types.
        return {key: getattr(parsed, key) for key in type(parsed).model_fields}

    async def invoke(self, arguments: dict[str, Any], ctx: RunContext | None = None) -> ToolResult:
        """Validate ``arguments``, call the tool, and render its result for the model.

        Never raises (except on cancellation): a validation error or an exception raised by
        the tool is returned as a ``ToolResult`` with ``error`` set and an ``Error: ...``
        content the model can act on. A sync function runs in a worker thread.

        Args:
            arguments: The parsed JSON arguments the model sent.
            ctx: The run context, passed to a ``RunContext`` parameter if the tool has one.
        """
        try:
            kwargs = self.validate(arguments)
        except pydantic.ValidationError as exc:
            error = f"invalid arguments for tool {self.name!r}: {_validation_summary(exc)}"
            return ToolResult(content=f"Error: {error}", error=error)
        if self._ctx_param is not None:
            kwargs[self._ctx_param] = ctx
        try:
            if inspect.iscoroutinefunction(self.fn):
                value = await self.fn(**kwargs)
            else:
                value = await run_blocking(self.fn, **kwargs)
                if inspect.isawaitable(value):
                    value = await value
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the model
            error = f"tool {self.name!r} raised {type(exc).__name__}: {exc}"
            return ToolResult(content=f"Error: {error}", error=error)
        return ToolResult(content=render_result(value), value=value)

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (no validation), awaiting it if async."""
        result = self.fn(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(*, name: str | None = None, description: str | None = None) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a tool from a typed function: ``@tool`` or ``@tool(name="search")``.

    Example::

        @tool
        def add(a: int, b: int = 0) -> int:
            \"\"\"Add two integers.

            Args:
                a: First addend.
                b: Second addend.
            \"\"\"
            return a + b

    Returns:
        A :class:`Tool` (or a decorator making one, when called with options).
    """
    if fn is not None:
        return Tool(fn, name=name, description=description)

    def decorate(func: Callable[..., Any]) -> Tool:
        return Tool(func, name=name, description=description)

    return decorate


def as_tool(value: Tool | Callable[..., Any]) -> Tool:
    """Return ``value`` if it is a Tool, else declare one from the function."""
    return value if isinstance(value, Tool) else Tool(value)


def render_result(value: Any) -> str:
    """A tool's return value as the text a model reads: strings as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(to_json(value), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _validation_summary(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (summary paragraph, {argument: description})."""
    lines = doc.splitlines()
    summary_lines: list[str] = []
    for line in lines:
        if not line.strip() or line.strip().lower() in _ARGS_HEADERS or _SECTION_RE.match(line.strip()):
            break
        summary_lines.append(line.strip())
    args: dict[str, str] = {}
    in_args = False
    current: str | None = None
    base_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        if stripped.lower() in _ARGS_HEADERS:
            in_args, current, base_indent = True, None, None
            continue
        if not in_args:
            continue
        if _SECTION_RE.match(stripped) or (stripped and not line.startswith((" ", "\t"))):
            in_args = False
            continue
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if base_indent is None:
            base_indent = indent
        match = re.match(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
        if indent == base_indent and match:
            current = match.group(1).lstrip("*")
            args[current] = match.group(2).strip()
        elif current is not None:
            args[current] = (args[current] + " " + stripped).strip()
    return " ".join(summary_lines), args


def _clean_schema(schema: Any) -> Any:
    """Drop pydantic's auto-generated ``title`` keys (noise in the prompt), keeping property names."""
    if isinstance(schema, list):
        return [_clean_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    cleaned: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            cleaned[key] = {name: _clean_schema(sub) for name, sub in value.items()}
        else:
            cleaned[key] = _clean_schema(value)
    return cleaned


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace local ``$ref``s by their ``$defs`` entry.

    Small OpenAI-compatible servers (llama.cpp grammars, Ollama) handle flat schemas better
    than references. A recursive type keeps its ``$ref`` (and its ``$defs``).
    """
    defs = schema.get("$defs") or {}
    if not defs:
        return schema
    unresolved = False

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        nonlocal unresolved
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            key = ref.removeprefix("#/$defs/")
            if key in seen or key not in defs:
                unresolved = True
                return node
            siblings = {k: resolve(v, seen) for k, v in node.items() if k != "$ref"}
            return {**resolve(defs[key], (*seen, key)), **siblings}
        return {k: resolve(v, seen) for k, v in node.items() if k != "$defs"}

    flat = resolve(schema, ())
    if unresolved:
        flat["$defs"] = defs
    return cast(dict[str, Any], flat)
