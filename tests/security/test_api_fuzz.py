"""Property-based fuzzing of the JSON API from its own OpenAPI schema (hypothesis): every
operation, parameters and bodies drawn from the schema and mixed with hostile junk (huge
numbers, unicode, NUL, wrong types, extra keys). The API must never answer 500, and every
answer must be JSON."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.core.auth import create_api_token
from evalsite.api import api
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

SCHEMA = api.get_openapi_schema()
OPERATIONS = [(method, path) for path, ops in SCHEMA["paths"].items() for method in ops]

JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
"""Any JSON value: what a client might send instead of what the schema says."""

HOSTILE_TEXT = st.sampled_from(
    ["", " ", "\x00", "../../etc/passwd", "<script>alert(1)</script>", "%00", "' OR 1=1 --", "9" * 40, "é" * 300]
)


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values for a (ninja-generated) JSON schema, sometimes replaced by junk."""
    if "$ref" in schema:
        schema = SCHEMA["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in schema:
        valid = st.one_of([from_schema(s) for s in schema["anyOf"]])
    elif "enum" in schema:
        valid = st.sampled_from(schema["enum"])
    else:
        kind = schema.get("type")
        if kind == "integer":
            valid = st.integers(schema.get("minimum"), schema.get("maximum")) | st.integers() | st.just(10**30)
        elif kind == "number":
            valid = st.floats(allow_nan=False)
        elif kind == "boolean":
            valid = st.booleans()
        elif kind == "null":
            valid = st.none()
        elif kind == "string":
            valid = st.text(max_size=schema.get("maxLength", 60) or 60) | HOSTILE_TEXT
        elif kind == "array":
            valid = st.lists(from_schema(schema.get("items", {})), max_size=4)
        elif kind == "object":
            props = schema.get("properties", {})
            required = set(schema.get("required", []))
            valid = st.fixed_dictionaries(
                {k: from_schema(v) for k, v in props.items() if k in required},
                optional={k: from_schema(v) for k, v in props.items() if k not in required},
            )
        else:
            valid = JUNK
    return st.one_of(valid, valid, valid, JUNK)


def as_query_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


@pytest.fixture
def client_with_token(member):
    eval_set = make_eval_set(n_cases=3)
    make_eval_run(eval_set, [True, False, "errored"])
    _, raw = create_api_token(user=member)
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(data=st.data())
def test_the_api_never_answers_500_and_always_json(client_with_token, method, path, data):
    operation = SCHEMA["paths"][path][method]
    url = path
    query = {}
    for parameter in operation.get("parameters", []):
        value = data.draw(from_schema(parameter["schema"]), label=parameter["name"])
        if parameter["in"] == "path":
            url = url.replace("{" + parameter["name"] + "}", quote(as_query_value(value), safe="") or "x")
        elif value is not None:
            query[parameter["name"]] = as_query_value(value)
    if query:
        url += "?" + urlencode(query)
    kwargs: dict[str, Any] = {}
    body_schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body_schema is not None:
        kwargs = {
            "data": json.dumps(data.draw(from_schema(body_schema), label="body")),
            "content_type": "application/json",
        }
    response = getattr(client_with_token, method)(url, **kwargs)
    assert response.status_code < 500, (method, url, kwargs, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), (method, url, response.status_code)
