"""Case-bank loading: JSONL, JSON, CSV, YAML, Parquet and Arrow files into validated cases.

Loading is all-or-nothing: :func:`load_cases` either returns every case of the file, each with
its split assigned, or raises one :class:`CaseBankError` naming the file, line and field of the
first problem, before the caller has written anything.

The canonical format (what :func:`write_jsonl` writes) is JSON Lines, one object per line::

    {"id": "q1", "input": "2+2?", "expected": "4", "tags": ["math"], "split": "dev", "metadata": {}}

``expected`` may be absent (the case has no reference answer: :data:`~evalcore.types.MISSING`)
or ``null`` (the reference answer is null). ``tags``, ``split`` and ``metadata`` are optional; a
case without a split gets one from :func:`evalcore.splits.assign_split`. Other tools' files are
recognised by their content and read without a mapping (:mod:`evalcore.loaders.peers`: promptfoo
configs and test files, Inspect datasets, OpenAI evals samples, Langfuse dataset exports; Google
ADK eval files by name, :mod:`evalcore.loaders.adk`). Files in any other layout (GSM8K, a Hugging
Face dataset saved as Parquet / Arrow) load with a field ``mapping`` (CLI ``--map``); fields no
case field uses are kept in ``metadata`` (an Evalsite export's ``evalsite`` key: :mod:`._exported`).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evalcore.atomic import write_chunks
from evalcore.loaders._csv import convert_cell, neutralise_formula, restore_formula
from evalcore.loaders._exported import without_export_fields
from evalcore.loaders._hashing import cases_content_hash, hash_record
from evalcore.loaders._io import SUPPORTED_SUFFIXES, CaseBankSource, SourceFile, adk_stem, is_adk_file, open_source
from evalcore.loaders._jsonl import Records
from evalcore.loaders._records import (
    CASE_FIELDS,
    RecordBuilder,
    auto_case_id,
    build_collecting,
    check_mapping,
    nul_at,
    parse_mapping,
    surrogate_at,
)
from evalcore.loaders.adk import adk_cases
from evalcore.loaders.errors import CaseBankError, CaseBankErrors, too_deep_error
from evalcore.loaders.peers import plan_records
from evalcore.serial import to_record
from evalcore.splits import DEFAULT_RATIOS, _normalise_ratios, check_split_aliases, split_counts
from evalcore.types import Case

__all__ = [
    "CASE_FIELDS",
    "SUPPORTED_SUFFIXES",
    "CaseBankError",
    "CaseBankErrors",
    "CaseBankSource",
    "LoadedCaseBank",
    "adk_stem",
    "auto_case_id",
    "cases_content_hash",
    "convert_cell",
    "hash_record",
    "is_adk_file",
    "iter_cases",
    "iter_jsonl_cases",
    "load_cases",
    "neutralise_formula",
    "nul_at",
    "parse_mapping",
    "restore_formula",
    "surrogate_at",
    "write_jsonl",
]


@dataclass(slots=True)
class LoadedCaseBank:
    """A fully validated case bank.

    Attributes:
        name: The eval set name: ``set_name`` if given, else the file name without its case-bank
            suffixes (``sets/qa.jsonl.gz`` -> ``qa``). It is part of the split hash.
        path: The file, as the caller named it.
        cases: Every case, in file order, each with ``split`` set (explicit or hashed).
        content_hash: sha256 hex of the cases, independent of their order in the file (see
            :func:`cases_content_hash`).
        format: ``"jsonl"``, ``"json"``, ``"csv"``, ``"adk"``, ``"yaml"``, ``"parquet"`` or
            ``"arrow"`` (the format actually parsed).
        hashed_splits: Ids of the cases whose split came from the hash (the file gave none); an
            import keeps a split already stored for them (e.g. curated in the admin).
        legacy_auto_ids: For each case whose id was derived (``auto_id``): its id -> the id the
            first auto-id scheme (input + expected) gave it, so an import into a set made with that
            scheme can keep the ids it already holds.
        dialect: The other tool whose layout the file is in (``"promptfoo"``, ``"inspect"``,
            ``"openai_evals"``, ``"langfuse"``: :mod:`evalcore.loaders.peers`), or ``None``.
        warnings: What was read but cannot be honoured, one line each (e.g. promptfoo assertion
            types with no Evalsite equivalent); the CLI prints them. Empty for most files.
    """

    name: str
    path: str
    cases: list[Case]
    content_hash: str
    format: str
    hashed_splits: frozenset[str] = frozenset()
    legacy_auto_ids: dict[str, str] = field(default_factory=dict)
    dialect: str | None = None
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.cases)

    @property
    def split_counts(self) -> dict[str, int]:
        """``{"train": n, "dev": n, "test": n}``."""
        return split_counts(self.cases)


def _prepare(
    path: CaseBankSource,
    mapping: dict[str, str] | None,
    auto_id: bool,
    set_name: str | None,
    split_ratios: Sequence[float],
    file_format: str | None,
    name: str | None,
    split_aliases: Mapping[str, str] | None = None,
    track_ids: bool = True,
    forbid_nul: str | None = None,
) -> tuple[SourceFile, RecordBuilder, Records, _Found]:
    """Check the file and pick its reader: the one place the format decides anything."""
    checked = check_mapping(mapping)
    ratios = _normalise_ratios(split_ratios)
    aliases = check_split_aliases(split_aliases)
    if set_name is not None and not set_name.strip():
        raise ValueError("set_name must not be empty")
    source = open_source(path, file_format, name=name)
    if source.format == "adk":
        builder = RecordBuilder(
            source,
            mapping={},
            auto_id=False,
            set_name=set_name if set_name is not None else source.stem,
            ratios=ratios,
            split_aliases=aliases,
            track_ids=track_ids,
            forbid_nul=forbid_nul,
        )
        return source, builder, _adk_records(source), _Found("adk")
    plan = plan_records(source, checked, auto_id)
    builder = RecordBuilder(
        source,
        mapping=plan.mapping,
        auto_id=plan.auto_id,
        set_name=set_name if set_name is not None else plan.stem,
        ratios=ratios,
        csv_mode=plan.found == "csv" and plan.dialect != "promptfoo",
        split_aliases=aliases,
        optional=plan.optional,
        track_ids=track_ids,
        forbid_nul=forbid_nul,
    )
    return source, builder, without_export_fields(plan.read(builder)), _Found(plan.found, plan.dialect, plan.warnings)


@dataclass(slots=True, frozen=True)
class _Found:
    """What :func:`_prepare` found: the format parsed, the peer layout, the reader's warnings."""

    format: str
    dialect: str | None = None
    warnings: list[str] = field(default_factory=list)


