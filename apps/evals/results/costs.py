"""Costing a run: each result's cost (target, judge, simulated user apart) and latency, stored as
:class:`~apps.evals.models.CaseCost` rows, and the prices used kept on the run.

A run is costed when it ends (:func:`apps.evals.results.readback.finish_eval_run`): results
without a cost row get one, priced with the prices the run already recorded (a resumed run keeps
them) and today's table for any model it has not priced yet. The prices used are recorded in
``EvalRun.summary["prices"]`` (``{"priced_at", "table": {model: {version, input, output,
cached_input, reasoning}}}``), so a later change of the table never rewrites the run;
``evalsite reprice RUN`` (:func:`reprice_eval_run`) re-costs every result with today's table,
on purpose.

Where the figures come from, per result:

- target: the run row's model (else the eval run's), its ``tokens_in`` / ``tokens_out`` (reported),
  or the estimates of ``metadata["usage"]`` (``source: estimated``), plus its cached / reasoning
  tokens; wall time is ``elapsed_ms``, model time and TTFT come from ``metadata["usage"]``;
- judge: every score's ``judge_tokens_in`` / ``judge_tokens_out`` priced at its ``judge_model``;
- simulated user: ``metadata["simulator"]`` (``model``, ``tokens_in``, ``tokens_out``, ``calls``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import batched
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import Count, Sum
from django.utils import timezone

from apps.core.bulk import columns, insert_rows
from apps.evals.models import CaseCost, EvalResult, EvalRun, ModelPrice
from apps.evals.results.cost_figures import aggregate_cost_latency, figures_record
from evalcore.costs import Prices, Usage, cost_usd

logger = logging.getLogger(__name__)

BATCH = 2000
"""Results read and cost rows written per batch."""


def current_prices() -> dict[str, Prices]:
    """Today's price table: each model's highest version (one query)."""
    table: dict[str, Prices] = {}
    for row in ModelPrice.objects.order_by("model", "-version"):
        if row.model not in table:
            table[row.model] = price_of(row)
    return table


def price_of(row: ModelPrice) -> Prices:
    """The engine's value of one price row."""
    return Prices(
        model=row.model,
        input=float(row.input_usd_per_m),
        output=float(row.output_usd_per_m),
        cached_input=float(row.cached_input_usd_per_m),
        reasoning=float(row.reasoning_usd_per_m),
        version=row.version,
    )


def snapshot(table: Mapping[str, Prices]) -> dict[str, dict[str, Any]]:
    """The prices as stored on a run (``summary["prices"]["table"]``)."""
    return {
        model: {
            "version": p.version,
            "input": p.input,
            "output": p.output,
            "cached_input": p.cached_input,
            "reasoning": p.reasoning,
        }
        for model, p in sorted(table.items())
    }


def recorded_prices(summary: Mapping[str, Any] | None) -> dict[str, Prices]:
    """The prices a run was costed with, read back from its summary (empty: never costed)."""
    block = (summary or {}).get("prices")
    table = block.get("table") if isinstance(block, dict) else None
    if not isinstance(table, dict):
        return {}
    out: dict[str, Prices] = {}
    for model, p in table.items():
        try:
            out[model] = Prices(
                model=model,
                input=float(p["input"]),
                output=float(p["output"]),
                cached_input=float(p["cached_input"]),
                reasoning=float(p["reasoning"]),
                version=int(p.get("version") or 0),
            )
        except (KeyError, TypeError, ValueError):
            continue  # a hand-edited entry: priced again from today's table
    return out


@dataclass(frozen=True, slots=True)
class Costing:
    """What costing a run did.

    Attributes:
        n_costed: Results given a cost row now.
        used: The prices the run is now recorded with (model -> prices), only models it used.
        unpriced: Models the run used that have no price (their cases are unpriced).
        prices_block: The ``summary["prices"]`` value to store.
    """

    n_costed: int
    used: dict[str, Prices]
    unpriced: tuple[str, ...]
    prices_block: dict[str, Any]


