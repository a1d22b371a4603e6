"""Presence: did a rule's text reach the model, and in which model request (turn)?

Deterministic, from the trace alone (no model). The *model requests* of a run are its ``chat``
spans, in trace order, except the judge's own (``role: "judge"``); request ``k`` (1-based) is
turn ``k``. What a request sent is read, in this order:

1. an explicit request on the ``chat`` span's ``span_begin`` payload, under the first of
   ``request_messages`` (evalsite's key, for agents that build each request themselves),
   ``messages``, ``gen_ai.input.messages`` + ``gen_ai.system_instructions`` (OpenTelemetry GenAI),
   ``llm_request`` / ``gcp.vertex.agent.llm_request`` (Google ADK, JSON object or text),
   ``gen_ai.prompt``; every string inside is read (message contents, parts' texts, system
   instructions);
2. otherwise the conversation so far: the ``message`` events recorded under the innermost
   ``invoke_agent`` span enclosing the chat span (the evalsite ``Agent`` records its opening
   system/user messages, then each assistant and tool message), up to the chat span.

Matching (per rule, per request), on normalised text (Unicode NFKC, case-folded, every run of
non-alphanumeric characters one space):

* ``exact``: the rule's normalised text occurs in the request's;
* ``template``: the rule holds ``{placeholders}`` and the text around them occurs in order, each
  placeholder standing for 1 to :data:`SLOT_WORDS` words;
* ``fuzzy``: the best ``rapidfuzz.fuzz.token_set_ratio`` (0..100) between the rule and any line
  or sentence of the request (or two consecutive ones) is at least the threshold
  (:data:`DEFAULT_FUZZY_THRESHOLD`, 90: high enough that "answer in English" does not match
  "answer in French" (85), low enough for reworded punctuation, articles and a changed word in a
  long rule). Placeholders are dropped from the rule before the fuzzy comparison.
"""

from __future__ import annotations

import itertools
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalcore.rules.model import Rule

DEFAULT_FUZZY_THRESHOLD = 90.0
"""Minimum ``token_set_ratio`` (0..100) for a fuzzy match."""

SLOT_WORDS = 6
"""Most words a ``{placeholder}`` of a templated rule stands for."""

REQUEST_KEYS: tuple[str, ...] = (
    "request_messages",
    "messages",
    "gen_ai.input.messages",
    "llm_request",
    "gcp.vertex.agent.llm_request",
    "gen_ai.prompt",
)
"""``span_begin`` payload keys read as an explicit model request, in order of preference."""

_SYSTEM_KEYS = ("gen_ai.system_instructions",)
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_SEGMENT = re.compile(r"(?:\n+|(?<=[.!?;])\s+)")


def normalise(text: str) -> str:
    """NFKC, case-folded, each run of non-alphanumeric characters one space, stripped."""
    return _NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


@dataclass(slots=True)
class ModelRequest:
    """One model request found in a trace.

    Attributes:
        turn: 1-based position among the run's model requests.
        span_id: The ``chat`` span's id.
        texts: Every text the request sent (system prompt, messages, tool results).
        explicit: True when the span recorded its request; False when rebuilt from messages.
    """

    turn: int
    span_id: str
    texts: list[str]
    explicit: bool = False

    @property
    def text(self) -> str:
        """All texts joined by newlines."""
        return "\n".join(self.texts)


def _get(event: Any, key: str) -> Any:
    return event.get(key) if isinstance(event, dict) else getattr(event, key, None)


