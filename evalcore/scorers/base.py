"""The scorer contract, its serialisable spec, and the registry of built-in scorers.

A scorer is a small class (config in fields, one async ``score(ctx)``), identified by a spec
``{name, args}`` plus a version that is stored on the eval run, so a result always says which
scorer (and which version of it) produced it. Modelled on pydantic-evals' evaluators.
"""

from __future__ import annotations

import inspect
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from evalcore.errors import InvalidInputError
from evalcore.threads import run_blocking
from evalcore.types import Case, RunRecord, Score


@dataclass(slots=True)
class ScoreContext:
    """Everything a scorer may look at for one case.

    Attributes:
        case: The case (input, expected, metadata).
        output: The target's output (same as ``run.output``).
        run: The run record (elapsed ms, tokens, model, metadata such as tool calls).
        events: The run's trace events when available (trajectory scorers read them), else
            an empty list.
        services: Injected helpers (e.g. a judge model client, a tracer); scorers that need
            none ignore it.
    """

    case: Case
    output: Any
    run: RunRecord
    events: list[Any] = field(default_factory=list)
    services: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class ScorerSpec:
    """A scorer's serialisable identity: ``{name, args, version}``."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    version: str = "1"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "args": dict(self.args), "version": self.version}


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
    :mod:`evalcore.threads`), so eight 1 s sync checks at concurrency 8 take ~1 s, and a call
    abandoned at the scorer timeout never keeps the process alive. An awaitable result is
    awaited. Whatever ``fn`` raises propagates (a ``BaseException`` raised on the thread comes
    back as a ``RuntimeError`` naming it).
    """
    if inspect.iscoroutinefunction(fn):
        result = await fn(*args)
    else:
        result = await run_blocking(fn, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


SCORERS: dict[str, type[Scorer]] = {}


def register(cls: type[Scorer]) -> type[Scorer]:
    """Class decorator adding a scorer class to :data:`SCORERS` under its ``name``."""
    SCORERS[cls.name] = cls
    return cls


class ScorerSpecError(InvalidInputError):
    """A scorer spec that names no known scorer or gives it bad arguments."""

    field = "scorers"


def scorer_from_spec(spec: ScorerSpec | dict[str, Any] | str) -> Scorer:
    """Build a scorer from a spec object, a ``{name, args}`` dict or a CLI string.

    CLI strings: ``"exact_match"``, ``"numeric_match:tolerance=0.01"``,
    ``"citation_set:min_recall=0.5,min_precision=0.3"``, or a JSON object
    ``'{"name": "regex", "args": {"pattern": "^yes"}}'``. Values are parsed as JSON when
    they parse (numbers, booleans), else kept as strings.

    Raises:
        ScorerSpecError: Unknown scorer name, arguments it does not accept, or an argument
            holding NaN / infinity (a spec is stored as JSON, which has neither).
    """
    if isinstance(spec, str):
        spec = parse_scorer_spec(spec)
    if isinstance(spec, dict):
        spec = ScorerSpec(spec["name"], dict(spec.get("args") or {}), str(spec.get("version", "1")))
    for key, value in spec.args.items():
        if _has_non_finite(value):
            raise ScorerSpecError(f"scorer {spec.name!r}: {key}={value!r} is not a finite number")
    cls = SCORERS.get(spec.name)
    if cls is None:
        known = ", ".join(sorted(SCORERS))
        raise ScorerSpecError(f"unknown scorer {spec.name!r} (known: {known})")
    try:
        return cls(**spec.args)
    except ScorerSpecError:
        raise
    except (TypeError, ValueError) as exc:  # a scorer's own argument checks, named as a spec error
        raise ScorerSpecError(f"scorer {spec.name!r}: {exc}") from None


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_non_finite(v) for v in value)
    return False


def _refuse_constant(name: str) -> Any:
    # json.loads reads NaN / Infinity / -Infinity by default; no option may hold them
    raise ScorerSpecError(f"{name} is not a finite number")


def parse_scorer_spec(text: str) -> ScorerSpec:
    """Parse the CLI form of a scorer spec (see :func:`scorer_from_spec`).

    Raises:
        ScorerSpecError: Malformed text.
    """
    text = text.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text, parse_constant=_refuse_constant)
        except ScorerSpecError as exc:
            raise ScorerSpecError(f"scorer spec {text!r}: {exc}") from None
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
                args[key.strip()] = json.loads(raw, parse_constant=_refuse_constant)
            except ScorerSpecError as exc:
                raise ScorerSpecError(f"scorer spec {text!r}: {key.strip()}={raw.strip()}: {exc}") from None
            except json.JSONDecodeError:
                args[key.strip()] = raw.strip()
    if not name.strip():
        raise ScorerSpecError(f"scorer spec {text!r}: missing scorer name")
    return ScorerSpec(name.strip(), args)


def resolve_scorers(scorers: Sequence[Scorer | ScorerSpec | dict[str, Any] | str | Callable[..., Any]]) -> list[Scorer]:
    """Turn a mixed list (scorers, specs, CLI strings, plain predicate functions) into scorers."""
    from evalcore.scorers.builtin import Predicate

    resolved: list[Scorer] = []
    for item in scorers:
        if isinstance(item, Scorer):
            resolved.append(item)
        elif callable(item) and not isinstance(item, type):
            resolved.append(Predicate(fn=item))
        else:
            resolved.append(scorer_from_spec(item))  # type: ignore[arg-type]
    return resolved
