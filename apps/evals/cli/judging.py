"""CLI wiring of the LLM judge: ``--judge`` options -> the rubric scorer, its model and cache.

The judge model is any chat model the runtime can build from settings/environment
(``EVALSITE_JUDGE_MODEL`` / ``EVALSITE_JUDGE_BASE_URL``, falling back to ``EVALSITE_MODEL`` /
``EVALSITE_MODEL_BASE_URL``; ``--judge-model`` / ``--judge-base-url`` override). The API key is
read from the environment at call time and never reaches the database: the stored scorer spec
names the judge model and prompt version only.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.management.base import CommandParser
from rich.markup import escape

from apps.evals.cli.console import UsageError
from apps.evals.cli.error_reasons import one_line, top_reasons, where_to_see
from apps.evals.models import EvalRun
from apps.evals.runs.config import JudgeConfig
from evalcore.judge import RubricJudge, SqliteJudgeCache
from evalcore.judge.agreement import agreement, read_label
from evalcore.redact import register_secret, strip_userinfo, url_secrets
from evalcore.runtime.models import ModelError
from evalcore.scorers.base import ScorerServices
from evalcore.typed_numbers import ascii_integer
from evalcore.types import CaseResult


@dataclass(slots=True)
class JudgeSetup:
    """What ``--judge`` adds to a run: scorers, injected services and the judge to record in the
    run's config (``None``: no judge)."""

    scorers: list[Any] = field(default_factory=list)
    services: ScorerServices = field(default_factory=ScorerServices)
    judge: JudgeConfig | None = None
    label: str = "is_correct"


def add_judge_arguments(parser: CommandParser) -> None:
    group = parser.add_argument_group("LLM judge")
    group.add_argument("--judge", action="store_true", help="also grade answers with the rubric LLM judge")
    group.add_argument("--judge-model", help="judge model name (default: $EVALSITE_JUDGE_MODEL or $EVALSITE_MODEL)")
    group.add_argument("--judge-base-url", help="OpenAI-compatible endpoint of the judge")
    group.add_argument("--judge-samples", type=ascii_integer, default=1, help="ask K times per case; majority per axis")
    group.add_argument("--judge-retries", type=ascii_integer, default=2, help="retries of an unparseable judge answer")
    group.add_argument("--no-judge-cache", action="store_true", help="do not read or write the judge cache")
    group.add_argument("--judge-no-schema", action="store_true", help="do not ask for JSON-schema output")
    group.add_argument(
        "--judge-label",
        default="is_correct",
        help="case metadata path of a human pass/fail label, for judge agreement; {variant} is replaced by the "
        "run's variant (e.g. labels.{variant} for the GSM8K replay set); 'reviews' (rescore only): the "
        "source run's human reviews (majority of pass/fail verdicts)",
    )


def judge_setup(opts: dict[str, Any], *, reviews_label_ok: bool = False) -> JudgeSetup:
    """Build the judge scorer and its services from the CLI options.

    Raises:
        UsageError: No judge model configured, or bad option values; ``--judge-label reviews``
            unless ``reviews_label_ok`` (a rescore: people's reviews label a stored run's outputs).
    """
    if opts.get("judge_label") == REVIEWS_LABEL and not opts.get("judge"):
        raise UsageError("--judge-label reviews measures the judge against people's reviews: add --judge")
    if opts.get("judge_label") == REVIEWS_LABEL and not reviews_label_ok:
        raise UsageError(
            "--judge-label reviews: people's reviews label a stored run's outputs; grade that run with "
            "the judge instead: evalsite rescore RUN_ID --judge --judge-label reviews"
        )
    if not opts.get("judge"):
        return JudgeSetup()
    # lazy: it imports the openai SDK (~0.5 s), needed only when a judge is asked for
    from evalcore.runtime.openai_client import model_from_settings

    if opts["judge_samples"] < 1 or opts["judge_retries"] < 0:
        raise UsageError("--judge-samples must be >= 1 and --judge-retries >= 0")
    env = dict(os.environ)
    name = opts.get("judge_model") or env.get("EVALSITE_JUDGE_MODEL") or env.get("EVALSITE_MODEL")
    base_url = opts.get("judge_base_url") or env.get("EVALSITE_JUDGE_BASE_URL") or env.get("EVALSITE_MODEL_BASE_URL")
    if not name:
        raise UsageError(
            "--judge needs a judge model: --judge-model NAME (with --judge-base-url URL for a local endpoint), "
            "or set EVALSITE_JUDGE_MODEL / EVALSITE_MODEL"
        )
    env["EVALSITE_MODEL"] = name
    for secret in url_secrets(base_url or ""):
        register_secret(secret)  # a --judge-base-url password is redacted like a configured key
    if base_url:
        env["EVALSITE_MODEL_BASE_URL"] = base_url
    if env.get("EVALSITE_JUDGE_API_KEY_ENV"):
        env["EVALSITE_MODEL_API_KEY_ENV"] = env["EVALSITE_JUDGE_API_KEY_ENV"]
    try:
        model = model_from_settings(env)
    except ModelError as exc:
        raise UsageError(f"--judge: {exc}") from None
    scorer = RubricJudge(
        judge_model=getattr(model, "name", name),
        samples=opts["judge_samples"],
        retries=opts["judge_retries"],
        use_schema=not opts["judge_no_schema"],
        use_cache=not opts["no_judge_cache"],
    )
    services = ScorerServices(judge=model)
    if not opts["no_judge_cache"]:
        settings.DATA_DIR.mkdir(parents=True, exist_ok=True)
        services = ScorerServices(judge=model, judge_cache=SqliteJudgeCache(settings.DATA_DIR / "judge_cache.sqlite3"))
    judge = JudgeConfig(
        model=getattr(model, "name", name), base_url=strip_userinfo(base_url or ""), samples=opts["judge_samples"]
    )
    return JudgeSetup([scorer], services, judge, label=opts.get("judge_label") or "is_correct")


