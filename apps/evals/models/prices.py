"""The versioned price table and each case's stored cost and latency.

A :class:`ModelPrice` row is one version of one model's prices, in USD per million tokens; rows
are never edited in place (the admin saves a change as a new version), so an old run keeps the
prices it was costed with. A :class:`CaseCost` row is one result's cost (target, judge, simulated
user apart) and latency, written when a run finishes (``apps.evals.runs.costs``) and rewritten
only by ``evalsite reprice RUN``: the run's aggregates (``apps.evals.queries.costs``) are SQL
over these rows.
"""

from __future__ import annotations

from django.db import models

from apps.evals.models.runs import EvalResult, EvalRun


class ModelPrice(models.Model):
    """One version of one model's prices, USD per million tokens (immutable once saved).

    ``model`` is matched exactly against the model name a run records (the endpoint's reported
    name first, then the configured one); a name with no row is *unpriced*, never $0.
    ``cached_input`` prices prompt tokens the endpoint reports as cached and ``reasoning`` the
    completion tokens it reports as reasoning (both counted inside prompt / completion tokens, as
    OpenAI's ``usage`` reports them). The current price of a model is its highest ``version``.
    """

    model = models.CharField(max_length=200)
    version = models.PositiveIntegerField()
    input_usd_per_m = models.DecimalField(max_digits=12, decimal_places=6)
    output_usd_per_m = models.DecimalField(max_digits=12, decimal_places=6)
    cached_input_usd_per_m = models.DecimalField(max_digits=12, decimal_places=6)
    reasoning_usd_per_m = models.DecimalField(max_digits=12, decimal_places=6)
    # where the figures come from (a vendor's price page and the date it was read)
    source = models.CharField(max_length=300, blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model", "-version"]
        constraints = [models.UniqueConstraint(fields=["model", "version"], name="modelprice_unique_version")]

    def __str__(self) -> str:
        return f"{self.model} v{self.version}"


class CaseCost(models.Model):
    """One result's cost (USD, ``None``: unpriced) and latency (ms, ``None``: not measured).

    ``target_usd`` covers the target's model calls, ``judge_usd`` the LLM judge's (0 when no judge
    was called), ``simulator_usd`` the simulated user's (``None`` as well when the case had none:
    ``simulator_calls`` tells which). ``total_usd`` is their sum, ``None`` when any part that
    was spent is unpriced. ``tokens_estimated``: the target's endpoint reported no usage and its
    tokens were estimated from text length (``evalcore.costs``).
    """

    # one row per result, looked up by run: the (eval_run, wall_ms) index serves the run's
    # aggregates and its order statistics (p50/p95)
    eval_run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="case_costs", db_index=False)
    result = models.OneToOneField(EvalResult, on_delete=models.CASCADE, related_name="cost")
    target_model = models.CharField(max_length=200, blank=True, default="")
    target_usd = models.FloatField(null=True, blank=True)
    judge_usd = models.FloatField(null=True, blank=True)
    judge_calls = models.IntegerField(default=0)
    simulator_usd = models.FloatField(null=True, blank=True)
    simulator_calls = models.IntegerField(default=0)
    total_usd = models.FloatField(null=True, blank=True)
    tokens_estimated = models.BooleanField(default=False)
    wall_ms = models.FloatField(null=True, blank=True)
    model_ms = models.FloatField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)

    class Meta:
        indexes = [
            # every read is by run (its aggregate, a reprice's delete, the paired delta:cost join);
            # p50/p95 wall time is the k-th smallest by OFFSET on this index. One index only: each
            # more costs ~10% of costing a run, and the figures are read from the run's summary.
            models.Index(fields=["eval_run", "wall_ms"], name="casecost_run_wall"),
        ]

    def __str__(self) -> str:
        return f"cost of result {self.result_id}"
