"""Eval sets' writes: importing a case bank into a set, refreshing set hashes; and the small reads
the import and the run paths share (cases per split, a split's cases as engine cases).

Views, the API, admin actions and management commands call these functions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db import transaction

from apps.evals.models import EvalCase, EvalSet
from apps.evals.queries import split_counts
from apps.evals.stored import stored_case
from evalcore.jsonvalue import to_json
from evalcore.loaders import cases_content_hash
from evalcore.splits import assign_split
from evalcore.types import Case


@dataclass(slots=True)
class ImportSummary:
    """What an import did: the set, and how many cases were created, updated, unchanged, removed."""

    eval_set: EvalSet
    created: int
    updated: int
    removed: int
    split_counts: dict[str, int]
    unchanged: int = 0
    kept_captured: int = 0


def import_cases(
    *,
    name: str,
    cases: list[Case],
    content_hash: str = "",
    source_path: str = "",
    description: str = "",
    split_ratios: tuple[float, float, float] = (0.6, 0.2, 0.2),
    hashed_splits: frozenset[str] | set[str] = frozenset(),
    prune_captured: bool = False,
    legacy_auto_ids: Mapping[str, str] | None = None,
) -> ImportSummary:
    """Create or replace an eval set's cases from a loaded case bank, in one transaction.

    The set afterwards holds ``cases`` (cases absent from the file are removed; their past
    results stay, keyed by case id), plus the cases captured in the portal's playground
    (``metadata["source"] == "playground"``), which a file never holds: they are kept after
    the file's cases (``kept_captured``) unless ``prune_captured``. A case without a split gets one from the stable hash
    of (set name, case id), so it never moves when others are added; a case already stored
    keeps its split unless the file names one (``hashed_splits``: ids whose split the loader
    hashed, i.e. the file gave none).

    ``legacy_auto_ids`` (derived id -> the id the first auto-id scheme gave the same case, from
    :attr:`evalcore.loaders.LoadedCaseBank.legacy_auto_ids`): a set imported before auto ids came
    from the input alone keeps the ids it holds. A derived id the set does not have yet takes
    over the stored case with its old-scheme id, or else a stored ``auto-`` case with the same
    input (its label was corrected), so that case is updated in place, keeping its split and
    its results, instead of being removed and created again.
    """
    with transaction.atomic():
        eval_set, _ = EvalSet.objects.get_or_create(name=name)
        eval_set.source_path = source_path or eval_set.source_path
        existing = {c.case_id: c for c in EvalCase.objects.filter(eval_set=eval_set)}
        if legacy_auto_ids and existing:
            cases, hashed_splits, renamed = _keep_legacy_auto_ids(cases, existing, legacy_auto_ids, hashed_splits)
            if renamed:
                content_hash = cases_content_hash(cases)
        eval_set.content_hash = content_hash
        if description:
            eval_set.description = description
        eval_set.save()
        to_create: list[EvalCase] = []
        to_update: list[EvalCase] = []
        seen: set[str] = set()
        for position, case in enumerate(cases):
            seen.add(case.id)
            row = existing.get(case.id)
            # a file without a split never moves a stored case: a split curated in the admin stays
            if row is not None and (case.split is None or case.id in hashed_splits):
                split = row.split
            else:
                split = case.split or assign_split(name, case.id, split_ratios)
            fields = {
                "input": to_json(case.input),
                "expected": to_json(case.expected) if case.has_expected else None,
                "has_expected": case.has_expected,
                "tags": list(case.tags),
                "split": split,
                "metadata": to_json(case.metadata),
                "position": position,
            }
            if row is None:
                to_create.append(EvalCase(eval_set=eval_set, case_id=case.id, **fields))
            elif any(getattr(row, key) != value for key, value in fields.items()):
                for key, value in fields.items():
                    setattr(row, key, value)
                to_update.append(row)
        EvalCase.objects.bulk_create(to_create, batch_size=1000)
        if to_update:
            EvalCase.objects.bulk_update(
                to_update,
                ["input", "expected", "has_expected", "tags", "split", "metadata", "position"],
                batch_size=500,
            )
        absent = [row for cid, row in existing.items() if cid not in seen]
        captured = [] if prune_captured else [row for row in absent if _captured_in_portal(row)]
        removed_ids = [row.pk for row in absent if row not in captured]
        EvalCase.objects.filter(pk__in=removed_ids).delete()
        if captured:
            for offset, row in enumerate(sorted(captured, key=lambda r: r.position)):
                row.position = len(cases) + offset
            EvalCase.objects.bulk_update(captured, ["position"], batch_size=500)
            refresh_set_hashes([eval_set.pk])  # the set is the file plus the captured cases
    unchanged = len(cases) - len(to_create) - len(to_update)
    return ImportSummary(
        eval_set,
        len(to_create),
        len(to_update),
        len(removed_ids),
        split_counts(eval_set),
        unchanged=unchanged,
        kept_captured=len(captured),
    )


def _captured_in_portal(row: EvalCase) -> bool:
    """A case added in the portal (playground capture), not by a case-bank file."""
    return isinstance(row.metadata, dict) and row.metadata.get("source") == "playground"


def _keep_legacy_auto_ids(
    cases: list[Case],
    existing: dict[str, EvalCase],
    legacy_auto_ids: Mapping[str, str],
    hashed_splits: frozenset[str] | set[str],
) -> tuple[list[Case], set[str], int]:
    """Give derived-id cases the ids a set made with the first auto-id scheme holds for them.

    Returns:
        ``(cases with ids replaced, hashed_splits with the same renames, number renamed)``.
    """
    incoming = {case.id for case in cases}
    free = {cid: row for cid, row in existing.items() if cid.startswith("auto-") and cid not in incoming}
    if not free:
        return cases, set(hashed_splits), 0
    by_input: dict[str, list[str]] = {}
    for cid, row in free.items():
        by_input.setdefault(json.dumps(row.input, sort_keys=True), []).append(cid)
    renamed: list[Case] = []
    splits = set(hashed_splits)
    count = 0
    for case in cases:
        old = legacy_auto_ids.get(case.id)
        if old is None or case.id in existing:
            renamed.append(case)
            continue
        if old not in free:  # the label changed too: the stored case with the same input
            same = [cid for cid in by_input.get(json.dumps(to_json(case.input), sort_keys=True), []) if cid in free]
            old = same[0] if same else None
        if old is None:
            renamed.append(case)
            continue
        del free[old]
        if case.id in splits:
            splits.discard(case.id)
            splits.add(old)
        renamed.append(dataclasses.replace(case, id=old))
        count += 1
    return renamed, splits, count


def refresh_set_hashes(set_ids: Iterable[int]) -> None:
    """Recompute the content hash of sets whose cases changed outside an import (admin edits,
    captured cases), so the next eval run records the set it really ran.

    Same hash as the loader's (``evalcore.loaders.cases_content_hash``), streamed from the
    database.
    """
    for set_id in set(set_ids):
        rows = EvalCase.objects.filter(eval_set_id=set_id).iterator(chunk_size=2000)
        EvalSet.objects.filter(pk=set_id).update(content_hash=cases_content_hash(stored_case(r) for r in rows))


def set_cases(eval_set: EvalSet, split: str) -> list[Case]:
    """The set's cases as engine cases, filtered by split (``all`` for every split)."""
    rows = EvalCase.objects.filter(eval_set=eval_set).order_by("position", "case_id")
    if split != "all":
        rows = rows.filter(split=split)
    return [stored_case(row) for row in rows]
