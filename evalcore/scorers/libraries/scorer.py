"""Ragas, DeepEval and autoevals metrics as Evalsite scorers, with Evalsite's verdict semantics.

``{"name": "ragas", "args": {"metric": "faithfulness", "threshold": 0.7, "fields": {...}}}``
runs Ragas' ``Faithfulness`` on each case; ``deepeval`` and ``autoevals`` work the same way. The
library runs in a worker process (:mod:`evalcore.scorers.libraries.process`) and calls the run's
judge endpoint itself: its OpenAI client (Ragas' ``llm_factory``, DeepEval's ``LocalModel``,
autoevals' ``client=``) gets the judge's base URL, model name and key, so no other key is needed.

What Evalsite adds to the library's number:

* A library exception, an answer the library could not read (DeepEval raises on invalid JSON,
  Ragas' instructor after its retries, autoevals on a missing tool call), a timeout, a dead
  worker, NaN or a value outside 0..1 is a scorer *error* with its text: never a 0.
* ``threshold`` makes the verdict (``value >= threshold``); without it the score is a
  measurement only (no verdict: a case judged by nothing else stays unscored).
* ``samples`` > 1 asks K times (sample ``i`` with seed ``seed + i`` where the library sends a
  seed); the value is the median of the samples that answered, the verdict the majority of their
  verdicts (a tie fails), and ``unstable`` is set when their verdicts disagree (without a
  threshold: when their values differ).
* The judge cache (the run's ``judge_cache``) keeps each sample's answer (value and reason) under
  a key of the library and its version, the metric, its options, the texts sent, the judge
  model and endpoint, temperature, seed and sample index: a second run of the same output makes no
  call. Thresholds are applied after the cache.
* The library's reason is the score's explanation (shown on the case page).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from evalcore.jsonvalue import MISSING, to_json
from evalcore.redact import strip_userinfo
from evalcore.scorers.base import ScoreContext, Scorer
from evalcore.scorers.libraries.process import WorkerError, library_python, worker_for
from evalcore.types import Score

FIELDS = ("question", "answer", "reference", "contexts")
"""What a library metric reads from a case, each from a path (see :class:`LibraryMetric`)."""

DEFAULT_FIELDS: dict[str, str | None] = {"question": "input", "answer": "output", "reference": "expected"}
"""Where each field is read from when the spec does not say (``contexts``: nowhere)."""

CACHE_KEY_VERSION = 1
"""Bumped when the cache key's payload changes shape."""

_PATH_STEP = re.compile(r"([A-Za-z_][\w-]*)(\[\*\]|\[\d+\])?")


