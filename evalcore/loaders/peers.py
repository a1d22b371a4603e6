"""Other tools' case files, recognised by their content: the one place a file's layout is decided.

:func:`plan_records` looks at a file (its suffix, a CSV's header, the first JSON record) and
says how its records become cases. A layout of another tool is read without ``--map`` and with
ids derived from the input when the file has none (``--auto-id`` implied: peers' files rarely
carry ids):

==================  =============================================  ==============================
layout              recognised by                                  read as
==================  =============================================  ==============================
promptfoo           a ``.yaml`` / ``.yml`` file; a CSV with a      :mod:`evalcore.loaders.promptfoo`
                    ``__expected`` / ``__description`` /
                    ``__metadata:`` column; JSON records with
                    ``vars`` or ``assert`` and no ``input``
OpenAI evals        an ``ideal`` field                             ``ideal`` -> expected
Langfuse export     an ``expected_output`` (or ``expectedOutput``) ``expected_output`` -> expected;
                    field (a JSON file may wrap the items in       ``datasetId``, ``status``...
                    ``{"data": [...]}``, as the API does)          -> ``metadata.langfuse``; an
                                                                   archived item is tagged
                                                                   ``archived``
Inspect dataset     a ``target`` field, or ``input`` with          ``target`` -> expected (as
                    ``choices``                                    text, as Inspect reads it);
                                                                   ``metadata`` JSON text ->
                                                                   object; ``choices`` text ->
                                                                   list (comma-separated)
==================  =============================================  ==============================

A record with a canonical ``expected`` field is never read as a peer's. Fields a layout does not
use (``choices``, ``sandbox``, Langfuse's ``status``...) are kept in metadata, as for any file.
A ``--map`` still applies: its entries replace the layout's for the same case field (or the same
column), so ``--map expected=label`` reads an Inspect file's expected value from ``label``.
Parquet and Arrow files (:mod:`evalcore.loaders.arrow`) are read as plain tables: canonical
column names, or ``--map``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from evalcore.loaders._csv import csv_header, csv_records
from evalcore.loaders._io import SourceFile
from evalcore.loaders._jsonfile import json_records
from evalcore.loaders._jsonl import Records, iter_jsonl_records
from evalcore.loaders._records import RecordBuilder
from evalcore.loaders.arrow import arrow_records
from evalcore.loaders.promptfoo import (
    DEFAULT_COLUMNS,
    is_promptfoo_config,
    is_promptfoo_header,
    is_promptfoo_test,
    read_promptfoo,
)

__all__ = ["DIALECTS", "RecordPlan", "plan_records"]

DIALECTS: tuple[str, ...] = ("promptfoo", "inspect", "openai_evals", "langfuse")
"""The peers' layouts :func:`plan_records` recognises (:attr:`RecordPlan.dialect`)."""

Normalise = Callable[[SourceFile, dict[str, Any], int], dict[str, Any]]


@dataclass(slots=True)
class RecordPlan:
    """How a file's records become cases.

    Attributes:
        found: The file format actually parsed (``"jsonl"`` for a ``.json`` file that is JSON Lines).
        dialect: The peer layout recognised (one of :data:`DIALECTS`), or ``None``.
        mapping: The effective field mapping: the layout's defaults under the user's ``--map``.
        optional: Mapped fields that came from the layout (no record needs to have them).
        auto_id: Derive missing ids from the input (a peer layout implies it).
        stem: The default set name.
        warnings: What the reader could not honour, one line each.
        read: Given the builder, the records (``(line, record)``).
    """

    found: str
    dialect: str | None
    mapping: dict[str, str]
    optional: frozenset[str]
    auto_id: bool
    stem: str
    warnings: list[str] = field(default_factory=list)
    read: Callable[[RecordBuilder], Records] = lambda builder: iter(())


def _text(value: Any) -> Any:
    """Inspect's reading of a target: text, or a list of texts."""
    if isinstance(value, list):
        return [item if isinstance(item, str) else json.dumps(item) for item in value]
    if value is None or isinstance(value, str | dict):
        return value
    return str(value) if isinstance(value, bool) else json.dumps(value)


def _inspect(source: SourceFile, record: dict[str, Any], line: int) -> dict[str, Any]:
    record = dict(record)
    if "target" in record:
        record["target"] = _text(record["target"])
    choices = record.get("choices")
    if isinstance(choices, str):
        parts = choices.split(",")
        record["choices"] = [part.strip() for part in (parts if len(parts) > 1 else choices.split())]
    elif isinstance(choices, list):
        record["choices"] = _text(choices)
    metadata = record.get("metadata")
    if isinstance(metadata, str):
        try:
            parsed = json.loads(metadata)
        except json.JSONDecodeError as exc:
            raise source.error(f"metadata is text that is not JSON ({exc.msg})", line=line, field="metadata") from None
        if not isinstance(parsed, dict):
            raise source.error("metadata text must hold a JSON object", line=line, field="metadata")
        record["metadata"] = parsed
    return record


def _identity(source: SourceFile, record: dict[str, Any], line: int) -> dict[str, Any]:
    return record


_LANGFUSE_KEYS = frozenset(
    """datasetId datasetName status sourceTraceId sourceObservationId createdAt updatedAt dataset_id dataset_name
    source_trace_id source_observation_id created_at updated_at""".split()
)


