"""The agent runtime: model clients, tools, the agent loop.

Names are imported on first use (PEP 562), so ``import evalcore`` (which needs only
``runtime.models``) does not pay for the ``openai`` SDK, and ``llama_cpp`` loads only when a
:class:`LocalLlamaModel` first generates.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalcore.runtime.agent import Agent, MaxStepsError
    from evalcore.runtime.local import LocalLlamaModel
    from evalcore.runtime.models import ChatModel, ChatResponse, ModelError, ToolCall
    from evalcore.runtime.openai_client import OpenAIChatModel, model_from_settings
    from evalcore.runtime.scripted import FunctionModel, ModelCall, ScriptedModel
    from evalcore.runtime.tools import Tool, ToolResult, tool

_EXPORTS = {
    "Agent": "agent",
    "MaxStepsError": "agent",
    "LocalLlamaModel": "local",
    "ChatModel": "models",
    "ChatResponse": "models",
    "ModelError": "models",
    "ToolCall": "models",
    "OpenAIChatModel": "openai_client",
    "model_from_settings": "openai_client",
    "FunctionModel": "scripted",
    "ModelCall": "scripted",
    "ScriptedModel": "scripted",
    "Tool": "tools",
    "ToolResult": "tools",
    "tool": "tools",
}

__all__ = [
    "Agent",
    "ChatModel",
    "ChatResponse",
    "FunctionModel",
    "LocalLlamaModel",
    "MaxStepsError",
    "ModelCall",
    "ModelError",
    "OpenAIChatModel",
    "ScriptedModel",
    "Tool",
    "ToolCall",
    "ToolResult",
    "model_from_settings",
    "tool",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evalcore.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"evalcore.runtime.{module}"), name)
    globals()[name] = value
    return value