@dataclass(frozen=True, slots=True)
class JudgeEndpoint:
    """Where a library sends its judge calls: an OpenAI-compatible endpoint.

    Attributes:
        base_url: The endpoint root (``http://127.0.0.1:8080/v1``).
        model: The model name sent.
        api_key_env: The variable holding the key, read at each call (never stored).
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"

    @classmethod
    def of(cls, judge: Any) -> JudgeEndpoint:
        """The endpoint of a judge model object (an :class:`~evalcore.runtime.openai_client.OpenAIChatModel`).

        Raises:
            ValueError: The model speaks no OpenAI-compatible HTTP endpoint (a scripted or local
                model): a library calls the endpoint itself, so it needs one.
        """
        base = getattr(judge, "endpoint", None) if hasattr(judge, "api_key_env") else None
        if not isinstance(base, str) or not base.startswith(("http://", "https://")):
            raise ValueError(
                f"the judge {getattr(judge, 'name', judge)!r} is no OpenAI-compatible endpoint; a metric library "
                "calls its judge over HTTP: configure one (--judge-model NAME --judge-base-url URL)"
            )
        return cls(base, str(judge.name), str(getattr(judge, "api_key_env", "OPENAI_API_KEY")))

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> JudgeEndpoint | None:
        """The judge the environment configures (``EVALSITE_JUDGE_MODEL`` / ``_BASE_URL`` /
        ``_API_KEY_ENV``, falling back to ``EVALSITE_MODEL*`` as ``--judge`` does), or ``None``."""
        model = (env.get("EVALSITE_JUDGE_MODEL") or env.get("EVALSITE_MODEL") or "").strip()
        base = (env.get("EVALSITE_JUDGE_BASE_URL") or env.get("EVALSITE_MODEL_BASE_URL") or "").strip()
        key_env = (env.get("EVALSITE_JUDGE_API_KEY_ENV") or env.get("EVALSITE_MODEL_API_KEY_ENV") or "").strip()
        if not model or model.startswith(("scripted:", "local:")):
            return None
        return cls(base or "https://api.openai.com/v1", model, key_env or "OPENAI_API_KEY")

    def api_key(self) -> str:
        """The key from :attr:`api_key_env` (a placeholder for a local endpoint without one)."""
        return os.environ.get(self.api_key_env, "").strip() or "no-key"


def read_path(root: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` in ``root`` (``"input.question"``, ``"input.paragraphs[*].text"``).

    A path is dot-separated keys; ``[n]`` picks item ``n`` of a list and ``[*]`` maps the rest of
    the path over every item.

    Raises:
        KeyError: A key or index is missing (the message names the step).
    """
    steps = path.split(".")

    def walk(value: Any, index: int) -> Any:
        if index == len(steps):
            return value
        match = _PATH_STEP.fullmatch(steps[index])
        if match is None:
            raise KeyError(f"bad step {steps[index]!r} in path {path!r}")
        key, sub = match.groups()
        if not isinstance(value, Mapping) or key not in value:
            raise KeyError(f"path {path!r}: no {key!r} at {'.'.join(steps[:index]) or 'the top'}")
        value = value[key]
        if sub == "[*]":
            if not isinstance(value, list):
                raise KeyError(f"path {path!r}: {key!r} is not a list")
            return [walk(item, index + 1) for item in value]
        if sub:
            position = int(sub[1:-1])
            if not isinstance(value, list) or position >= len(value):
                raise KeyError(f"path {path!r}: {key!r} has no item {position}")
            value = value[position]
        return walk(value, index + 1)

    return walk(root, 0)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(to_json(value), ensure_ascii=False, sort_keys=True)