def _langfuse(source: SourceFile, record: dict[str, Any], line: int) -> dict[str, Any]:
    """Langfuse's bookkeeping fields go under one ``langfuse`` key; an archived item is tagged ``archived``."""
    kept = {key: value for key, value in record.items() if key not in _LANGFUSE_KEYS}
    extra = {key: value for key, value in record.items() if key in _LANGFUSE_KEYS and value is not None}
    if extra:
        kept["langfuse"] = extra
    if extra.get("status") == "ARCHIVED" and "tags" not in kept:
        kept["tags"] = ["archived"]
    return kept


def _detect(keys: Collection[str]) -> tuple[str, dict[str, str], Normalise] | None:
    """The peer layout of a record (or CSV header) with these keys, with its default mapping."""
    if "expected" in keys:
        return None
    if "ideal" in keys:
        return "openai_evals", {"expected": "ideal"}, _identity
    for column in ("expected_output", "expectedOutput"):
        if column in keys:
            return "langfuse", {"expected": column}, _langfuse
    if "target" in keys or ("input" in keys and "choices" in keys):
        return "inspect", {"expected": "target"}, _inspect
    return None


def _merge(defaults: dict[str, str], user: dict[str, str]) -> tuple[dict[str, str], frozenset[str]]:
    """The user's mapping over the layout's: a default gives way to a user entry for its field or column."""
    used = {part for column in user.values() for part in column.split("+")}
    kept = {f: c for f, c in defaults.items() if f not in user and not (set(c.split("+")) & used)}
    same = {f for f, c in defaults.items() if user.get(f) == c}  # the user restated a default
    return {**kept, **user}, frozenset(kept) | same


def _peek(records: Records) -> tuple[dict[str, Any] | None, Records]:
    iterator = iter(records)
    first = next(iterator, None)
    if first is None:
        return None, iter(())
    return first[1], itertools.chain([first], iterator)


def _normalised(records: Records, source: SourceFile, normalise: Normalise) -> Records:
    for line, record in records:
        yield line, normalise(source, record, line)


def plan_records(source: SourceFile, user: dict[str, str], auto_id: bool) -> RecordPlan:
    """Decide how ``source`` is read (see the module docstring); nothing but a peek is read yet.

    Args:
        source: The checked file (any format but ADK).
        user: The user's checked mapping (``{}`` for none).
        auto_id: The caller's ``auto_id``.

    Raises:
        CaseBankError: From the peek: a promptfoo file is read whole here, so its errors
            surface now; so does a JSON file's syntax error.
    """
    fmt = source.format
    if fmt in ("parquet", "arrow"):
        return RecordPlan(fmt, None, user, frozenset(), auto_id, source.stem, read=lambda b: arrow_records(source))
    if fmt == "csv":
        header = csv_header(source)
        if is_promptfoo_header(header):
            return _promptfoo(source, "csv", user)
        peer = _detect(header)

        def read_csv(builder: RecordBuilder) -> Records:
            text_columns = frozenset({builder.src["id"], builder.src["split"]})
            records = csv_records(source, text_columns, builder.columns.update, formula_escapes=True)
            return _normalised(records, source, peer[2]) if peer else records

        return _plan(source, "csv", peer, user, auto_id, lambda builder: read_csv(builder))
    if fmt == "yaml" or is_promptfoo_config(source):
        return _promptfoo(source, fmt, user)
    found, records = ("jsonl", iter_jsonl_records(source)) if fmt == "jsonl" else json_records(source)
    first, records = _peek(records)
    if first is not None and is_promptfoo_test(first):
        return _promptfoo(source, found, user)
    peer = _detect(first or {})
    reader = _normalised(records, source, peer[2]) if peer else records
    return _plan(source, found, peer, user, auto_id, lambda builder: reader)


def _plan(
    source: SourceFile,
    found: str,
    peer: tuple[str, dict[str, str], Normalise] | None,
    user: dict[str, str],
    auto_id: bool,
    read: Callable[[RecordBuilder], Records],
) -> RecordPlan:
    if peer is None:
        return RecordPlan(found, None, user, frozenset(), auto_id, source.stem, read=read)
    mapping, optional = _merge(peer[1], user)
    return RecordPlan(found, peer[0], mapping, optional, True, source.stem, read=read)


def _promptfoo(source: SourceFile, found: str, user: dict[str, str]) -> RecordPlan:
    tests = read_promptfoo(source)
    names = [name for name in tests.var_names if name and "+" not in name] or tests.var_names[:1]
    # tags and split read from columns no test has: a var named "tags" or "split" stays a var
    defaults = {"input": "+".join(names), **DEFAULT_COLUMNS, "tags": "__tags", "split": "__split"}
    mapping, optional = _merge(defaults, user)
    dropped = [column for f, column in DEFAULT_COLUMNS.items() if f not in optional]

    def read(builder: RecordBuilder) -> Records:
        for line, record in tests.records:
            yield line, {k: v for k, v in record.items() if k not in dropped} if dropped else record

    return RecordPlan(found, "promptfoo", mapping, optional, True, tests.stem, tests.warnings, read)