REVIEWS_LABEL = "reviews"
"""``--judge-label reviews``: people's reviews of the rescored run are the labels."""


class JudgeTally:
    """Folds the judge's per-case output into run-level figures, without keeping the results.

    Collects judge calls and tokens (apart from the target's), cache hits, judge errors,
    unstable cases, and (judge verdict, human label) pairs for agreement.
    """

    def __init__(
        self,
        label: str = "is_correct",
        *,
        variant: str = "",
        review_labels: Mapping[tuple[str, int], bool] | None = None,
    ) -> None:
        """``label``: a case metadata path; ``review_labels``: when given, the labels instead,
        ``{(case id, repeat index): passed}`` (people's reviews, :func:`apps.evals.queries.reviews.labels_by_case`)."""
        self.label = label.replace("{variant}", variant)
        self.review_labels = review_labels
        self.calls = self.tokens_in = self.tokens_out = self.cache_hits = 0
        self.errors = self.unstable = self.verdicts = 0
        self.error_reasons: Counter[str] = Counter()
        self.pairs: list[tuple[bool, bool]] = []

    def on_result(self, result: CaseResult) -> None:
        for score in result.scores:
            if score.name != "rubric_judge":
                continue
            meta = score.metadata
            self.calls += int(meta.get("judge_calls") or 0)
            self.tokens_in += int(meta.get("judge_tokens_in") or 0)
            self.tokens_out += int(meta.get("judge_tokens_out") or 0)
            self.cache_hits += int(meta.get("judge_cache_hits") or 0)
            if score.error is not None:
                self.errors += 1
                self.error_reasons[one_line(score.error)] += 1
                continue
            self.verdicts += 1
            if meta.get("unstable"):
                self.unstable += 1
            if self.review_labels is not None:
                human = self.review_labels.get((result.case.id, result.run.repeat_index))
            else:
                human = read_label(result.case, self.label)
            if human is not None and isinstance(score.value, bool):
                self.pairs.append((score.value, human))

    def summary(self) -> dict[str, Any]:
        """JSON-ready figures; ``agreement`` only when some cases carried a human label."""
        data: dict[str, Any] = {
            "calls": self.calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cache_hits": self.cache_hits,
            "verdicts": self.verdicts,
            "errors": self.errors,
            "unstable": self.unstable,
        }
        if self.error_reasons:
            data["error_reasons"] = [[reason, n] for reason, n in top_reasons(self.error_reasons)]
            data["other_error_reasons"] = len(self.error_reasons) - len(data["error_reasons"])
        if self.pairs:
            figures = agreement(self.pairs)
            data["agreement"] = {
                "label": self.label,
                "n": figures.n,
                "accuracy": figures.accuracy,
                "cohen_kappa": figures.cohen_kappa,
            }
        return data


def store_judge_summary(eval_run_id: str, tally: JudgeTally) -> dict[str, Any]:
    """Save the judge figures into the eval run's summary JSON (shown by the portal)."""
    eval_run = EvalRun.objects.get(pk=eval_run_id)
    figures = tally.summary()
    summary = {**(eval_run.summary or {}), "judge": figures}
    EvalRun.objects.filter(pk=eval_run_id).update(summary=summary)
    return figures


def judge_lines(figures: dict[str, Any], eval_run_id: str | None = None) -> list[str]:
    """Human-readable lines for the CLI: the figures, then the most common judge error reasons
    (and, given the run, where to see every error)."""
    lines = [
        f"judge: {figures['verdicts']} verdicts, {figures['errors']} judge errors, {figures['unstable']} unstable; "
        f"{figures['calls']} calls, tokens in/out {figures['tokens_in']}/{figures['tokens_out']}, "
        f"{figures['cache_hits']} cache hits"
    ]
    if figures.get("error_reasons"):
        # escaped: the lines are printed as rich markup, and a reason is a model's or a client's text
        lines += [f"  {n} × {escape(reason)}" for reason, n in figures["error_reasons"]]
        if figures.get("other_error_reasons"):
            lines.append(f"  … and {figures['other_error_reasons']} other reason(s)")
        if eval_run_id is not None:
            lines.append(f"  every error: {where_to_see(eval_run_id)}")
    if "agreement" in figures:
        a = figures["agreement"]
        lines.append(
            f"judge vs human label {a['label']!r}: n={a['n']}, "
            f"accuracy {a['accuracy']:.3f}, Cohen's kappa {a['cohen_kappa']:.3f}"
        )
    return lines