def cost_results(eval_run: EvalRun, *, table: Mapping[str, Prices], only_new: bool) -> Costing:
    """Write the cost rows of ``eval_run``'s results (all of them, or those without one) priced
    at ``table``; the caller stores :attr:`Costing.prices_block` on the run, in its transaction.

    Cost: one streamed read of the results with their run rows, ``BATCH`` at a time, and one
    bulk insert per batch.
    """
    used: dict[str, Prices] = {}
    unpriced: set[str] = set()

    def price(model: str | None) -> Prices | None:
        if not model:
            return None
        found = table.get(model)
        if found is None:
            unpriced.add(model)
        else:
            used[model] = found
        return found

    results = EvalResult.objects.filter(eval_run_id=eval_run.pk)
    if only_new:
        results = results.filter(cost__isnull=True)
    rows = results.order_by("id").values_list(
        "id",
        "scores",
        "run__model",
        "run__tokens_in",
        "run__tokens_out",
        "run__elapsed_ms",
        # only the two blocks read, extracted in SQL: the whole metadata (tool calls, turns...)
        # was half the time of costing a run
        "run__metadata__usage",
        "run__metadata__simulator",
        # a case answered from the target cache (evalcore.target_cache) made no call: no wall time
        "run__metadata__target_cache__hit",
    )
    n = 0
    for chunk in batched(rows.iterator(chunk_size=BATCH), BATCH):
        # plain tuples below the ORM (apps.core.bulk): bulk_create's per-value preparation was
        # ~90% of costing a 100k-case run; a result already costed is skipped, never doubled
        n += insert_rows(CaseCost, _COLUMNS, [_case_cost(eval_run, row, price) for row in chunk], unique=_UNIQUE)
    block = {"priced_at": timezone.now().isoformat(), "table": snapshot(used)}
    return Costing(n, used, tuple(sorted(unpriced)), block)


_FIELDS = (
    "eval_run",
    "result",
    "target_model",
    "target_usd",
    "judge_usd",
    "judge_calls",
    "simulator_usd",
    "simulator_calls",
    "total_usd",
    "tokens_estimated",
    "wall_ms",
    "model_ms",
    "ttft_ms",
)
_COLUMNS = columns(CaseCost, _FIELDS)
_UNIQUE = columns(CaseCost, ("result",))


def _case_cost(eval_run: EvalRun, row: tuple[Any, ...], price: Any) -> tuple[Any, ...]:
    """One cost row's database values, in :data:`_FIELDS` order."""
    result_id, scores, model, tokens_in, tokens_out, elapsed_ms, found, simulator, cache_hit = row
    usage: dict[str, Any] = found if isinstance(found, dict) else {}
    model = model or eval_run.model
    estimated = usage.get("source") == "estimated"
    if estimated:
        tokens_in, tokens_out = usage.get("tokens_in"), usage.get("tokens_out")
    target_usd: float | None = None
    if tokens_in is not None or tokens_out is not None:
        target_usd = cost_usd(
            Usage(
                tokens_in=int(tokens_in or 0),
                tokens_out=int(tokens_out or 0),
                cached_in=_int(usage.get("cached_in")),
                reasoning=_int(usage.get("reasoning")),
                estimated=estimated,
            ),
            price(model),
        )
    judge_usd, judge_calls = _judge_cost(scores or [], price)
    sim_usd, sim_calls = _simulator_cost(simulator, price)
    parts = [target_usd]
    parts += [judge_usd] if judge_calls else []
    parts += [sim_usd] if sim_calls else []
    total = None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
    return (
        eval_run.pk,
        result_id,
        (model or "")[:200],
        target_usd,
        judge_usd,
        judge_calls,
        sim_usd,
        sim_calls,
        total,
        estimated,
        None if cache_hit is True else elapsed_ms,  # a cache hit's time is a lookup's, not the target's
        _ms(usage.get("model_ms")),
        _ms(usage.get("ttft_ms")),
    )


def _judge_cost(scores: Iterable[Any], price: Any) -> tuple[float | None, int]:
    """The judge's USD on one case and its calls: ``(None, 0)`` when no judge scored it, ``(0.0,
    0)`` when it answered from its cache, ``(None, k)`` when its model has no price. Every score
    carrying ``judge_tokens_in`` counts once (the rubric verdict, a rule verdict, a library metric),
    except a ``NAME.part`` sub-score beside a ``NAME`` that carries them too."""
    total = 0.0
    calls = 0
    judged = False
    spending = [
        (str(score.get("name") or ""), meta)
        for score in scores
        if isinstance(score, dict) and isinstance(meta := score.get("metadata"), dict) and "judge_tokens_in" in meta
    ]
    names = {name for name, _ in spending}
    for name, meta in spending:
        if "." in name and name.rsplit(".", 1)[0] in names:
            continue  # a sub-score repeating its verdict's usage (the rubric judge's axes on an error)
        judged = True
        n_calls = _int(meta.get("judge_calls"))
        calls += n_calls
        if not n_calls:
            continue
        cost = cost_usd(
            Usage(tokens_in=_int(meta.get("judge_tokens_in")), tokens_out=_int(meta.get("judge_tokens_out"))),
            price(str(meta.get("judge_model") or "")),
        )
        if cost is None:
            return None, max(calls, 1)
        total += cost
    return (total if judged else None), calls


