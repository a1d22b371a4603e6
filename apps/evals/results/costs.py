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

from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Sum
from django.utils import timezone

from apps.core.bulk import columns, insert_rows
from apps.evals.models import CaseCost, EvalResult, EvalRun, ModelPrice
from apps.evals.results.cost_figures import aggregate_cost_latency, figures_record
from apps.traces.models import Run
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
    """Write the cost rows of ``eval_run``'s results that have none, priced at ``table``; the
    caller stores :attr:`Costing.prices_block` on the run, in its transaction. A row already
    stored is never written twice: ``only_new=False`` (re-cost every result) is for a caller that
    deleted the run's rows first (:func:`reprice_eval_run`); :attr:`Costing.used` then names every
    model the run's results were priced with.

    Cost: the results that spent nothing (no tokens, no judge or simulated-user usage) costed by
    one statement in the database (:func:`_cost_plain_results`); the others read with their run
    rows, ``BATCH`` at a time, with one bulk insert per batch.
    """
    del only_new  # both callers' results without a row are the ones to cost (see above)
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

    # the results that spent nothing (no tokens, no judge or simulator usage, no usage block):
    # their rows are written by one statement in the database; only the others are read here
    n = _cost_plain_results(eval_run)
    results = EvalResult.objects.filter(eval_run_id=eval_run.pk, cost__isnull=True)
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


def _cost_plain_results(eval_run: EvalRun) -> int:
    """Write, in one ``INSERT ... SELECT``, the cost rows of the run's results without one whose
    run spent nothing to price: no ``tokens_in`` / ``tokens_out``, no estimated tokens, model
    time or TTFT in its ``usage``, no ``simulator`` block, no score naming ``judge_tokens_in``.
    Each row is what :func:`_case_cost` makes of such a result (no cost: unpriced, never $0; the
    wall time, none for a target-cache hit; the model); every other result is left to it.
    Returns the rows written.

    A 10,000-case run whose target reports no tokens (a no-op, a rule-based target) was costed
    in ~0.2 s of Python (each row read, decoded and written again); here it is one statement.
    """
    quote = connection.ops.quote_name
    cost, result, run = (quote(m._meta.db_table) for m in (CaseCost, EvalResult, Run))
    tables = {"cost": cost, "result": result, "run": run, "names": ", ".join(quote(c) for c in _COLUMNS)}
    if connection.vendor == "postgresql":
        sql = _PLAIN_SQL.format(
            estimated="(t.metadata #>> '{usage,source}') IS NOT DISTINCT FROM 'estimated'",
            model_ms="jsonb_typeof(t.metadata #> '{usage,model_ms}') IS NOT DISTINCT FROM 'number'",
            ttft_ms="jsonb_typeof(t.metadata #> '{usage,ttft_ms}') IS NOT DISTINCT FROM 'number'",
            simulator="jsonb_typeof(t.metadata -> 'simulator') IS NOT DISTINCT FROM 'object'",
            cache_hit="(t.metadata #> '{target_cache,hit}') = 'true'::jsonb",
            judged="strpos(r.scores::text, 'judge_tokens_in') > 0 OR strpos(r.scores::text, %s) > 0",
            false="FALSE",
            **tables,
        )
    else:  # SQLite: JSON is text
        sql = _PLAIN_SQL.format(
            estimated="json_extract(t.metadata, '$.usage.source') IS 'estimated'",
            model_ms="IFNULL(json_type(t.metadata, '$.usage.model_ms') IN ('integer', 'real'), 0)",
            ttft_ms="IFNULL(json_type(t.metadata, '$.usage.ttft_ms') IN ('integer', 'real'), 0)",
            simulator="json_type(t.metadata, '$.simulator') IS 'object'",
            cache_hit="json_type(t.metadata, '$.target_cache.hit') IS 'true'",
            judged="instr(r.scores, 'judge_tokens_in') > 0 OR instr(r.scores, %s) > 0",
            false="0",
            **tables,
        )
    with connection.cursor() as cursor:
        # a score's judge usage is found in its stored text; a text with a \u escape (where a key
        # could be spelled with one) is left to the Python costing, as is any naming judge_tokens_in
        cursor.execute(sql, [eval_run.model or "", eval_run.pk, "\\u"])
        return max(int(cursor.rowcount or 0), 0)


_PLAIN_SQL = (
    "INSERT INTO {cost} ({names}) "
    "SELECT r.eval_run_id, r.id, SUBSTR(COALESCE(NULLIF(t.model, ''), %s), 1, 200), "
    "NULL, NULL, 0, NULL, 0, NULL, {false}, CASE WHEN {cache_hit} THEN NULL ELSE t.elapsed_ms END, NULL, NULL "
    "FROM {result} r JOIN {run} t ON t.id = r.run_id "
    "WHERE r.eval_run_id = %s AND t.tokens_in IS NULL AND t.tokens_out IS NULL "
    "AND NOT ({estimated}) AND NOT ({model_ms}) AND NOT ({ttft_ms}) AND NOT ({simulator}) "
    "AND NOT COALESCE({judged}, {false}) "
    "AND NOT EXISTS (SELECT 1 FROM {cost} c WHERE c.result_id = r.id)"
)
"""The cost rows of the results that spent nothing (:func:`_cost_plain_results`), per backend:
params ``(the eval run's model, the eval run's id, "\\u")``; the row is :data:`_FIELDS`'s."""


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
