"""The rubric LLM judge: one scorer that asks a chat model to grade an answer on five axes.

Trust, point by point (each answers a fault seen in other eval tools):

* The verdict comes from configurable per-axis thresholds over the integer scores, never from the
  judge's own ``pass`` field (kept in metadata only): pass and score cannot contradict.
* Calls are made at temperature 0 with a fixed seed, so a judge reading does not drift between
  runs on endpoints that honour them; ``samples > 1`` votes per axis and flags disagreement.
* An unreadable answer is retried (a new call), then recorded as a judge *error* on the scores
  (``Score.failure``: no value, left out of aggregates, raw text kept): never a 0, never an abort.
* Each call has a timeout, so a judge can't leave a score pending forever.
* An empty output or input is not sent to the judge silently: by default (``on_empty="error"``) the
  scores record the judge error ``empty_output`` / ``empty_input`` without calling the model,
  because the axes (grounding, calibration) mean nothing on no text and a fabricated 0 would pass
  for a verdict. ``on_empty="judge"`` asks the model anyway and flags ``empty_output: true``.

The model is injected (``model=`` at construction, or the run's ``ScorerServices(judge=...)``); this module only
depends on the :class:`~evalcore.runtime.models.ChatModel` protocol.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from evalcore.judge.ask import ask_judge
from evalcore.judge.cache import JudgeCache, judge_cache_key, judge_endpoint
from evalcore.judge.outcome import JUDGE_SCORE, JudgeUsage, SampleOutcome, judge_failures, judge_scores
from evalcore.judge.parsing import AXES, JudgeParseError, JudgeVerdict, parse_judge_answer
from evalcore.judge.prompt import DEFAULT_PROMPT_VERSION, get_prompt, is_blank, response_formats, rubric_text
from evalcore.judge.verdict import Thresholds
from evalcore.runtime.models import ChatModel
from evalcore.scorers.base import ScoreContext, Scorer, ScorerSpec
from evalcore.serial import to_record
from evalcore.tracing import Tracer
from evalcore.types import Score

ON_EMPTY_CHOICES = ("error", "judge")


def _check_number(name: str, value: Any, *, allow_zero: bool) -> None:
    """Refuse a bool, a non-number, NaN, infinity or a negative (or zero) value, naming ``name``."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")