def _simulator_cost(block: Any, price: Any) -> tuple[float | None, int]:
    """The simulated user's USD on one case and its model calls (``(None, 0)``: none played it,
    or a scripted one that called no model)."""
    if not isinstance(block, dict):
        return None, 0
    calls = _int(block.get("calls"))
    if not calls:
        return (0.0 if block.get("kind") else None), 0
    cost = cost_usd(
        Usage(tokens_in=_int(block.get("tokens_in")), tokens_out=_int(block.get("tokens_out"))),
        price(str(block.get("model") or "")),
    )
    return cost, calls


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _ms(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def cost_new_results(eval_run_id: str) -> dict[str, Any] | None:
    """Cost the results of a run that have no cost row yet, with the prices the run recorded
    (today's for a model it has none for); returns the summary keys to store (``prices``: the
    prices used; ``cost_latency``: the run's figures,
    :func:`~apps.evals.results.cost_figures.figures_record`), or ``None`` when the run is gone or
    could not be costed. Called by :func:`~apps.evals.results.readback.finish_eval_run`."""
    eval_run = EvalRun.objects.filter(pk=eval_run_id).only("id", "model", "summary").first()
    if eval_run is None:
        return None
    pinned = recorded_prices(eval_run.summary)
    try:
        table = {**current_prices(), **pinned}
        with transaction.atomic():
            costing = cost_results(eval_run, table=table, only_new=True)
    except DatabaseError as exc:
        # the run still ends; its costs are made later by `evalsite reprice` (nothing half-written)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        logger.warning(
            "eval run %s: its cases could not be costed (%s); `evalsite reprice %s` costs them later",
            eval_run_id,
            first,
            eval_run_id,
        )
        return None
    kept = {**pinned, **costing.used}
    return {
        "prices": {"priced_at": costing.prices_block["priced_at"], "table": snapshot(kept)},
        "cost_latency": _figures(eval_run_id),
    }


def _figures(eval_run_id: str) -> dict[str, Any] | None:
    """The run's figures as stored in its summary (read back from the rows just written)."""
    figures = aggregate_cost_latency([eval_run_id]).get(eval_run_id)
    return figures_record(figures) if figures is not None else None


@dataclass(frozen=True, slots=True)
class Repricing:
    """What ``evalsite reprice`` changed.

    Attributes:
        n_costed: Results costed again.
        old_total_usd, new_total_usd: The run's summed cost of its priced cases before and after
            (``None``: no priced case).
        old_priced, new_priced: Priced cases before and after.
        old_prices, new_prices: The prices recorded on the run before and after.
        unpriced: Models with no price in today's table.
    """

    n_costed: int
    old_total_usd: float | None
    new_total_usd: float | None
    old_priced: int
    new_priced: int
    old_prices: dict[str, Prices]
    new_prices: dict[str, Prices]
    unpriced: tuple[str, ...]


def reprice_eval_run(eval_run_id: str) -> Repricing:
    """Cost every result of the run again with today's price table, in one transaction, and
    record those prices on the run.

    Raises:
        EvalRun.DoesNotExist: No such run.
    """
    with transaction.atomic():
        eval_run = EvalRun.objects.select_for_update().get(pk=eval_run_id)
        old_total, old_priced = _totals(eval_run_id)
        old_prices = recorded_prices(eval_run.summary)
        CaseCost.objects.filter(eval_run_id=eval_run_id).delete()
        costing = cost_results(eval_run, table=current_prices(), only_new=False)
        summary = dict(eval_run.summary or {})
        summary["prices"] = costing.prices_block
        summary["cost_latency"] = _figures(eval_run_id)
        EvalRun.objects.filter(pk=eval_run_id).update(summary=summary)
        new_total, new_priced = _totals(eval_run_id)
    return Repricing(
        n_costed=costing.n_costed,
        old_total_usd=old_total,
        new_total_usd=new_total,
        old_priced=old_priced,
        new_priced=new_priced,
        old_prices=old_prices,
        new_prices=costing.used,
        unpriced=costing.unpriced,
    )


def _totals(eval_run_id: str) -> tuple[float | None, int]:
    got = CaseCost.objects.filter(eval_run_id=eval_run_id).aggregate(total=Sum("total_usd"), n=Count("total_usd"))
    return got["total"], int(got["n"] or 0)


def add_price_version(
    *,
    model: str,
    input_usd_per_m: Any,
    output_usd_per_m: Any,
    cached_input_usd_per_m: Any,
    reasoning_usd_per_m: Any,
    source: str = "",
) -> ModelPrice:
    """Save a model's new prices as its next version (1 for a new model); earlier versions stay,
    so the runs costed with them keep their costs. Prices are USD per million tokens."""
    with transaction.atomic():
        latest = ModelPrice.objects.select_for_update().filter(model=model).order_by("-version").first()
        return ModelPrice.objects.create(
            model=model,
            version=(latest.version + 1) if latest is not None else 1,
            input_usd_per_m=input_usd_per_m,
            output_usd_per_m=output_usd_per_m,
            cached_input_usd_per_m=cached_input_usd_per_m,
            reasoning_usd_per_m=reasoning_usd_per_m,
            source=source,
        )
