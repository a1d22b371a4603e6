"""OpenInference spans (Arize Phoenix and its instrumentations) read as Evalsite span payloads.

OpenInference (``Arize-ai/openinference``, ``spec/semantic_conventions.md``) names a span's
kind in ``openinference.span.kind`` (``LLM``, ``TOOL``, ``AGENT``, ``CHAIN``, ``RETRIEVER``,
``RERANKER``, ``EMBEDDING``, ``GUARDRAIL``, ``EVALUATOR``, ``PROMPT``) and flattens lists into
indexed attributes: ``llm.input_messages.<i>.message.role`` / ``.content`` /
``.contents.<k>.message_content.text`` / ``.tool_call_id``, and
``llm.output_messages.<i>.message.tool_calls.<j>.tool_call.function.name`` / ``.arguments`` /
``.id``. Model calls carry ``llm.model_name`` (or ``llm.request.model_name`` /
``llm.response.model_name``), ``llm.provider`` / ``llm.system``, ``llm.token_count.prompt`` /
``completion`` / ``total`` and ``llm.finish_reason``; every kind may carry ``input.value`` /
``output.value`` (text or JSON, per ``input.mime_type``); a tool span names its tool in
``tool.name``. The payload keys written are the ones :mod:`evalcore.otel.ingest` writes for
the GenAI conventions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalcore.otel.messages import Message, chat_messages
from evalcore.otel.model import json_text, parse_json

SPAN_KIND = "openinference.span.kind"
MODEL_NAME = "llm.model_name"
REQUEST_MODEL = "llm.request.model_name"
RESPONSE_MODEL = "llm.response.model_name"
PROVIDER = "llm.provider"
SYSTEM = "llm.system"
PROMPT_TOKENS = "llm.token_count.prompt"
COMPLETION_TOKENS = "llm.token_count.completion"
TOTAL_TOKENS = "llm.token_count.total"
FINISH_REASON = "llm.finish_reason"
INPUT_MESSAGES = "llm.input_messages"
OUTPUT_MESSAGES = "llm.output_messages"
INPUT_VALUE = "input.value"
OUTPUT_VALUE = "output.value"
TOOL_NAME = "tool.name"
TOOL_ID = "tool.id"
AGENT_NAME = "agent.name"

KINDS = {
    "LLM": "chat",
    "TOOL": "execute_tool",
    "AGENT": "invoke_agent",
    "CHAIN": "node",
    "RETRIEVER": "node",
    "RERANKER": "node",
    "EMBEDDING": "node",
    "GUARDRAIL": "node",
    "EVALUATOR": "node",
    "PROMPT": "node",
}
"""OpenInference span kinds -> Evalsite span kinds (a kind not listed is not mapped)."""

CONSUMED_PREFIXES = (INPUT_MESSAGES + ".", OUTPUT_MESSAGES + ".")
"""Attributes read into messages, not kept under their own names."""
CONSUMED = frozenset(
    {
        MODEL_NAME,
        REQUEST_MODEL,
        RESPONSE_MODEL,
        PROVIDER,
        SYSTEM,
        PROMPT_TOKENS,
        COMPLETION_TOKENS,
        FINISH_REASON,
        INPUT_MESSAGES,
        OUTPUT_MESSAGES,
        INPUT_VALUE,
        OUTPUT_VALUE,
        TOOL_NAME,
        TOOL_ID,
    }
)


def is_openinference(attributes: Mapping[str, Any]) -> bool:
    """Whether a span speaks OpenInference (its kind, or a model call's ``llm.*`` attributes)."""
    return SPAN_KIND in attributes or any(
        key in attributes for key in (MODEL_NAME, PROMPT_TOKENS, INPUT_MESSAGES + ".0.message.role")
    )


def span_kind(attributes: Mapping[str, Any]) -> str | None:
    """The Evalsite kind of an OpenInference span (``None``: a kind OpenInference does not define)."""
    raw = attributes.get(SPAN_KIND)
    if raw is None:  # no kind, but a model's name or usage: a model call
        return "chat"
    return KINDS.get(str(raw).strip().upper())


def _put(node: dict[str, Any], parts: list[str], value: Any) -> None:
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def _items(node: Any) -> list[dict[str, Any]]:
    """The entries of an unflattened list (keys ``"0"``, ``"1"`` ...), in index order."""
    if not isinstance(node, dict):
        return []
    keys = sorted((k for k in node if k.isdigit()), key=int)
    return [node[k] for k in keys if isinstance(node[k], dict)]


def _unflatten(attributes: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``<prefix>.<i>.a.b`` attributes as ``[{"a": {"b": ...}}]`` in index order; also takes the
    list itself under ``<prefix>`` (an SDK that sends a list of maps with dotted keys)."""
    root: dict[str, Any] = {}
    head = prefix + "."
    for key, value in attributes.items():
        if key.startswith(head):
            _put(root, key[len(head) :].split("."), value)
    direct = attributes.get(prefix)
    if isinstance(direct, list | tuple):
        for index, item in enumerate(direct):
            if isinstance(item, Mapping):
                for key, value in item.items():
                    _put(root, [str(index), *str(key).split(".")], value)
    return _items(root)


def _message(node: dict[str, Any]) -> Message:
    found = node.get("message")
    item: dict[str, Any] = found if isinstance(found, dict) else node
    content = item.get("content")
    if content is None and isinstance(item.get("contents"), dict):
        parts = [p.get("message_content", p) for p in _items(item["contents"])]
        content = "".join(
            str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type", "text") == "text"
        )
    message: Message = {"role": str(item.get("role") or "user"), "content": content}
    calls = []
    for entry in _items(item.get("tool_calls")):
        call = entry.get("tool_call", entry)
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        arguments = function.get("arguments")
        calls.append(
            {
                "id": call.get("id"),
                "type": "function",
                "function": {
                    "name": function.get("name"),
                    "arguments": arguments if isinstance(arguments, str) else json_text(arguments or {}),
                },
            }
        )
    if not calls and item.get("function_call_name"):  # the older single function call
        arguments = item.get("function_call_arguments_json")
        function = {"name": item["function_call_name"], "arguments": arguments if isinstance(arguments, str) else "{}"}
        calls.append({"id": None, "type": "function", "function": function})
    if calls:
        message["tool_calls"] = calls
    for key in ("tool_call_id", "name"):
        if item.get(key):
            message[key] = item[key]
    return message


def messages(attributes: Mapping[str, Any], prefix: str) -> list[Message]:
    """The chat messages of ``llm.input_messages`` or ``llm.output_messages`` (``[]``: none)."""
    return [_message(node) for node in _unflatten(attributes, prefix)]


def value_messages(value: Any, *, role: str) -> list[Message]:
    """Messages from an ``input.value`` / ``output.value``: a chat payload's messages when it
    holds some, else the text as one message of ``role`` (``[]`` for no value)."""
    if value is None or value == "":
        return []
    parsed = parse_json(value)
    if isinstance(parsed, Mapping | list):
        found = [m for m in chat_messages(parsed) if m.get("content") or m.get("tool_calls")]
        if found:
            return found
    text = value if isinstance(value, str) else json_text(value)
    return [{"role": role, "content": text}]


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def payloads(attributes: Mapping[str, Any], kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The begin and end payload fields an OpenInference span of Evalsite ``kind`` maps to
    (the caller adds timing, status, errors and the attributes it keeps)."""
    a = attributes
    begin: dict[str, Any] = {}
    end: dict[str, Any] = {}
    if kind == "chat":
        model = a.get(REQUEST_MODEL) or a.get(MODEL_NAME)
        if model:
            begin["model"] = model
        if a.get(PROVIDER) or a.get(SYSTEM):
            begin["provider"] = a.get(PROVIDER) or a.get(SYSTEM)
        inputs = messages(a, INPUT_MESSAGES) or value_messages(a.get(INPUT_VALUE), role="user")
        if inputs:
            begin["input_messages"] = inputs
        if a.get(RESPONSE_MODEL) or a.get(MODEL_NAME):
            end["model"] = a.get(RESPONSE_MODEL) or a.get(MODEL_NAME)
        for key, name in (("tokens_in", PROMPT_TOKENS), ("tokens_out", COMPLETION_TOKENS)):
            count = _int(a.get(name))
            if count is not None and count >= 0:
                end[key] = count
        if a.get(FINISH_REASON):
            end["finish_reason"] = str(a[FINISH_REASON])
        outputs = messages(a, OUTPUT_MESSAGES) or value_messages(a.get(OUTPUT_VALUE), role="assistant")
        if outputs:
            end["output_messages"] = outputs
    elif kind == "execute_tool":
        if a.get(TOOL_ID):
            begin["tool_call_id"] = a[TOOL_ID]
        if INPUT_VALUE in a:
            begin["arguments"] = parse_json(a[INPUT_VALUE])
        if OUTPUT_VALUE in a:
            end["result"] = parse_json(a[OUTPUT_VALUE])
    else:  # an agent, chain, retriever ...: what went in and what came out
        inputs = value_messages(a.get(INPUT_VALUE), role="user")
        if inputs:
            begin["input_messages"] = inputs
        if OUTPUT_VALUE in a:
            if kind == "invoke_agent":
                end["output_messages"] = value_messages(a[OUTPUT_VALUE], role="assistant")
            else:
                end["result"] = a[OUTPUT_VALUE]
    return begin, end


def span_name(attributes: Mapping[str, Any], kind: str, default: str) -> str:
    """The name a span is shown under: a tool's name, an agent's, a model call's model."""
    a = attributes
    if kind == "execute_tool" and a.get(TOOL_NAME):
        return str(a[TOOL_NAME])
    if kind == "invoke_agent" and a.get(AGENT_NAME):
        return str(a[AGENT_NAME])
    if kind == "chat" and (a.get(RESPONSE_MODEL) or a.get(MODEL_NAME) or a.get(REQUEST_MODEL)):
        return str(a.get(RESPONSE_MODEL) or a.get(MODEL_NAME) or a.get(REQUEST_MODEL))
    return default