@dataclass
class LibraryMetric(Scorer):
    """A metric of a third-party library as a scorer (the module doc says what Evalsite adds).

    Emits one score, ``<library>.<metric>`` (e.g. ``ragas.faithfulness``): the library's value in
    0..1, ``passed`` from ``threshold``, the library's reason as explanation; metadata: the
    library and its version, the judge model, ``unstable``, the judge's calls, tokens, time and
    cache hits (``judge_calls``, ``judge_tokens_in`` / ``_out``, ``judge_ms``,
    ``judge_cache_hits``: what the ledger and the cost columns read), each sample when K > 1, and
    any network connection the worker refused (``blocked_connections``).

    Attributes:
        metric: The library's metric, by class name in any case, with or without ``_``
            (``faithfulness``; DeepEval also without its ``Metric`` suffix: ``answer_relevancy``,
            ``g_eval``; autoevals: ``Factuality``, ``ClosedQA``).
        threshold: The minimum passing value (0..1), or ``None`` for no verdict.
        fields: Where each text comes from: ``question``, ``answer``, ``reference`` and
            ``contexts`` (a list of texts) -> a path from ``input``, ``output``, ``expected`` or
            ``metadata`` (the case's), e.g. ``{"answer": "output.answer", "contexts":
            "input.paragraphs[*].text"}``; the rest default to :data:`DEFAULT_FIELDS`.
            A path missing on a case is that case's scorer error. Values that are not text are
            sent as JSON.
        options: Keyword arguments of the library's metric (DeepEval ``GEval``'s ``criteria``
            and ``evaluation_params``; autoevals ``ClosedQA``'s ``criteria``).
        samples: Judge samples per case (K >= 1).
        judge_model: Which judge to use when the run has several, by name.
        temperature: Sent to the judge.
        seed: Sent to the judge where the library lets it (Ragas, DeepEval); sample ``i`` uses
            ``seed + i``.
        timeout_s: Seconds one sample may take (a library makes several judge calls).
        use_cache: Read and write the run's judge cache.

    Raises:
        ValueError: At construction, on an empty metric, a threshold outside 0..1, ``samples``
            < 1, an unknown field name, a path that is not a string, or options that are not an
            object.
    """

    library: ClassVar[str] = ""
    metric: str = ""
    threshold: float | None = None
    fields: dict[str, str] | None = None
    options: dict[str, Any] | None = None
    samples: int = 1
    judge_model: str | None = None
    temperature: float = 0.0
    seed: int | None = 0
    timeout_s: float | None = 300.0
    use_cache: bool = True
    _paths: dict[str, str | None] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or not self.metric.strip():
            raise ValueError(f"{self.library}: 'metric' must name one of the library's metrics, got {self.metric!r}")
        if self.threshold is not None:
            ok = isinstance(self.threshold, int | float) and not isinstance(self.threshold, bool)
            if not ok or not 0.0 <= float(self.threshold) <= 1.0:
                raise ValueError(f"threshold must be a number in 0..1, got {self.threshold!r}")
        if not isinstance(self.samples, int) or isinstance(self.samples, bool) or self.samples < 1:
            raise ValueError(f"samples must be an integer >= 1, got {self.samples!r}")
        if self.options is not None and not isinstance(self.options, dict):
            raise ValueError(f"options must be an object of the metric's arguments, got {self.options!r}")
        given = self.fields or {}
        if not isinstance(given, dict):
            raise ValueError(f"fields must be an object of {', '.join(FIELDS)} -> path, got {given!r}")
        unknown = sorted(set(given) - set(FIELDS))
        if unknown:
            raise ValueError(f"fields: unknown {', '.join(unknown)} (known: {', '.join(FIELDS)})")
        for name, path in given.items():
            if path is not None and not isinstance(path, str):
                raise ValueError(f"fields.{name} must be a path such as 'input.question', got {path!r}")
        self._paths = {**DEFAULT_FIELDS, **given}

    @property
    def score_name(self) -> str:
        """``<library>.<metric>``."""
        return f"{self.library}.{self.metric}"

    @property
    def score_names(self) -> list[str]:
        """The one score this scorer gives."""
        return [self.score_name]

    def spec(self) -> Any:
        """The spec: every option, without the private path table."""
        spec = super().spec()
        spec.args.pop("_paths", None)
        return spec

    def _texts(self, ctx: ScoreContext) -> dict[str, Any]:
        """The texts sent to the library, read from the case by :attr:`fields`.

        Raises:
            KeyError: A path is missing on this case.
        """
        metadata = ctx.case.metadata if isinstance(ctx.case.metadata, dict) else {}
        root: dict[str, Any] = {"input": ctx.case.input, "output": ctx.output, "metadata": metadata}
        if ctx.case.expected is not MISSING:
            root["expected"] = ctx.case.expected
        texts: dict[str, Any] = {}
        for name in FIELDS:
            path = self._paths.get(name)
            if path is None:
                continue
            if name == "reference" and path == "expected" and "expected" not in root:
                continue  # no expected value: the library gets no reference (it says if it needs one)
            value = read_path(root, path)
            if name == "contexts":
                items = value if isinstance(value, list) else [value]
                texts[name] = [_as_text(item) for item in items]
            else:
                texts[name] = _as_text(value)
        return texts

    def _endpoint(self, ctx: ScoreContext) -> JudgeEndpoint:
        judge = ctx.judge
        if isinstance(judge, Mapping):
            judge = judge.get(self.judge_model) if self.judge_model else next(iter(judge.values()), None)
        if judge is not None:
            return JudgeEndpoint.of(judge)
        found = JudgeEndpoint.from_env(os.environ)
        if found is None:
            raise ValueError(
                "no judge endpoint: a metric library needs one (--judge-model NAME --judge-base-url URL, or "
                "EVALSITE_JUDGE_MODEL and EVALSITE_JUDGE_BASE_URL)"
            )
        return found

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """Score one case through the library (never raises for anything the library or judge does)."""
        name = self.score_name
        try:
            texts = self._texts(ctx)
        except KeyError as exc:
            return [Score.failure(name, f"fields: {exc.args[0]}", kind="bad_field", library=self.library)]
        try:
            endpoint = self._endpoint(ctx)
        except ValueError as exc:
            return [Score.failure(name, str(exc), kind="no_judge", library=self.library)]
        worker = worker_for(library_python(self.library))
        try:
            versions = await worker.ready()
        except WorkerError as exc:
            return [Score.failure(name, str(exc), kind="worker_error", library=self.library)]
        version = versions.get(self.library)
        if version is None:
            return [
                Score.failure(
                    name,
                    f"{self.library} is not installed in {worker.python}: pip install 'evalsite[{self.library}]', or "
                    f"name a Python that has it in EVALSITE_{self.library.upper()}_PYTHON",
                    kind="not_installed",
                    library=self.library,
                )
            ]
        cache = ctx.judge_cache if self.use_cache else None
        outcomes = [
            await self._sample(worker, endpoint, texts, version, index, cache, ctx.tracer)
            for index in range(self.samples)
        ]
        return [self._combine(outcomes, endpoint, version)]

    async def _sample(
        self,
        worker: Any,
        endpoint: JudgeEndpoint,
        texts: dict[str, Any],
        version: str,
        index: int,
        cache: Any,
        tracer: Any = None,
    ) -> dict[str, Any]:
        """One sample's outcome: ``{"value", "reason", "cached"}`` or ``{"error", "kind"}``."""
        seed = None if self.seed is None else self.seed + index
        key = self._cache_key(endpoint, texts, version, index, seed) if cache is not None else None
        if cache is not None and key is not None:
            stored = cache.get(key)
            value = stored.get("value") if isinstance(stored, dict) else None
            if isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0:
                return {"value": float(value), "reason": stored.get("reason"), "cached": True}
        request = {
            "library": self.library,
            "metric": self.metric,
            "options": dict(self.options or {}),
            "fields": texts,
            "judge": {
                "base_url": endpoint.base_url,
                "model": endpoint.model,
                "api_key": endpoint.api_key(),
                "temperature": self.temperature,
                "seed": seed,
                "timeout_s": self.timeout_s,
            },
        }
        started = time.monotonic()
        try:
            answer = await self._ask(worker, request, tracer, endpoint, index)
        except TimeoutError:
            return {"error": f"no answer within {self.timeout_s:g} s", "kind": "timeout"}
        except WorkerError as exc:
            return {"error": str(exc), "kind": "worker_error"}
        spent: dict[str, Any] = answer["usage"] if isinstance(answer.get("usage"), dict) else {}
        out: dict[str, Any] = {
            "blocked": [f"{host}:{port}" for host, port in answer.get("blocked") or []],
            "ms": round((time.monotonic() - started) * 1000, 1),
            **{k: int(spent.get(k) or 0) for k in ("calls", "tokens_in", "tokens_out")},
        }
        if not answer.get("ok"):
            return {"error": str(answer.get("error")), "kind": str(answer.get("kind")), **out}
        value = answer.get("value")
        if value is None or not isinstance(value, int | float) or not math.isfinite(value):
            got = answer.get("non_finite") or repr(value)
            return {"error": f"the metric gave no number ({got})", "kind": "no_value", **out}
        if not 0.0 <= value <= 1.0:
            return {"error": f"the metric gave {value!r}, outside 0..1", "kind": "out_of_range", **out}
        reason = answer.get("reason") if isinstance(answer.get("reason"), str) else None
        if cache is not None and key is not None:
            cache.set(key, {"value": float(value), "reason": reason})
        return {"value": float(value), "reason": reason, "cached": False, **out}

    async def _ask(
        self, worker: Any, request: dict[str, Any], tracer: Any, endpoint: JudgeEndpoint, index: int
    ) -> dict[str, Any]:
        """The worker's answer; with a tracer, inside a ``chat`` span with ``role: "judge"`` (kept
        out of the target's metrics) carrying the calls and tokens the library spent."""
        if tracer is None:
            answer: dict[str, Any] = await worker.ask(request, timeout_s=self.timeout_s)
            return answer
        with tracer.span(
            "chat",
            f"judge:{endpoint.model}",
            role="judge",
            model=endpoint.model,
            scorer=self.score_name,
            library=self.library,
            sample=index,
        ) as span:
            answer = await worker.ask(request, timeout_s=self.timeout_s)
            spent: dict[str, Any] = answer["usage"] if isinstance(answer.get("usage"), dict) else {}
            span.set(
                calls=int(spent.get("calls") or 0),
                tokens_in=int(spent.get("tokens_in") or 0),
                tokens_out=int(spent.get("tokens_out") or 0),
                ok=bool(answer.get("ok")),
            )
            if not answer.get("ok"):
                tracer.error(f"judge:{endpoint.model}", kind=answer.get("kind"), detail=answer.get("error"))
            return answer

    def _cache_key(
        self, endpoint: JudgeEndpoint, texts: dict[str, Any], version: str, index: int, seed: int | None
    ) -> str:
        """sha256 of everything that shapes the library's answer (thresholds are not in it)."""
        payload = {
            "kind": "library_metric",
            "key_version": CACHE_KEY_VERSION,
            "library": self.library,
            "library_version": version,
            "metric": self.metric,
            "options": to_json(self.options or {}),
            "texts": texts,
            "judge_model": endpoint.model,
            "endpoint": strip_userinfo(endpoint.base_url).rstrip("/"),
            "temperature": self.temperature,
            "seed": seed,
            "sample_index": index,
        }
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def _combine(self, outcomes: list[dict[str, Any]], endpoint: JudgeEndpoint, version: str) -> Score:
        """The median, the majority verdict and the instability flag (see the module doc)."""
        good = [o for o in outcomes if "value" in o]
        meta: dict[str, Any] = {
            "library": self.library,
            "library_version": version,
            "metric": self.metric,
            "threshold": self.threshold,
            "judge_model": endpoint.model,
            "samples_used": len(good),
            "samples_failed": len(outcomes) - len(good),
            "judge_cache_hits": sum(1 for o in good if o.get("cached")),
            # what the ledger and the cost columns read, as the rubric judge writes them
            "judge_calls": sum(int(o.get("calls") or 0) for o in outcomes),
            "judge_tokens_in": sum(int(o.get("tokens_in") or 0) for o in outcomes),
            "judge_tokens_out": sum(int(o.get("tokens_out") or 0) for o in outcomes),
            "judge_ms": round(sum(float(o.get("ms") or 0.0) for o in outcomes), 1),
        }
        blocked = sorted({b for o in outcomes for b in o.get("blocked") or []})
        if blocked:
            meta["blocked_connections"] = blocked
        if self.samples > 1:
            meta["samples"] = [
                {"index": i, **{k: v for k, v in o.items() if k not in ("blocked", "ms")}}
                for i, o in enumerate(outcomes)
            ]
        if not good:
            last = outcomes[-1]
            meta["kind"] = last["kind"]
            return Score.failure(
                self.score_name, f"{self.library} {self.metric}: {last['kind']}: {last['error']}", **to_json(meta)
            )
        values = [o["value"] for o in good]
        value = float(statistics.median(values))
        passed: bool | None = None
        chosen = good[0]
        if self.threshold is not None:
            verdicts = [v >= self.threshold for v in values]
            passed = verdicts.count(True) > verdicts.count(False)
            meta["unstable"] = len(set(verdicts)) > 1
            chosen = next(o for o in good if (o["value"] >= self.threshold) == passed)
        else:
            meta["unstable"] = max(values) - min(values) > 0
            chosen = min(good, key=lambda o: abs(o["value"] - value))
        reason = chosen.get("reason") or f"{self.library} {self.metric} = {value:.3g}"
        return Score(self.score_name, value, passed=passed, explanation=reason, metadata=to_json(meta))