def _adk_records(source: SourceFile) -> Records:
    """ADK cases as canonical records, so they pass the same split hashing and id checks as any file.

    An ADK file names no split and its case fields are already canonical: the builder runs with
    no mapping and no auto ids (neither applies to ADK's fixed schema; ids are the file's own).
    """
    for case in adk_cases(source):
        record = {"id": case.id, "input": case.input, "tags": case.tags, "metadata": case.metadata}
        if case.has_expected:
            record["expected"] = case.expected
        yield 1, record


def _no_cases(source: SourceFile) -> CaseBankError:
    return source.error(
        "no cases: the file is empty, holds only blank lines or only a header row (a case bank needs at least one case)"
    )


def load_cases(
    path: CaseBankSource,
    *,
    name: str | None = None,
    mapping: dict[str, str] | None = None,
    auto_id: bool = False,
    set_name: str | None = None,
    split_ratios: Sequence[float] = DEFAULT_RATIOS,
    file_format: str | None = None,
    max_errors: int = 1,
    split_aliases: Mapping[str, str] | None = None,
    forbid_nul: str | None = None,
) -> LoadedCaseBank:
    """Load and validate a whole case bank; all or nothing.

    Args:
        path: A ``.jsonl``/``.ndjson``, ``.json`` or ``.csv`` file, optionally gzipped (``.gz``),
            a Google ADK eval file (``.test.json`` / ``.evalset.json``, see
            :mod:`evalcore.loaders.adk`), a promptfoo ``.yaml`` config or test file, or a
            ``.parquet`` / ``.arrow`` table; a path or an open file object (binary or text).
            Other tools' layouts are recognised by content (:mod:`evalcore.loaders.peers`).
        name: The file name of a file object (default: its ``name`` attribute): picks the
            format and names the file in errors.
        mapping: Case field -> field name in the file, e.g. ``{"input": "question",
            "expected": "answer"}`` (see :func:`parse_mapping` for the CLI form and ``+`` joins).
        auto_id: Derive a missing id from the input alone (``auto-`` + 12 hex digits of sha256
            over the input's canonical JSON; ``-2``, ``-3``... for later cases with the same input:
            see :func:`auto_case_id`) instead of failing. A corrected expected value keeps the id.
        set_name: The eval set name; defaults to the file name without suffixes.
        split_ratios: Train/dev/test shares for cases the file gives no split.
        file_format: Force a format (``"jsonl"``, ``"json"``, ``"csv"``, ``"adk"``, ``"yaml"``,
            ``"parquet"``, ``"arrow"``) instead of reading the suffix.
        max_errors: With N > 1, a problem in one case does not stop the check: up to N problems
            are collected and raised together as :class:`CaseBankErrors` (an upload form shows
            them all). A syntax error that stops the reader (invalid JSON, a truncated file)
            ends the search. Nothing is returned when any problem was found.
        split_aliases: The file's split names -> evalsite's (e.g. ``{"test": "dev", "validate":
            "test"}``, from :func:`evalcore.splits.parse_split_aliases`), applied before a split is
            checked, all at once (no chaining); a name with no alias must still be
            ``train``/``dev``/``test``.
        forbid_nul: When set, a NUL character (U+0000) anywhere in a case (its id, input,
            expected value, tags or metadata, keys included) is a problem of its line and field,
            with this text saying why (e.g. the database cannot store it); ``None``: allowed.

    Returns:
        The :class:`LoadedCaseBank`, every case with its split set.

    Raises:
        CaseBankError: On any problem in the file (missing, unsupported suffix, Git LFS pointer,
            not UTF-8, invalid JSON/CSV, NaN/Infinity, missing or badly typed fields, unknown
            split, duplicate id, no cases), naming file, line and field.
        ValueError: On a bad ``mapping``, ``split_ratios``, ``set_name`` or ``split_aliases``
            (caller errors).
    """
    if max_errors < 1:
        raise ValueError(f"max_errors must be >= 1, got {max_errors}")
    try:
        source, builder, records, found = _prepare(
            path, mapping, auto_id, set_name, split_ratios, file_format, name, split_aliases, forbid_nul=forbid_nul
        )
        build = builder.build
        if max_errors == 1:
            cases = [build(record, line) for line, record in records]
        else:
            cases = build_collecting(build, records, max_errors)
        if not cases:
            raise _no_cases(source)
        builder.finish()
        content_hash = cases_content_hash(cases)
    except RecursionError:  # the last resort (each reader checks nesting first): one line, never a traceback
        raise too_deep_error(name or getattr(path, "name", None) or str(path)) from None
    return LoadedCaseBank(
        name=builder.set_name,
        path=source.display,
        cases=cases,
        content_hash=content_hash,
        format=found.format,
        hashed_splits=frozenset(builder.hashed_splits),
        legacy_auto_ids=builder.legacy_auto_ids,
        dialect=found.dialect,
        warnings=list(found.warnings),
    )


