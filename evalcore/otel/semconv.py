"""The attribute names the OTLP mapping writes and reads.

GenAI names follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``, development
status; moved to the ``semantic-conventions-genai`` repository): operation, provider, models,
usage, messages (``gen_ai.input.messages`` / ``gen_ai.output.messages``, JSON in the ``parts``
shape), tools (``execute_tool`` spans) and evaluation results. The older names that
instrumentations still send (``gen_ai.system``, ``gen_ai.usage.prompt_tokens``,
``gen_ai.prompt``, ...) are read on the way in, and ``gen_ai.system`` is written beside
``gen_ai.provider.name`` for backends that only know it.

``evalsite.*`` names carry what the conventions have no name for: the exact Evalsite span
payloads (so a trace sent out and back comes back the same) and the eval run, case and scores
on a case's root span.
"""

from __future__ import annotations

# --- GenAI semantic conventions
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"
"""Deprecated for :data:`PROVIDER`; written too, read as a fallback."""
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
LEGACY_INPUT_TOKENS = "gen_ai.usage.prompt_tokens"
LEGACY_OUTPUT_TOKENS = "gen_ai.usage.completion_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
LEGACY_PROMPT = "gen_ai.prompt"
"""Older instrumentations: a JSON list of ``{role, content}`` (or ``gen_ai.prompt.<i>.role`` /
``.content`` attributes, or a ``gen_ai.content.prompt`` span event carrying it)."""
LEGACY_COMPLETION = "gen_ai.completion"
LEGACY_PROMPT_EVENT = "gen_ai.content.prompt"
LEGACY_COMPLETION_EVENT = "gen_ai.content.completion"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"

CHAT_OPERATIONS = frozenset({"chat", "generate_content", "text_completion"})
"""Operations stored as Evalsite ``chat`` spans (model calls: counted, tokens summed)."""
AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})

# --- general OpenTelemetry conventions
ERROR_TYPE = "error.type"
SERVICE_NAME = "service.name"
SESSION_ID = "session.id"
EXCEPTION_EVENT = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"

# --- Evalsite: an exported span's own record (read back exactly on the way in)
SPAN_KIND = "evalsite.span.kind"
SPAN_NAME = "evalsite.span.name"
SPAN_BEGIN = "evalsite.span.begin"
"""JSON: the ``span_begin`` payload without the ids and kind."""
SPAN_END = "evalsite.span.end"
"""JSON: the ``span_end`` payload without the ids and kind (``None``: the span never ended)."""
SPAN_SEQ = "evalsite.span.seq"
"""``[begin seq, end seq]``: the events' places in the original log."""
ROLE = "evalsite.role"
EVENT_NAME = "evalsite.event.name"
EVENT_PAYLOAD = "evalsite.event.payload"
EVENT_SEQ = "evalsite.event.seq"
EVENT_ORPHAN = "evalsite.event.orphan"
"""True on a point event recorded outside any span (carried by the case's root span)."""
EVENT_PREFIX = "evalsite."
"""A point event of type ``T`` is exported as the span event ``evalsite.T`` (errors: ``exception``)."""

# --- Evalsite: the case's root span
RUN_ID = "evalsite.run.id"
TRACE_ID = "evalsite.trace.id"
EVAL_RUN_ID = "evalsite.eval_run.id"
EVAL_SET = "evalsite.eval_set.name"
CASE_ID = "evalsite.case.id"
CASE_REPEAT = "evalsite.case.repeat"
CASE_SPLIT = "evalsite.case.split"
CASE_STATUS = "evalsite.case.status"
CASE_REASON = "evalsite.case.reason"
CASE_SCORE = "evalsite.case.score"
TARGET_ID = "evalsite.target.id"
VARIANT = "evalsite.variant"
GIT_SHA = "evalsite.git.sha"
SCORE_PREFIX = "evalsite.score."
"""``evalsite.score.<scorer>`` = the value; ``.passed`` / ``.error`` beside it."""