@dataclass
class RubricJudge(Scorer):
    """Grade an answer on accuracy, completeness, grounding, hazard avoidance and calibration.

    Emits one score per axis, ``rubric_judge.<axis>`` (value = score / 5 in 0..1, the judge's
    reason as explanation, ``passed`` = the axis meets its minimum), and the verdict
    ``rubric_judge`` (bool) = every axis meets its minimum. Judge errors give ``Score.failure``
    for all six names, with ``metadata["kind"]`` and (on the verdict) ``metadata["raw"]``.

    Attributes:
        judge_model: The judge model's name, recorded in the spec (defaults to ``model.name``).
        prompt_version: Which registered prompt template to use (see ``evalcore.judge.prompt``);
            ``rubric-v2`` (default) fences the question, reference and answer as data.
        rubric: Extra grading notes appended to the axis descriptions.
        samples: Judge samples per case (K >= 1); per-axis majority vote, ties to the lower score.
        retries: New calls after an unreadable answer or a model error (>= 0).
        temperature: Sampling temperature sent with every call (0 = greedy).
        seed: Seed of the first sample (sample ``i`` uses ``seed + i``), so endpoints that honour
            it repeat themselves run after run.
        use_schema: Ask for a strict JSON-schema ``response_format``; when the endpoint rejects
            it, fall back to JSON mode, then to no ``response_format`` (remembered per model).
        max_tokens: Completion token cap per call.
        timeout_s: Seconds one call may take before it counts as a failed attempt.
        retry_backoff_s: Base of the exponential backoff after a model error or a timeout, in
            seconds (parse failures are retried at once; the retry rule: :mod:`evalcore.judge.ask`).
        min_axis_score: Minimum passing score of every axis (0..5).
        min_accuracy: Minimum passing accuracy (the stricter of this and ``min_axis_score``).
        axis_minimums: Per-axis overrides of the minimums.
        on_empty: ``"error"`` (default): an empty output/input is a judge error, no call made;
            ``"judge"``: ask the model anyway and flag it in metadata.
        use_cache: Read and write the judge cache (``cache`` or the run's ``ScorerServices(judge_cache=...)``).
        model: The judge model object (not serialised; the spec stores its name).
        cache: A :class:`~evalcore.judge.cache.JudgeCache` (not serialised).

    Raises:
        ValueError: At construction, on an unknown prompt version, bad thresholds, ``samples < 1``,
            ``retries < 0``, an unknown ``on_empty``, or a ``temperature`` / ``retry_backoff_s`` that is
            not a finite number >= 0 or a ``timeout_s`` that is not ``None`` or finite > 0.
    """

    name: ClassVar[str] = JUDGE_SCORE
    version: ClassVar[str] = "1"
    judge_model: str | None = None
    prompt_version: str = DEFAULT_PROMPT_VERSION
    rubric: str | None = None
    samples: int = 1
    retries: int = 2
    temperature: float = 0.0
    seed: int | None = 0
    use_schema: bool = True
    max_tokens: int | None = 1024
    timeout_s: float | None = 120.0
    retry_backoff_s: float = 0.5
    min_axis_score: int = 3
    min_accuracy: int = 4
    axis_minimums: dict[str, int] | None = None
    on_empty: str = "error"
    use_cache: bool = True
    model: ChatModel | None = field(default=None, repr=False, compare=False)
    cache: JudgeCache | None = field(default=None, repr=False, compare=False)

    _NOT_IN_SPEC: ClassVar[frozenset[str]] = frozenset({"model", "cache"})

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"samples must be >= 1, got {self.samples}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if self.on_empty not in ON_EMPTY_CHOICES:
            raise ValueError(f"on_empty must be one of {ON_EMPTY_CHOICES}, got {self.on_empty!r}")
        _check_number("temperature", self.temperature, allow_zero=True)
        _check_number("retry_backoff_s", self.retry_backoff_s, allow_zero=True)
        if self.timeout_s is not None:
            _check_number("timeout_s", self.timeout_s, allow_zero=False)
        try:
            self._template = get_prompt(self.prompt_version)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        self._thresholds = Thresholds.build(
            min_axis_score=self.min_axis_score, min_accuracy=self.min_accuracy, axis_minimums=self.axis_minimums
        )
        self._rubric_text = rubric_text(AXES, self.rubric)
        # Index into the response_format ladder per model name, lowered when an endpoint rejects one.
        self._format_level: dict[str, int] = {}

    @property
    def thresholds(self) -> Thresholds:
        """The per-axis minimums in force."""
        return self._thresholds

    @property
    def score_names(self) -> list[str]:
        """``rubric_judge`` then ``rubric_judge.<axis>`` for each axis."""
        return [JUDGE_SCORE, *(f"{JUDGE_SCORE}.{axis}" for axis in AXES)]

    def spec(self) -> ScorerSpec:
        """The spec: options as args, with the judge model's *name* (never the object) and prompt version."""
        args: dict[str, Any] = {}
        for f in fields(self):
            if f.name in self._NOT_IN_SPEC:
                continue
            value = getattr(self, f.name)
            args[f.name] = dict(value) if isinstance(value, dict) else value
        if args["judge_model"] is None and self.model is not None:
            args["judge_model"] = self.model.name
        return ScorerSpec(self.name, args, self.version)

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """Judge one case. Never raises for anything the judge model does (see the module doc)."""
        model = self._resolve_model(ctx.judge)
        if model is None:
            return judge_failures("no_model", "no judge model: pass model= or ScorerServices(judge=...)", {})
        base: dict[str, Any] = {"judge_model": model.name, "prompt_version": self.prompt_version}
        empty_output, empty_input = is_blank(ctx.output), is_blank(ctx.case.input)
        if empty_output or empty_input:
            base.update(empty_output=empty_output, empty_input=empty_input)
            if self.on_empty == "error":
                kind = "empty_output" if empty_output else "empty_input"
                what = "output" if empty_output else "input"
                return judge_failures(kind, f"empty {what}: not sent to the judge", base)
        usage = JudgeUsage()
        tracer = ctx.tracer
        cache: JudgeCache | None = None
        if self.use_cache:
            # "is None", not "or": an empty cache has len() 0 and would read as false.
            cache = self.cache if self.cache is not None else ctx.judge_cache
        messages = self._template.render(
            input=ctx.case.input, output=ctx.output, expected=ctx.case.expected, rubric=self._rubric_text
        )
        outcomes = []
        started = time.perf_counter()
        for index in range(self.samples):
            key = self._cache_key(model, messages, ctx, index) if cache is not None else None
            outcomes.append(await self._sample(model, messages, index, key, cache, tracer, usage))
        usage.ms = (time.perf_counter() - started) * 1000
        return judge_scores(outcomes, base, usage, self._thresholds, self.samples)

    def _resolve_model(self, judge: ChatModel | Mapping[str, ChatModel] | None) -> ChatModel | None:
        if self.model is not None:
            return self.model
        if isinstance(judge, Mapping):
            judge = judge.get(self.judge_model) if self.judge_model else None
        return judge if isinstance(judge, ChatModel) else None

    def _cache_key(self, model: ChatModel, messages: list[dict[str, Any]], ctx: ScoreContext, index: int) -> str:
        return judge_cache_key(
            judge_model=model.name,
            endpoint=judge_endpoint(model),
            prompt_version=self.prompt_version,
            messages=messages,
            input=ctx.case.input,
            output=ctx.output,
            expected=ctx.case.expected,
            rubric=self._rubric_text,
            sample_index=index,
            temperature=self.temperature,
            seed=self._sample_seed(index),
            max_tokens=self.max_tokens,
            use_schema=self.use_schema,
        )

    async def _sample(
        self,
        model: ChatModel,
        messages: list[dict[str, Any]],
        index: int,
        key: str | None,
        cache: JudgeCache | None,
        tracer: Tracer | None,
        usage: JudgeUsage,
    ) -> SampleOutcome:
        """One sample: the cache, else asked until an answer parses (:func:`~evalcore.judge.ask.ask_judge`)."""
        if cache is not None and key is not None:
            stored = cache.get(key)
            if stored is not None:
                try:
                    cached = JudgeVerdict.from_record(stored)
                except JudgeParseError:
                    pass  # a corrupt entry is asked again, not trusted
                else:
                    usage.cache_hits += 1
                    return SampleOutcome(index, cached, cached=True)
        asked = await ask_judge(
            model,
            messages,
            parse_judge_answer,
            formats=response_formats(AXES) if self.use_schema else [None],
            format_level=self._format_level if self.use_schema else {},
            retries=self.retries,
            timeout_s=self.timeout_s,
            retry_backoff_s=self.retry_backoff_s,
            temperature=self.temperature,
            seed=self._sample_seed(index),
            max_tokens=self.max_tokens,
            tracer=tracer,
            prompt_version=self.prompt_version,
            span_attributes={"sample": index},
        )
        usage.calls += asked.calls
        usage.tokens_in += asked.tokens_in
        usage.tokens_out += asked.tokens_out
        if asked.value is not None and cache is not None and key is not None:
            cache.set(key, to_record(asked.value))
        return SampleOutcome(
            index, asked.value, kind=asked.kind, detail=asked.detail, raw=asked.raw, attempts=asked.attempts
        )

    def _sample_seed(self, index: int) -> int | None:
        """Sample ``index``'s seed: ``seed + index``, so K samples are K draws, not one answer K
        times (an endpoint honouring seed and temperature 0 would otherwise repeat itself and the
        instability flag could never fire); sample 0 keeps ``seed``."""
        return None if self.seed is None else self.seed + index
