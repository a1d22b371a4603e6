"""Reads of eval sets and their cases: the set list with cases per split, one set's cases."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from apps.evals.models import EvalCase, EvalSet
from apps.evals.queries.tags import has_tag
from evalcore.types import SPLITS


def split_counts_by_set() -> dict[int, dict[str, int]]:
    """``{set id: {split: cases}}`` for every set with cases, every split present (0 when empty).

    One grouped query over the ``(eval_set, split)`` index; a set with no case is absent.
    """
    counts: dict[int, dict[str, int]] = {}
    for row in EvalCase.objects.values("eval_set_id", "split").annotate(n=Count("id")).order_by():
        counts.setdefault(row["eval_set_id"], dict.fromkeys(SPLITS, 0))[row["split"]] = row["n"]
    return counts


def set_listing(name: str | None = None) -> QuerySet[EvalSet]:
    """The sets by name (``name``: that one only), each annotated with its cases per split
    (``n_train``, ``n_dev``, ``n_test``), for a paginated list: the counts come with the page's
    rows in one grouped query."""
    sets = EvalSet.objects.order_by("name", "pk")
    if name is not None:
        sets = sets.filter(name=name)
    return sets.annotate(**{f"n_{split}": Count("cases", filter=Q(cases__split=split)) for split in SPLITS})


def split_counts(eval_set: EvalSet) -> dict[str, int]:
    """Cases per split of one set, every split present (0 when empty): ``{"train": n, ...}``."""
    counts = dict.fromkeys(SPLITS, 0)
    for row in EvalCase.objects.filter(eval_set=eval_set).values("split").annotate(n=Count("id")).order_by():
        counts[row["split"]] = row["n"]
    return counts


def set_cases(
    eval_set: EvalSet, *, split: str | None = None, tag: str | None = None, search: str | None = None
) -> QuerySet[EvalCase]:
    """A set's cases in file order, filtered (``None`` = no filter): split, tag, case-id substring."""
    cases = EvalCase.objects.filter(eval_set=eval_set).order_by("position", "case_id")
    if split:
        cases = cases.filter(split=split)
    if tag:
        cases = cases.filter(has_tag(tag))
    if search:
        cases = cases.filter(case_id__icontains=search)
    return cases
