"""Simulated users: who plays the user side of a scenario case (:class:`~evalcore.conversations.Scenario`).

Two simulators, one protocol (:class:`UserSimulator`): given the scenario and the turns played
so far, the user's next message, or the end of the conversation.

* :class:`ScriptedUser` replies with the scenario's ``script`` in order (ADK's static user) and
  ends the conversation when the script runs out.
* :class:`LLMUser` asks a chat model (any OpenAI-compatible endpoint, the judge's client and ask
  loop: :func:`evalcore.judge.ask.ask_judge`) to play the persona towards the goal, at
  temperature 0 with a fixed ``seed``; the model writes :data:`STOP_SIGNAL` (ADK's) when the goal
  is met. Its replies are cached under a key covering the scenario, the model (name, class,
  endpoint), the seed, the sampling settings, the prompt and the conversation so far
  (:func:`simulator_cache_key`), so a second run, or variant B while its answers equal variant
  A's, meets the same user without a model call. The cache is any
  :class:`~evalcore.judge.cache.JudgeCache` (e.g. a :class:`~evalcore.judge.cache.SqliteJudgeCache`:
  the key's ``namespace`` keeps simulator entries apart from the judge's).

The helpers for comparing simulated conversations are here too: :func:`first_divergence` (the
first turn where two conversations differ) and :func:`conversation_variance` (how many distinct
conversations the repeats of each simulated case produced).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalcore.conversations import Scenario
from evalcore.jsonvalue import to_json
from evalcore.judge.ask import UnreadableAnswer, ask_judge
from evalcore.judge.cache import JudgeCache, judge_endpoint
from evalcore.runtime.models import ChatModel
from evalcore.stats import wilson_interval
from evalcore.tracing import Tracer
from evalcore.types import JSON

STOP_SIGNAL = "</finished>"
"""What the LLM-backed user writes when its goal is met (ADK's ``_STOP_SIGNAL``)."""

SPAN_KIND = "user_simulator"
"""The kind of the span each simulated user message gets in a case's trace."""

PROMPT_VERSION = "user-sim-v1"
"""Version of :data:`SYSTEM_PROMPT`; part of the cache key."""

CACHE_KEY_VERSION = 1
"""Bumped whenever :func:`simulator_cache_key`'s payload changes shape."""

SYSTEM_PROMPT = """You are playing a USER talking to an AI agent. Stay in character; never act as the agent.

# Who you are
{persona}

# What you want from this conversation
{goal}

# How to reply
* Write only your next message to the agent: one short, natural message, no quotes, no labels.
* Answer the agent's questions with what your goal states; do not invent facts it does not give.
* If the agent did what you asked, move on to the next thing you want; if it failed, ask again once.
* When everything you want is done (or the agent failed twice), write exactly {stop_signal} and nothing else.
"""
"""The LLM-backed user's system prompt (after ADK's ``llm_backed_user_simulator_prompts``, shortened)."""


class SimulatorError(Exception):
    """The user simulator could not produce a message (its model failed after every retry)."""


@dataclass(slots=True)
class UserReply:
    """The user's next message, or the end of the conversation.

    Attributes:
        text: The message, or ``None`` when the user ends the conversation.
        reason: Why it ended (``script_ended``, ``stop_signal``), ``None`` for a message.
        cached: Whether the reply came from the cache (no model call).
        calls: Model calls made for it (retries included; 0 when cached or scripted).
        tokens_in: Prompt tokens of those calls.
        tokens_out: Completion tokens of those calls.
        model: The simulator's model name (``None`` for a scripted user).
    """

    text: str | None
    reason: str | None = None
    cached: bool = False
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    model: str | None = None


class UserSimulator(Protocol):
    """Plays the user side of a scenario.

    Attributes:
        kind: ``scripted`` or ``llm`` (recorded in the case's ``metadata["simulator"]``).
    """

    kind: str

    async def reply(
        self, scenario: Scenario, turns: Sequence[Mapping[str, Any]], *, tracer: Tracer | None
    ) -> UserReply:
        """The user's next message after ``turns`` (each ``{"user", "final_response"}``, at least
        the opening turn).

        Raises:
            SimulatorError: No message could be produced (never a silent end of the conversation).
        """
        ...


class ScriptedUser:
    """The scenario's ``script`` in order, then the end (ADK's static user simulator)."""

    kind = "scripted"

    async def reply(
        self, scenario: Scenario, turns: Sequence[Mapping[str, Any]], *, tracer: Tracer | None
    ) -> UserReply:
        """Reply ``script[len(turns) - 1]``; the end (``script_ended``) once the script is used up."""
        script = scenario.script or ()
        index = len(turns) - 1
        if index >= len(script):
            return UserReply(None, reason="script_ended")
        return UserReply(script[index])


def simulator_cache_key(
    *,
    scenario: Scenario,
    model: str,
    endpoint: dict[str, Any] | None,
    seed: int | None,
    temperature: float | None,
    max_tokens: int | None,
    messages: list[dict[str, Any]],
    turns: Sequence[Mapping[str, Any]],
) -> str:
    """The key of one simulated reply: sha256 (hex) of the canonical JSON of what shapes it.

    Args:
        scenario: The scenario played (its :meth:`~evalcore.conversations.Scenario.record`).
        model: The simulator model's name.
        endpoint: :func:`~evalcore.judge.cache.judge_endpoint` of the model (class and base URL,
            credentials stripped).
        seed, temperature, max_tokens: The sampling settings sent.
        messages: The exact chat messages sent (the prompt text is covered, whatever its version).
        turns: The conversation so far: each turn's user message and the agent's final response.

    The payload carries ``namespace: "user_simulator"``, so a key never equals a judge key in a
    shared cache.
    """
    payload = {
        "namespace": SPAN_KIND,
        "key_version": CACHE_KEY_VERSION,
        "prompt_version": PROMPT_VERSION,
        "scenario": scenario.record(),
        "model": model,
        "endpoint": endpoint,
        "seed": seed,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "messages": to_json(messages),
        "turns": [{"user": turn.get("user"), "final_response": to_json(turn.get("final_response"))} for turn in turns],
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def simulator_messages(scenario: Scenario, turns: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The chat messages asking for the user's next message: the system prompt, then the
    conversation with the roles swapped (the user's own messages as ``assistant``, the agent's
    answers as ``user``), since the model plays the user."""
    system = SYSTEM_PROMPT.format(
        persona=scenario.persona or "An ordinary user of this agent.",
        goal=scenario.goal or "Get a useful answer to your opening message.",
        stop_signal=STOP_SIGNAL,
    )
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for turn in turns:
        messages.append({"role": "assistant", "content": str(turn.get("user") or "")})
        answer = turn.get("final_response")
        messages.append({"role": "user", "content": answer if type(answer) is str else json.dumps(to_json(answer))})
    return messages


def _read_reply(text: str | None) -> str:
    if text is None or not text.strip():
        raise UnreadableAnswer("empty", "the user simulator's answer is empty", text)
    return text.strip()


@dataclass(slots=True)
class LLMUser:
    """A user played by a chat model, seeded and cached (see the module docstring).

    Args:
        model: The chat model (e.g. an :class:`~evalcore.runtime.openai_client.OpenAIChatModel`).
        cache: Where replies are kept between runs (``None``: no cache, every reply is a call).
        seed: Sent with every call (and part of the cache key).
        temperature: Sent with every call (0: the model's most likely reply).
        max_tokens: Completion token cap per call.
        retries: New attempts after a failed call (the judge's retry rule, :mod:`evalcore.judge.ask`).
        timeout_s: Seconds one call may take (``None``: no limit).
    """

    model: ChatModel
    cache: JudgeCache | None = None
    seed: int = 0
    temperature: float = 0.0
    max_tokens: int | None = 256
    retries: int = 2
    timeout_s: float | None = 60.0
    kind: str = "llm"
    _format_level: dict[str, int] = field(default_factory=dict)
    _inflight: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)

    async def reply(
        self, scenario: Scenario, turns: Sequence[Mapping[str, Any]], *, tracer: Tracer | None
    ) -> UserReply:
        """The model's next user message (a cached one when this conversation was seen before).

        Concurrent requests for the same key (repeats of a case running at once) share one call;
        when the case that made it is cancelled (its turn timed out), the others ask again.

        Raises:
            SimulatorError: Every attempt failed (model error, timeout, empty answer).
        """
        messages = simulator_messages(scenario, turns)
        key = simulator_cache_key(
            scenario=scenario,
            model=self.model.name,
            endpoint=judge_endpoint(self.model),
            seed=self.seed,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            messages=messages,
            turns=turns,
        )
        stored = self.cache.get(key) if self.cache is not None else None
        cached = stored is not None
        while stored is None:
            pending = self._inflight.get(key)
            if pending is not None:
                try:
                    stored, cached = dict(await asyncio.shield(pending)), True
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if not pending.cancelled() or (task is not None and task.cancelling()):
                        raise  # this caller's own cancellation (its turn timed out)
                    continue  # the call it waited on was cancelled with its own case: ask again
                stored["tokens_in"] = stored["tokens_out"] = stored["calls"] = 0
            else:
                future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
                self._inflight[key] = future
                try:
                    stored = await self._ask(messages, tracer)
                    future.set_result(stored)
                except asyncio.CancelledError:
                    future.cancel()  # a waiter asks again rather than inherit this case's timeout
                    raise
                except BaseException as exc:
                    future.set_exception(exc)
                    future.exception()  # retrieved: a waiter re-raises it, nobody logs it as lost
                    raise
                finally:
                    del self._inflight[key]
                if self.cache is not None:
                    self.cache.set(key, {"text": stored["text"]})
        text = str(stored["text"])
        reply = UserReply(text, cached=cached, model=self.model.name)
        if not cached:
            reply.calls, reply.tokens_in, reply.tokens_out = stored["calls"], stored["tokens_in"], stored["tokens_out"]
        if STOP_SIGNAL.lower() in text.lower():
            reply.text, reply.reason = None, "stop_signal"
        return reply

    async def _ask(self, messages: list[dict[str, Any]], tracer: Tracer | None) -> dict[str, Any]:
        asked = await ask_judge(
            self.model,
            messages,
            _read_reply,
            formats=[None],
            format_level=self._format_level,
            retries=self.retries,
            timeout_s=self.timeout_s,
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens,
            tracer=None,  # the caller's user_simulator span records the call; it is no judge call
            prompt_version=PROMPT_VERSION,
        )
        if asked.value is None:
            raise SimulatorError(f"the user simulator ({self.model.name}) failed: {asked.kind}: {asked.detail}")
        return {"text": asked.value, "calls": asked.calls, "tokens_in": asked.tokens_in, "tokens_out": asked.tokens_out}


def simulator_for(scenario: Scenario, llm_user: UserSimulator | None) -> UserSimulator | None:
    """Who plays ``scenario``: a :class:`ScriptedUser` when it has a script, else ``llm_user``
    (``None`` when the run has no LLM-backed simulator configured)."""
    return ScriptedUser() if scenario.script is not None else llm_user


# --- comparing simulated conversations -------------------------------------------------------


def first_divergence(turns_a: Any, turns_b: Any) -> int | None:
    """The first turn (1-based, as ``metadata["turns"][i]["turn"]``) where two played
    conversations differ, ``None`` when they are the same turn for turn.

    Each argument is a case's ``metadata["turns"]`` (see :mod:`evalcore.conversations`); a value
    that is not a list reads as no turn played. Two turns are the same when their ``user``
    message, ``final_response``, ``tool_calls`` (absent = none) and ``error`` are equal; when one
    conversation stopped earlier, the first turn only the longer one played differs. For two
    variants meeting one simulated user, every turn before the returned one had the same user
    message and the same answer, so the simulator replied the same.
    """
    a = turns_a if isinstance(turns_a, list) else []
    b = turns_b if isinstance(turns_b, list) else []
    for index in range(max(len(a), len(b))):
        if index >= len(a) or index >= len(b) or _turn_signature(a[index]) != _turn_signature(b[index]):
            return index + 1
    return None


def _turn_signature(turn: Any) -> str:
    if not isinstance(turn, Mapping):
        return "null"
    return json.dumps(
        [
            to_json(turn.get("user")),
            to_json(turn.get("final_response")),
            to_json(turn.get("tool_calls") or []),
            to_json(turn.get("error")),
        ],
        sort_keys=True,
    )


def conversation_signature(turns: Sequence[Any]) -> str:
    """A short hash of a played conversation (user messages, answers, tool calls per turn): two
    repeats with the same signature met the same user and gave the same answers."""
    joined = "\n".join(_turn_signature(turn) for turn in turns)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ConversationVariance:
    """How much the repeats of a run's simulated cases differ.

    Attributes:
        per_case: Per simulated case id: ``{"repeats": N, "distinct": k}``, the number of
            distinct conversations its N repeats played (1: every repeat met the same user).
        varying: Simulated cases with more than one distinct conversation.
        cases: Simulated cases with at least two repeats (the coverage's N).
        interval: 95% Wilson interval of ``varying / cases`` (Wilson 1927; ``None`` when
            ``cases`` is 0).
    """

    per_case: dict[str, dict[str, int]]
    varying: int
    cases: int
    interval: tuple[float, float] | None

    @property
    def share(self) -> float | None:
        """``varying / cases``, ``None`` when no case was repeated."""
        return self.varying / self.cases if self.cases else None

    def as_json(self) -> dict[str, JSON]:
        """The report block: ``{"per_case", "varying", "cases", "coverage", "share", "interval"}``."""
        return {
            "per_case": {key: dict(value) for key, value in self.per_case.items()},
            "varying": self.varying,
            "cases": self.cases,
            "coverage": f"n={self.varying}/{self.cases}",
            "share": self.share,
            "interval": None if self.interval is None else list(self.interval),
        }

    def summary(self) -> str:
        """One line for the CLI, e.g. ``simulated users: 1/4 cases met a different conversation
        across repeats (25%, 95% CI 5%-70%)``."""
        if not self.cases:
            return "simulated users: no simulated case was repeated"
        low, high = self.interval or (0.0, 1.0)
        return (
            f"simulated users: {self.varying}/{self.cases} cases met a different conversation across repeats "
            f"({self.varying / self.cases:.0%}, 95% CI {low:.0%}-{high:.0%})"
        )


def conversation_variance(runs: Iterable[tuple[str, Mapping[str, Any]]]) -> ConversationVariance:
    """Distinct conversations per simulated case over its repeats.

    Args:
        runs: ``(case id, run metadata)`` for every run of an eval run (repeats included); runs
            without ``metadata["simulator"]`` (not simulated) are skipped, and so are runs that
            errored before any turn was played.

    Returns:
        The :class:`ConversationVariance`; cases run once are in ``per_case`` but not in the
        share's coverage (a single run cannot vary).
    """
    seen: dict[str, list[str]] = {}
    for case_id, metadata in runs:
        if not isinstance(metadata, Mapping) or not isinstance(metadata.get("simulator"), Mapping):
            continue
        turns = metadata.get("turns")
        if not isinstance(turns, list) or not turns:
            continue
        seen.setdefault(case_id, []).append(conversation_signature(turns))
    per_case = {case_id: {"repeats": len(sigs), "distinct": len(set(sigs))} for case_id, sigs in seen.items()}
    repeated = [counts for counts in per_case.values() if counts["repeats"] > 1]
    varying = sum(1 for counts in repeated if counts["distinct"] > 1)
    return ConversationVariance(
        per_case=per_case,
        varying=varying,
        cases=len(repeated),
        interval=wilson_interval(varying, len(repeated)) if repeated else None,
    )