def strings_in(value: Any) -> list[str]:
    """Every string inside a JSON value, depth first (JSON text is parsed first when it parses)."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return strings_in(json.loads(stripped))
            except ValueError:
                pass
        return [value] if stripped else []
    if isinstance(value, dict):
        return [
            s
            for key, item in value.items()
            if key not in ("role", "type", "id", "tool_call_id")
            for s in strings_in(item)
        ]
    if isinstance(value, list | tuple):
        return [s for item in value for s in strings_in(item)]
    return []


def _explicit_request(payload: dict[str, Any]) -> list[str] | None:
    system = [s for key in _SYSTEM_KEYS if key in payload for s in strings_in(payload[key])]
    for key in REQUEST_KEYS:
        if key in payload and payload[key] is not None:
            return system + strings_in(payload[key])
    return system or None


def _message_texts(payload: dict[str, Any]) -> list[str]:
    texts = strings_in(payload.get("content"))
    for call in payload.get("tool_calls") or []:
        texts.extend(strings_in(call))
    return texts


def model_requests(events: Iterable[Any]) -> list[ModelRequest]:
    """The model requests of a run's trace, in order (see the module doc).

    Args:
        events: :class:`~evalcore.tracing.TraceEvent` objects or their dict form, in any order
            (sorted by ``seq`` here).

    Returns:
        One :class:`ModelRequest` per non-judge ``chat`` span.
    """
    ordered = sorted(events, key=lambda e: _get(e, "seq") or 0)
    kinds: dict[str, str] = {}
    parents: dict[str, str | None] = {}
    conversations: dict[str | None, list[str]] = {}
    requests: list[ModelRequest] = []

    def agent_of(span_id: str | None) -> str | None:
        seen = 0
        while span_id is not None and kinds.get(span_id) != "invoke_agent" and seen < 1000:
            span_id, seen = parents.get(span_id), seen + 1
        return span_id

    for event in ordered:
        kind_of_event = _get(event, "type")
        payload = _get(event, "payload") or {}
        if kind_of_event == "span_begin":
            span_id = str(payload.get("span_id"))
            kinds[span_id] = str(payload.get("kind"))
            parent = payload.get("parent_span_id")
            parents[span_id] = str(parent) if parent is not None else None
            if payload.get("kind") != "chat" or payload.get("role") == "judge":
                continue
            explicit = _explicit_request(payload)
            if explicit is not None:
                requests.append(ModelRequest(len(requests) + 1, span_id, explicit, explicit=True))
            else:
                history = conversations.get(agent_of(parents[span_id]), [])
                requests.append(ModelRequest(len(requests) + 1, span_id, list(history)))
        elif kind_of_event == "message":
            parent = payload.get("parent_span_id")
            key = agent_of(str(parent) if parent is not None else None)
            conversations.setdefault(key, []).extend(_message_texts(payload))
    return requests


@dataclass(slots=True)
class Match:
    """How a rule matched one request: ``exact``, ``template`` or ``fuzzy``, with the similarity
    (0..100; 100 for exact and template matches)."""

    kind: str
    similarity: float


class RuleMatcher:
    """Matches one rule against request texts (see the module doc).

    Args:
        rule: The rule.
        threshold: Minimum fuzzy ``token_set_ratio`` (0..100); ``None`` turns fuzzy matching off.

    Raises:
        ValueError: A threshold outside 0..100.
    """

    def __init__(self, rule: Rule, threshold: float | None = DEFAULT_FUZZY_THRESHOLD) -> None:
        if threshold is not None and not 0.0 <= threshold <= 100.0:
            raise ValueError(f"fuzzy threshold must be in 0..100, got {threshold!r}")
        self.rule = rule
        self.threshold = threshold
        self.plain = normalise(_PLACEHOLDER.sub(" ", rule.text))
        parts = [normalise(p) for p in _PLACEHOLDER.split(rule.text)]
        self.templated = len(parts) > 1
        slot = rf"\S+(?: \S+){{0,{SLOT_WORDS - 1}}}"
        items: list[str] = []
        for index, part in enumerate(parts):
            if index:
                items.append(slot)
            if part:
                items.append(re.escape(part))
        self.pattern = re.compile(r"(?:^| )" + " ".join(items) + r"(?: |$)")

    def match(self, text: str) -> Match | None:
        """The best match in ``text``, or ``None``."""
        norm = normalise(text)
        if not self.templated and self.plain and f" {self.plain} " in f" {norm} ":
            return Match("exact", 100.0)
        if self.templated and self.pattern.search(norm):
            return Match("template", 100.0)
        if self.threshold is None or not self.plain:
            return None
        from rapidfuzz import fuzz  # here, not at the top: only a fuzzy rule needs it (start-up time)

        segments = [normalise(s) for s in _SEGMENT.split(text) if s.strip()]
        windows = segments + [f"{a} {b}" for a, b in itertools.pairwise(segments)]
        best = max((fuzz.token_set_ratio(self.plain, w) for w in windows if w), default=0.0)
        return Match("fuzzy", round(float(best), 1)) if best >= self.threshold else None


PRESENCE_EVERY = "every"
PRESENCE_DROPPED = "dropped"
PRESENCE_PARTIAL = "partial"
PRESENCE_NONE = "none"


@dataclass(slots=True)
class RulePresence:
    """Where a rule appeared among a run's model requests.

    Its record (:func:`evalcore.serial.to_record`) is the presence part of a rule's score details.

    Attributes:
        turns: 1-based turns whose request held it.
        n_turns: Model requests in the run.
        match: The weakest match kind among those turns (``exact`` < ``template`` < ``fuzzy``
            in strength), or ``None``.
        similarity: The lowest similarity among those turns (0..100), or ``None``.
        presence: ``every`` (all requests), ``dropped`` (the first ``k`` requests, then never
            again: ``dropped_after`` = k), ``partial`` (some other pattern) or ``none``.
        dropped_after: See ``presence``.
    """

    turns: list[int] = field(default_factory=list)
    n_turns: int = 0
    match: str | None = None
    similarity: float | None = None
    presence: str = PRESENCE_NONE
    dropped_after: int | None = None

    def present(self, require: str) -> bool:
        """In every request (``require="every"``) or in any (``"any"``)."""
        return self.presence == PRESENCE_EVERY if require == "every" else bool(self.turns)


_STRENGTH = {"exact": 0, "template": 1, "fuzzy": 2}


def rule_presence(rule: Rule, requests: Sequence[ModelRequest], threshold: float | None) -> RulePresence:
    """Find ``rule`` in each request (see :class:`RulePresence`)."""
    matcher = RuleMatcher(rule, threshold)
    result = RulePresence(n_turns=len(requests))
    weakest: Match | None = None
    for request in requests:
        found = matcher.match(request.text)
        if found is None:
            continue
        result.turns.append(request.turn)
        if weakest is None or (_STRENGTH[found.kind], -found.similarity) > (
            _STRENGTH[weakest.kind],
            -weakest.similarity,
        ):
            weakest = found
    if weakest is not None:
        result.match, result.similarity = weakest.kind, weakest.similarity
    n = len(result.turns)
    if n == 0:
        result.presence = PRESENCE_NONE
    elif n == len(requests):
        result.presence = PRESENCE_EVERY
    elif result.turns == list(range(1, n + 1)):
        result.presence, result.dropped_after = PRESENCE_DROPPED, n
    else:
        result.presence = PRESENCE_PARTIAL
    return result
