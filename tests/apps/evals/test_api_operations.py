"""The API's public face stays put: every path, method, OpenAPI operation id, tag, summary and
documented response of ``/api/openapi.json`` equals the stored snapshot
(``tests/fixtures/openapi/operations.json``, taken from the single-router ``api/routes.py``
before it was split into one router per area, issue 24).

A route added on purpose updates the snapshot: ``EVALSITE_SNAPSHOT=write`` rewrites it from the
running code, then review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

SNAPSHOT = Path(__file__).resolve().parents[2] / "fixtures" / "openapi" / "operations.json"


def operations(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"GET /api/eval/sets": {"operationId": ..., "tags": ..., "summary": ..., "responses": ...}}``
    for every operation of an OpenAPI document (request bodies and parameters left out)."""
    found: dict[str, dict[str, Any]] = {}
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            found[f"{method.upper()} {path}"] = {
                "operationId": op["operationId"],
                "tags": op.get("tags"),
                "summary": op.get("summary"),
                "responses": op["responses"],
            }
    return found


def test_paths_operation_ids_and_responses_match_the_snapshot(viewer):
    client = Client()
    client.force_login(viewer)
    response = client.get("/api/openapi.json")
    assert response.status_code == 200
    found = operations(json.loads(response.content))
    if os.environ.get("EVALSITE_SNAPSHOT") == "write":
        SNAPSHOT.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n")
    expected = json.loads(SNAPSHOT.read_text())
    assert sorted(found) == sorted(expected)
    for key, op in expected.items():
        assert found[key] == op, key