@dataclass
class RagasMetric(LibraryMetric):
    """A Ragas metric (``ragas.metrics.collections``: ``faithfulness``, ``answer_accuracy``,
    ``context_recall``...) as a scorer; the fields map to ``user_input``, ``response``,
    ``reference`` and ``retrieved_contexts``. ``pip install 'evalsite[ragas]'``."""

    name: ClassVar[str] = "ragas"
    library: ClassVar[str] = "ragas"
    version: ClassVar[str] = "1"


@dataclass
class DeepEvalMetric(LibraryMetric):
    """A DeepEval metric (``deepeval.metrics``: ``answer_relevancy``, ``g_eval``, ``faithfulness``...)
    as a scorer; the fields map to ``input``, ``actual_output``, ``expected_output`` and
    ``retrieval_context`` / ``context``. ``pip install 'evalsite[deepeval]'``."""

    name: ClassVar[str] = "deepeval"
    library: ClassVar[str] = "deepeval"
    version: ClassVar[str] = "1"


@dataclass
class AutoevalsMetric(LibraryMetric):
    """An autoevals LLM classifier (``Factuality``, ``ClosedQA``, ``Summary``...) as a scorer; the
    fields map to ``input``, ``output`` and ``expected``. ``pip install 'evalsite[autoevals]'``."""

    name: ClassVar[str] = "autoevals"
    library: ClassVar[str] = "autoevals"
    version: ClassVar[str] = "1"
