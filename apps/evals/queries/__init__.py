"""Reads of the evals app (selectors): one function per question, used by pages, API and CLI,
one module per topic: :mod:`~apps.evals.queries.sets`, :mod:`~apps.evals.queries.runs`,
:mod:`~apps.evals.queries.results`, :mod:`~apps.evals.queries.compare` (two runs case by case),
:mod:`~apps.evals.queries.figures` (per-split and trend series shown as charts), and the rest
beside them. Import from the topic module; this package re-exports nothing.

Writes live in ``sets/``, ``runs/`` and ``results/``.
"""
