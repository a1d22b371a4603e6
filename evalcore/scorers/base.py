"""The scorer contract, its serialisable spec, and the registry of built-in scorers.

A scorer is a small class (config in fields, one async ``score(ctx)``), identified by a spec
``{name, args}`` plus a version that is stored on the eval run, so a result always says which
scorer (and which version of it) produced it. Modelled on pydantic-evals' evaluators.
"""

from __future__ import annotations

import inspect
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from evalcore._util.threads import run_blocking
from evalcore.errors import InvalidInputError
from evalcore.strictjson import NonFiniteNumber, refuse_non_finite
from evalcore.types import Case, RunRecord, Score

if TYPE_CHECKING:  # annotations only: the judge and tracer modules import this one
    from evalcore.judge.cache import JudgeCache
    from evalcore.runtime.models import ChatModel
    from evalcore.tracing import Tracer


@dataclass(slots=True, frozen=True)
class ScorerServices:
    """Helpers a run injects into every scorer (scorers that need none ignore them).

    Attributes:
        judge: The judge model, or judge models by name (a :class:`RubricJudge` with
            ``judge_model`` picks its own); ``None`` when the run has no judge.
        judge_cache: Where judge answers are cached, or ``None`` for no cache.
    """

    judge: ChatModel | Mapping[str, ChatModel] | None = None
    judge_cache: JudgeCache | None = None


@dataclass(slots=True)
class ScoreContext:
    """Everything a scorer may look at for one case.

    Attributes:
        case: The case (input, expected, metadata).
        output: The target's output (same as ``run.output``).
        run: The run record (elapsed ms, tokens, model, metadata such as tool calls).
        events: The run's trace events when available (trajectory scorers read them), else
            an empty list.
        judge: The run's judge model(s) (see :class:`ScorerServices`), or ``None``.
        judge_cache: The run's judge cache, or ``None``.
        tracer: The case's tracer, so a scorer's own calls (the judge's) appear in its trace;
            ``None`` outside a run.
    """

    case: Case
    output: Any
    run: RunRecord
    events: list[Any] = field(default_factory=list)
    judge: ChatModel | Mapping[str, ChatModel] | None = None
    judge_cache: JudgeCache | None = None
    tracer: Tracer | None = None


@dataclass(slots=True, frozen=True)
class ScorerSpec:
    """A scorer's serialisable identity: ``{name, args, version}`` (its record: :mod:`evalcore.serial`)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    version: str = "1"


class Scorer(ABC):
    """Base class of every scorer.

    Subclasses are dataclasses whose fields are their options; they set ``name`` and
    ``version`` class variables and implement :meth:`score`. The registry maps ``name`` to
    the class so a stored spec can be turned back into a scorer.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "1"

    @abstractmethod
    async def score(self, ctx: ScoreContext) -> Score | list[Score]:
        """Score one case. May raise: the runner records the error on the score.

        May also be a plain ``def`` (blocking work: subprocesses, ``exec`` of code): the runner
        then calls it on a daemon thread. Either way each call is bounded by the run's scorer
        timeout. An async ``score`` must not block; call blocking helpers through
        :func:`call_user_function`.
        """

    @classmethod
    def stored_args(cls, args: dict[str, Any], version: str) -> dict[str, Any]:
        """The arguments that rebuild this scorer from a spec stored at ``version`` so that it
        scores as it did then: an option added in a later version gets the value that gives the
        old behaviour, not its new default. The base class returns ``args`` as they are.

        Args:
            args: The stored spec's arguments.
            version: The stored spec's version (``"1"`` when it recorded none).

        Returns:
            The arguments to build the scorer with.
        """
        return args

    def spec(self) -> ScorerSpec:
        """The serialisable spec (dataclass fields as args; callables by qualified name)."""
        args: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if callable(value):
                value = f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"
            args[f.name] = value
        return ScorerSpec(self.name, args, self.version)

    @property
    def score_names(self) -> list[str]:
        """Names of the scores this scorer emits (defaults to its own name)."""
        return [self.name]


async def call_user_function(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a user function from a scorer without blocking the event loop.

    Coroutine functions are awaited; plain functions run on a daemon thread (see
    :mod:`evalcore._util.threads`), so eight 1 s sync checks at concurrency 8 take ~1 s, and a call
    abandoned at the scorer timeout never keeps the process alive. An awaitable result is
    awaited. Whatever ``fn`` raises propagates (a ``BaseException`` raised on the thread comes
    back as a ``RuntimeError`` naming it).
    """
    # pragma below: called on the thread, a coroutine function only returns its coroutine, awaited below
    if inspect.iscoroutinefunction(fn):  # pragma: no mutate
        result = await fn(*args)
    else:
        result = await run_blocking(fn, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


SCORERS: dict[str, type[Scorer]] = {}
"""Scorer classes registered by user code (:func:`register`); the built-ins are listed in
:data:`evalcore.scorer_registry.BUILTIN_SCORERS` and need no registration."""


def register(cls: type[Scorer]) -> type[Scorer]:
    """Class decorator making a user scorer class known to specs under its ``name``.

    A name already used by a built-in scorer replaces it (for specs built after the call).
    """
    SCORERS[cls.name] = cls
    return cls


class ScorerSpecError(InvalidInputError):
    """A scorer spec that names no known scorer or gives it bad arguments."""

    field = "scorers"


def parse_scorer_spec(text: str) -> ScorerSpec:
    """Parse the CLI form of a scorer spec (see :func:`scorer_from_spec`).

    Raises:
        ScorerSpecError: Malformed text.
    """
    text = text.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text, parse_constant=refuse_non_finite)
        except NonFiniteNumber as exc:  # no option may hold NaN / Infinity
            raise ScorerSpecError(f"scorer spec {text!r}: {exc} is not a finite number") from None
        except json.JSONDecodeError as exc:
            raise ScorerSpecError(f"scorer spec {text!r}: invalid JSON ({exc.msg})") from None
        if not isinstance(data, dict) or "name" not in data:
            raise ScorerSpecError(f"scorer spec {text!r}: a JSON spec needs a 'name'")
        return ScorerSpec(data["name"], dict(data.get("args") or {}))
    name, _, rest = text.partition(":")
    args: dict[str, Any] = {}
    if rest.strip():
        for item in rest.split(","):
            key, sep, raw = item.partition("=")
            if not sep or not key.strip():
                raise ScorerSpecError(f"scorer spec {text!r}: expected key=value, got {item!r}")
            try:
                args[key.strip()] = json.loads(raw, parse_constant=refuse_non_finite)
            except NonFiniteNumber as exc:
                raise ScorerSpecError(
                    f"scorer spec {text!r}: {key.strip()}={raw.strip()}: {exc} is not a finite number"
                ) from None
            except json.JSONDecodeError:
                args[key.strip()] = raw.strip()
    if not name.strip():
        raise ScorerSpecError(f"scorer spec {text!r}: missing scorer name")
    return ScorerSpec(name.strip(), args)