def iter_cases(
    path: CaseBankSource,
    *,
    name: str | None = None,
    mapping: dict[str, str] | None = None,
    auto_id: bool = False,
    set_name: str | None = None,
    split_ratios: Sequence[float] = DEFAULT_RATIOS,
    file_format: str | None = None,
    split_aliases: Mapping[str, str] | None = None,
) -> Iterator[Case]:
    """Yield validated cases one at a time; JSONL is streamed, JSON and CSV are parsed whole first.

    Same arguments and checks as :func:`load_cases`, but an error surfaces only when the bad
    record is reached, after earlier cases were yielded: a caller that writes as it goes must do
    so inside a transaction it rolls back on :class:`CaseBankError`.

    Raises:
        CaseBankError: As :func:`load_cases` (file-level problems on the first ``next()``).
        ValueError: On a bad ``mapping``, ``split_ratios``, ``set_name`` or ``split_aliases``.
    """
    source, builder, records, _ = _prepare(
        path, mapping, auto_id, set_name, split_ratios, file_format, name, split_aliases
    )
    build = builder.build
    count = 0
    for line, record in records:
        yield build(record, line)
        count += 1
    if not count:
        raise _no_cases(source)
    builder.finish()


def iter_jsonl_cases(
    path: str | Path,
    *,
    mapping: dict[str, str] | None = None,
    auto_id: bool = False,
    set_name: str | None = None,
    split_ratios: Sequence[float] = DEFAULT_RATIOS,
) -> Iterator[Case]:
    """Stream a JSONL (or ``.jsonl.gz``) case bank: :func:`iter_cases` with the format forced to JSONL.

    Memory stays proportional to one line plus the set of ids seen (for duplicate detection).
    """
    return iter_cases(
        path, mapping=mapping, auto_id=auto_id, set_name=set_name, split_ratios=split_ratios, file_format="jsonl"
    )


def write_jsonl(cases: Iterable[Case], path: str | Path) -> int:
    """Write cases in the canonical JSONL case-bank format, atomically.

    One record per line (:func:`evalcore.serial.to_record`: ``expected`` left out when missing), UTF-8, ``\\n``
    line ends, non-ASCII kept as is. The file is written to a temporary name beside ``path`` and
    renamed, so a failure never leaves half a file. A ``.gz`` suffix gzips the output.

    Args:
        cases: The cases; ids must be unique.
        path: Destination file.

    Returns:
        The number of cases written.

    Raises:
        ValueError: On a duplicate id, or a value that is not JSON (NaN, Infinity, an object
            that is not a dict/list/str/number/bool/None); nothing is written then.
    """
    target = Path(path)
    lines: list[str] = []
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise ValueError(f"duplicate case id {case.id!r}: a case bank needs unique ids")
        seen.add(case.id)
        try:
            lines.append(json.dumps(to_record(case), ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"case {case.id!r} cannot be written as JSON: {exc}") from None
    payload = "".join(line + "\n" for line in lines).encode()
    if target.name.lower().endswith(".gz"):
        payload = gzip.compress(payload, mtime=0)
    write_chunks(target, [payload])
    return len(lines)
