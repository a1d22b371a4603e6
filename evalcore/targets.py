"""Targets: what an eval runs. A plain function, a :class:`Node`, a :class:`Pipeline`, an agent.

:func:`resolve_target` reduces any of them to one async callable ``(input, ctx) -> value`` and
reports its kind, so one runner evaluates a single pipeline step or a whole agent alike.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from evalcore._util.threads import run_blocking
from evalcore.tracing import Tracer
from evalcore.types import Case, TargetOutput

TargetKind = Literal["node", "agent", "pipeline"]


@dataclass(slots=True)
class RunContext:
    """What a target receives besides its input.

    Attributes:
        case: The case being run (targets should read only ``case.input``; ``expected`` is
            there for replay/oracle targets and tests).
        tracer: Records spans and events for this run's trace.
        run_id: This run's id.
        trace_id: This run's trace id.
        eval_run_id: The eval run this case belongs to, if any.
        variant: The variant label of the eval run.
        metadata: Free per-run values a target may add (they are stored on the run).
        session: While a conversation case is played, its
            :class:`~evalcore.conversations.Session` (history, state, turn index); else ``None``.
    """

    case: Case
    tracer: Tracer
    run_id: str
    trace_id: str
    eval_run_id: str | None = None
    variant: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    session: Any = None


@runtime_checkable
class Node(Protocol):
    """One pipeline step: ``run(input, ctx)`` returns its output (sync or async).

    A node has a ``name`` used for its trace span.
    """

    name: str

    def run(self, input: Any, ctx: RunContext) -> Any: ...


class FunctionNode:
    """A :class:`Node` made from a function ``fn(input)`` or ``fn(input, ctx)``, sync or async."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", "node"))

    async def run(self, input: Any, ctx: RunContext) -> Any:
        return await call_flexibly(self.fn, input, ctx)


class Pipeline:
    """Nodes chained: each node's output is the next node's input.

    Each step runs inside a ``node`` span. A step may return a :class:`TargetOutput`; its
    ``output`` feeds the next step, and tokens are summed across steps.

    Args:
        nodes: The steps, in order (nodes or plain functions).
        name: The pipeline's name.
    """

    def __init__(self, nodes: Sequence[Node | Callable[..., Any]], name: str = "pipeline") -> None:
        if not nodes:
            raise ValueError("a Pipeline needs at least one node")
        self.nodes: list[Node] = [n if isinstance(n, Node) else FunctionNode(n) for n in nodes]
        self.name = name

    async def run(self, input: Any, ctx: RunContext) -> TargetOutput:
        value: Any = input
        tokens_in = tokens_out = 0
        model: str | None = None
        steps: dict[str, Any] = {}
        for node in self.nodes:
            with ctx.tracer.span("node", node.name) as span:
                result = await call_flexibly(node.run, value, ctx)
                if isinstance(result, TargetOutput):
                    tokens_in += result.tokens_in or 0
                    tokens_out += result.tokens_out or 0
                    model = result.model or model
                    result = result.output
                span.set(output_preview=preview(result))
            steps[node.name] = result
            value = result
        return TargetOutput(
            output=value,
            model=model,
            tokens_in=tokens_in or None,
            tokens_out=tokens_out or None,
            metadata={"steps": list(steps)},
        )


class PromotedAgent:
    """A pipeline promoted to an agent: same behaviour, wrapped in an ``invoke_agent`` span."""

    def __init__(self, pipeline: Pipeline, name: str | None = None) -> None:
        self.pipeline = pipeline
        self.name = name or pipeline.name

    async def run(self, input: Any, ctx: RunContext) -> Any:
        with ctx.tracer.span("invoke_agent", self.name):
            return await self.pipeline.run(input, ctx)


def as_agent(pipeline: Pipeline, name: str | None = None) -> PromotedAgent:
    """Promote a :class:`Pipeline` to an agent target (kind ``pipeline``)."""
    return PromotedAgent(pipeline, name)


TargetFn = Callable[[Any, RunContext], Awaitable[Any]]


@dataclass(slots=True)
class ResolvedTarget:
    """A target reduced to one async callable, with its kind and name."""

    fn: TargetFn
    kind: TargetKind
    name: str
    self_traced: bool = False
    """True when the target opens its own root span (an ``Agent``, a promoted pipeline), so the
    runner does not wrap it in a second one."""
    conversational: bool = False
    """True when the target plays a conversation turn by turn (a function with a ``session``
    parameter, an object with ``conversational = True``): called once per turn with the turn's
    message, ``ctx.session`` holding the session (see :mod:`evalcore.conversations`)."""


