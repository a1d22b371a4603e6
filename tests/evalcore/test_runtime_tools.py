"""Tools declared from typed functions: schema, validation, errors returned (not raised)."""

from __future__ import annotations

import enum
from typing import Annotated, Literal

import pydantic
import pytest

from evalcore.runtime.tools import Tool, as_tool, render_result, tool
from evalcore.targets import RunContext
from evalcore.tracing import Tracer
from evalcore.types import Case


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Filters(pydantic.BaseModel):
    year: int
    venue: str | None = None


@tool
def search(
    query: str,
    k: int = 5,
    mode: Literal["bm25", "dense"] = "bm25",
    tags: list[str] | None = None,
    exact: bool = False,
) -> list[str]:
    """Search the corpus for passages.

    Returns passages ranked by score.

    Args:
        query: What to look for,
            in plain words.
        k: How many passages to return.
        mode: Retrieval method.

    Returns:
        Passage ids.
    """
    return [f"{mode}:{query}:{i}" for i in range(k)]


def test_schema_comes_from_the_signature_and_docstring() -> None:
    declared = search.openai_schema()
    assert declared["type"] == "function"
    function = declared["function"]
    assert function["name"] == "search"
    assert function["description"] == "Search the corpus for passages."
    params = function["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for, in plain words."}
    assert props["k"] == {"type": "integer", "default": 5, "description": "How many passages to return."}
    assert props["mode"]["enum"] == ["bm25", "dense"]
    assert props["mode"]["default"] == "bm25"
    assert {"type": "array", "items": {"type": "string"}} in props["tags"]["anyOf"]
    assert {"type": "null"} in props["tags"]["anyOf"]
    assert props["exact"]["type"] == "boolean"
    # pydantic's generated titles are noise in a prompt; a property named "title" must survive
    assert "title" not in params and "title" not in props["query"]


def test_enums_and_models_are_inlined_and_a_title_property_survives() -> None:
    def convert(title: str, value: float, unit: Unit, filters: Filters | None = None) -> str:
        """Convert a temperature."""
        return f"{title}{value}{unit.value}"

    params = Tool(convert).parameters
    assert "$defs" not in params and "$ref" not in str(params)
    assert params["properties"]["title"] == {"type": "string"}
    assert params["properties"]["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert params["properties"]["value"]["type"] == "number"
    nested = next(s for s in params["properties"]["filters"]["anyOf"] if s.get("type") == "object")
    assert nested["required"] == ["year"]


def test_annotated_field_description_and_decorator_options() -> None:
    @tool(name="lookup-city", description="Find a city.")
    def lookup(name: Annotated[str, pydantic.Field(description="City name")]) -> str:
        return name.upper()

    schema = lookup.openai_schema()["function"]
    assert schema["name"] == "lookup-city"
    assert schema["description"] == "Find a city."
    assert schema["parameters"]["properties"]["name"]["description"] == "City name"


async def test_run_context_parameter_is_hidden_from_the_model_and_injected() -> None:
    seen: list[str] = []

    def whoami(prefix: str, ctx: RunContext) -> str:
        seen.append(ctx.run_id)
        return prefix + ctx.run_id

    declared = Tool(whoami)
    assert list(declared.parameters["properties"]) == ["prefix"]
    ctx = RunContext(case=Case("c1", "x"), tracer=Tracer("t", "r"), run_id="r1", trace_id="t1")
    result = await declared.invoke({"prefix": "id="}, ctx)
    assert result.content == "id=r1"
    assert seen == ["r1"]


def test_invalid_names_and_varargs_are_refused() -> None:
    with pytest.raises(ValueError, match="must match"):
        Tool(lambda x: x, name="has space")

    def varargs(*items: str) -> str:
        return ""

    with pytest.raises(ValueError, match=r"\*args"):
        Tool(varargs)


async def test_invoke_validates_and_coerces_arguments() -> None:
    result = await search.invoke({"query": "cats", "k": "2"})
    assert result.error is None
    assert result.value == ["bm25:cats:0", "bm25:cats:1"]
    assert result.content == '["bm25:cats:0", "bm25:cats:1"]'


async def test_invalid_arguments_come_back_as_an_error_text() -> None:
    result = await search.invoke({"k": "many", "mode": "fuzzy", "limit": 3})
    assert result.is_error
    assert result.value is None
    assert result.content.startswith("Error: invalid arguments for tool 'search'")
    for fragment in ("query: Field required", "k: Input should be a valid integer", "mode:", "limit: Extra inputs"):
        assert fragment in result.content


async def test_a_raising_tool_comes_back_as_an_error_text() -> None:
    @tool
    async def divide(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    ok = await divide.invoke({"a": 1, "b": 4})
    assert (ok.content, ok.value) == ("0.25", 0.25)
    failed = await divide.invoke({"a": 1, "b": 0})
    assert failed.is_error
    assert failed.content == "Error: tool 'divide' raised ZeroDivisionError: float division by zero"


async def test_enum_arguments_arrive_as_enum_members() -> None:
    received: list[Unit] = []

    def pick(unit: Unit) -> str:
        received.append(unit)
        return unit.name

    result = await Tool(pick).invoke({"unit": "fahrenheit"})
    assert result.content == "FAHRENHEIT"
    assert received == [Unit.FAHRENHEIT]


def test_as_tool_and_render_result() -> None:
    assert as_tool(search) is search

    def ping() -> str:
        """Answer pong."""
        return "pong"

    declared = as_tool(ping)
    assert (declared.name, declared.parameters["properties"]) == ("ping", {})
    assert render_result("plain") == "plain"
    assert render_result({"a": (1, 2)}) == '{"a": [1, 2]}'
    assert render_result(None) == "null"


def test_runtime_package_exports_load_lazily() -> None:
    import subprocess
    import sys
    from pathlib import Path

    repo_root = Path(__file__).resolve().parents[2]
    code = (
        "import sys, evalcore, evalcore.runtime as r; assert 'openai' not in sys.modules, 'openai eager';"
        "assert r.Agent.kind == 'agent'; assert r.OpenAIChatModel.__name__ == 'OpenAIChatModel';"
        "assert sorted(r.__all__) == sorted(r._EXPORTS)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo_root, timeout=60)
    assert done.returncode == 0, done.stderr