def resolve_target(target: Any) -> ResolvedTarget:
    """Reduce any supported target to one async ``(input, ctx)`` callable.

    Supported: a :class:`Pipeline` or :func:`as_agent` result (kind ``pipeline``), an object
    with an async ``run(input, ctx)`` that declares ``kind = "agent"`` (the runtime's
    ``Agent``), any other :class:`Node` (kind ``node``), and a plain function taking
    ``(input)`` or ``(input, ctx)``, sync or async (kind ``node``, unless it has a
    ``target_kind`` attribute).

    Raises:
        TypeError: When ``target`` is none of these.
    """
    if isinstance(target, ResolvedTarget):
        return target
    if isinstance(target, PromotedAgent):
        return ResolvedTarget(target.run, "pipeline", target.name, self_traced=True)
    if isinstance(target, Pipeline):
        pipeline = target

        async def run_pipeline(input: Any, ctx: RunContext) -> Any:
            return await pipeline.run(input, ctx)

        return ResolvedTarget(run_pipeline, "pipeline", pipeline.name)
    if hasattr(target, "run") and callable(target.run):
        kind: TargetKind = getattr(target, "kind", "node")
        name = getattr(target, "name", type(target).__name__)
        node = target

        async def run_node(input: Any, ctx: RunContext) -> Any:
            return await call_flexibly(node.run, input, ctx)

        return ResolvedTarget(
            run_node,
            kind,
            name,
            self_traced=bool(getattr(target, "self_traced", False)),
            conversational=getattr(target, "conversational", False) is True,
        )
    if callable(target):
        fn = target
        kind = getattr(fn, "target_kind", "node")
        name = getattr(fn, "__name__", "target")
        if _takes_session(fn):
            return ResolvedTarget(_session_caller(fn), kind, name, conversational=True)
        if inspect.iscoroutinefunction(fn):  # its signature read once, not on every call
            if _takes_ctx(fn):

                async def run_fn(input: Any, ctx: RunContext) -> Any:
                    return await fn(input, ctx)

            else:

                async def run_fn(input: Any, ctx: RunContext) -> Any:
                    return await fn(input)

        else:

            async def run_fn(input: Any, ctx: RunContext) -> Any:
                return await call_flexibly(fn, input, ctx)

        return ResolvedTarget(run_fn, kind, name)
    raise TypeError(
        f"cannot evaluate {target!r}: a target is a function, a Node (with run(input, ctx)), a Pipeline, or an agent"
    )


@functools.lru_cache(maxsize=1024)
def _accepts_ctx(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def _takes_ctx(fn: Callable[..., Any]) -> bool:
    try:
        return _accepts_ctx(fn)
    except TypeError:  # unhashable callable
        return _accepts_ctx.__wrapped__(fn)


def _takes_session(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` declares a parameter named ``session`` (a conversational target)."""
    try:
        return "session" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _session_caller(fn: Callable[..., Any]) -> TargetFn:
    """``fn(message, session=...)`` (or ``fn(message, ctx, session=...)``) as a ``(input, ctx)`` callable."""
    params = [p for name, p in inspect.signature(fn).parameters.items() if name != "session"]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    with_ctx = len(positional) >= 2

    async def run_turn(input: Any, ctx: RunContext) -> Any:
        args = (input, ctx) if with_ctx else (input,)
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, session=ctx.session)
        result = await run_blocking(functools.partial(fn, *args, session=ctx.session))
        if inspect.isawaitable(result):
            return await result
        return result

    return run_turn


async def call_flexibly(fn: Callable[..., Any], input: Any, ctx: RunContext) -> Any:
    """Call ``fn(input, ctx)`` or ``fn(input)`` by its signature; await it if it is async.

    A sync function runs in a worker thread so it cannot stall the event loop (and the
    per-case timeout still applies to it).
    """
    args = (input, ctx) if _takes_ctx(fn) else (input,)
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await run_blocking(fn, *args)
    if inspect.isawaitable(result):
        return await result
    return result


def preview(value: Any, limit: int = 200) -> str:
    """A short one-line text preview of a value, for span payloads and list views: strings as
    they are, other values as JSON (what the pages and ``evalsite trace`` show elsewhere, never a
    Python repr), objects JSON cannot hold by their repr."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=repr)
        except (TypeError, ValueError):  # e.g. a circular structure
            text = repr(value)
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
