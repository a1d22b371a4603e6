"""The one shape other tools' past runs are read into, and the helpers its readers share.

:func:`evalcore.loaders.peer_runs.read_peer_runs` returns a :class:`PeerFile`: the cases the file
defines and one :class:`PeerRun` per run it holds, each with one :class:`PeerItem` per case
answered, each item with the tool's own scores (:class:`PeerScore`). The readers
(:mod:`evalcore.loaders.promptfoo_results`, :mod:`evalcore.loaders.openai_evals_runs`,
:mod:`evalcore.loaders.braintrust_experiments`) build it with the helpers below: whole-file JSON
/ JSONL reading (bounded by :data:`~evalcore.loaders.limits.MAX_INFLATED_MB`, NaN refused), type
checks that name the JSON path, and score values mapped to 0..1.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalcore.jsonvalue import MISSING
from evalcore.loaders._records import auto_case_id, surrogate_at
from evalcore.loaders.errors import CaseBankError
from evalcore.loaders.limits import MAX_INFLATED_MB

__all__ = [
    "PeerCase",
    "PeerFile",
    "PeerItem",
    "PeerRun",
    "PeerScore",
    "arr",
    "file_sha256",
    "load_json",
    "load_jsonl",
    "obj",
    "stable_key",
]


@dataclass(slots=True)
class PeerScore:
    """One of the tool's scores on one item, kept as the tool gave it.

    Attributes:
        name: The score's name in Evalsite (the assertion's metric or ``promptfoo:<type>``, the
            grader's name...), unique within its item.
        value: The score in 0..1, or ``None`` when the tool gave none (or one outside 0..1,
            then kept in ``raw``).
        passed: The tool's verdict, or ``None`` for a measurement with no verdict.
        reason: The tool's explanation (``""`` when none).
        spec: The scorer spec as imported: ``{"kind": "<tool>:<type>", ...the tool's own
            configuration}``: what produced this score.
        equivalent: The Evalsite scorer spec ``{"name", "args"}`` that checks the same thing, or
            ``None`` when there is none: then the score is *imported-only* (kept, shown, counted,
            never re-run).
        raw: The tool's figures that do not fit ``value`` (e.g. a score of 3.5 out of 5).
    """

    name: str
    value: float | None
    passed: bool | None
    reason: str = ""
    spec: dict[str, Any] = field(default_factory=dict)
    equivalent: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PeerCase:
    """A case the file defines (a promptfoo test's vars, an OpenAI data source item, a Braintrust
    dataset record).

    Attributes:
        key: The case id (the tool's id when it has one, else ``auto-`` + a hash of the input, as
            Evalsite's own importers make it, so a set imported from the same source matches).
        input: The input (any JSON value).
        expected: The reference answer, or :data:`~evalcore.jsonvalue.MISSING`.
        metadata: The tool's extra data about the case.
        where: Where it is in the file (for messages).
    """

    key: str
    input: Any
    expected: Any = MISSING
    metadata: dict[str, Any] = field(default_factory=dict)
    where: str = ""


@dataclass(slots=True)
class PeerItem:
    """One case's answer in one run, with the tool's scores.

    Attributes:
        case_key: The :class:`PeerCase` it answers.
        output: The answer (``None`` when the call errored).
        error: The target-side error (the case is then *errored*), or ``None``.
        scores: The tool's scores (an item with none is *unscored*, never a pass).
        latency_ms: The tool's latency in milliseconds, if recorded.
        tokens_in, tokens_out: Tokens of the target's call(s), if recorded.
        cost: Cost in US dollars, if recorded.
        model: The model that answered, if recorded.
        started: Unix time in seconds, if recorded.
        original_id: The tool's id of this result row.
        metadata: The tool's other per-item data kept with the result.
    """

    case_key: str
    output: Any = None
    error: str | None = None
    scores: list[PeerScore] = field(default_factory=list)
    latency_ms: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    model: str | None = None
    started: float | None = None
    original_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PeerRun:
    """One run of the file (promptfoo: a provider x prompt; OpenAI: an eval run; Braintrust: an
    experiment).

    Attributes:
        key: The run's key within the file (part of the unique rule: file hash + set + key).
        name: A name for people (the run's own name, else the provider and prompt label).
        target_id: The Evalsite target id it is stored under (``promptfoo:<provider>``...).
        variant: The variant label (the prompt label, the model...).
        model: The model evaluated (``""`` when unknown).
        started, finished: Unix times in seconds, when recorded.
        status: ``finished``, or ``failed`` when the tool recorded the run as failed/cancelled.
        error: Why it failed (``""``).
        items: One per answered case.
        original_ids: The tool's ids (eval id, run id, prompt id, provider...).
        aggregates: The tool's own run-level figures (named-metric totals, result counts, usage).
        not_run: Case keys of the data source the run has no output for (OpenAI: output items
            missing from the export).
    """

    key: str
    name: str
    target_id: str
    variant: str
    model: str = ""
    started: float | None = None
    finished: float | None = None
    status: str = "finished"
    error: str = ""
    items: list[PeerItem] = field(default_factory=list)
    original_ids: dict[str, Any] = field(default_factory=dict)
    aggregates: dict[str, Any] = field(default_factory=dict)
    not_run: list[str] = field(default_factory=list)

    def imported_only(self) -> list[str]:
        """Names of the scores with no Evalsite equivalent (scored, not re-runnable), sorted."""
        return sorted({s.name for item in self.items for s in item.scores if s.equivalent is None})

    def equivalents(self) -> dict[str, dict[str, Any]]:
        """Score name -> the Evalsite scorer spec that checks the same thing (first seen)."""
        found: dict[str, dict[str, Any]] = {}
        for item in self.items:
            for score in item.scores:
                if score.equivalent is not None:
                    found.setdefault(score.name, score.equivalent)
        return found


@dataclass(slots=True)
class PeerFile:
    """What one file (or folder) holds.

    Attributes:
        path: As the caller named it.
        sha256: SHA-256 of the bytes (a folder: of its files' names and bytes, in name order).
        tool: ``promptfoo``, ``openai_evals`` or ``braintrust``.
        tool_version: The tool's version the file records (``""`` when it records none).
        file_format: The format read with its version (``promptfoo results v3 (json)``...).
        set_name: The default set name (from the file's eval / description / experiment).
        cases: Every case the file defines, in file order, each key once.
        runs: The runs.
    """

    path: str
    sha256: str
    tool: str
    tool_version: str
    file_format: str
    set_name: str
    cases: list[PeerCase] = field(default_factory=list)
    runs: list[PeerRun] = field(default_factory=list)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes; of a folder's ``*.json`` / ``*.jsonl`` files (name + bytes,
    name order) for a folder."""
    digest = hashlib.sha256()
    if path.is_dir():
        for member in sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl")):
            digest.update(member.name.encode() + b"\0")
            digest.update(member.read_bytes())
            digest.update(b"\0")
        return digest.hexdigest()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_json(path: Path, display: str) -> Any:
    """A whole JSON file, refusing NaN/Infinity, as a :class:`CaseBankError` with line and column."""
    text = _text(path, display)
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise CaseBankError(f"not valid JSON: {exc.msg}", path=display, line=exc.lineno, column=exc.colno) from None
    except ValueError as exc:
        raise CaseBankError(str(exc), path=display) from None
    except RecursionError:
        raise CaseBankError("nested too deeply to read", path=display) from None


def load_jsonl(path: Path, display: str) -> list[tuple[int, Any]]:
    """``(line, value)`` for every non-blank line of a JSONL file."""
    rows: list[tuple[int, Any]] = []
    for number, line in enumerate(_text(path, display).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line, parse_constant=_no_constant)))
        except json.JSONDecodeError as exc:
            raise CaseBankError(f"not valid JSON: {exc.msg}", path=display, line=number, column=exc.colno) from None
        except ValueError as exc:
            raise CaseBankError(str(exc), path=display, line=number) from None
    return rows


def _text(path: Path, display: str) -> str:
    """The file's text, refused over :data:`~evalcore.loaders.limits.MAX_INFLATED_MB` (read whole)."""
    try:
        limit = MAX_INFLATED_MB.value()
        size = path.stat().st_size
        if size > limit * 1024 * 1024:
            raise CaseBankError(
                f"{size / 1048576:.0f} MiB is more than the {limit} MiB a results file read whole may hold: "
                f"{MAX_INFLATED_MB.how_to_raise()}",
                path=display,
            )
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CaseBankError(f"not UTF-8 text (byte {exc.start})", path=display) from None
    except OSError as exc:
        raise CaseBankError(f"cannot read: {exc.strerror}", path=display) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


# --- helpers the readers share ---------------------------------------------------------------


def obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else ``{}`` (an optional object the file may lack)."""
    return value if isinstance(value, dict) else {}


def arr(value: Any) -> list[Any]:
    """``value`` when it is a JSON list, else ``[]``."""
    return value if isinstance(value, list) else []


def stable_key(value: Any, *, path: str, where: str, line: int | None = None) -> str:
    """The ``auto-`` case id of an input (:func:`~evalcore.loaders._records.auto_case_id`), or a
    :class:`CaseBankError` naming where a lone UTF-16 surrogate sits in it (text no database can
    store, nor can it be hashed)."""
    found = surrogate_at(value)
    if found is not None:
        raise CaseBankError(
            f"a lone UTF-16 surrogate (U+{ord(found[1]):04X}): text no database can store",
            path=path,
            line=line,
            field=f"{where}{found[0]}",
        )
    return auto_case_id(value)


def need(
    value: Any, kind: type | tuple[type, ...], *, path: str, where: str, what: str, line: int | None = None
) -> Any:
    """``value`` when it is a ``kind``, else a :class:`CaseBankError` naming ``where``."""
    if isinstance(value, kind) and not (isinstance(value, bool) and bool not in _tuple(kind)):
        return value
    got = "missing" if value is None else f"a {type(value).__name__}"
    raise CaseBankError(f"expected {what}, got {got}", path=path, line=line, field=where)


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def number(value: Any) -> float | None:
    """A finite number as float, else ``None`` (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def count(value: Any) -> int | None:
    """A non-negative whole number, else ``None``."""
    found = number(value)
    return int(found) if found is not None and found >= 0 and found == int(found) else None


def unit_score(value: Any) -> tuple[float | None, dict[str, Any]]:
    """A tool's score as Evalsite's ``value`` in 0..1 plus what does not fit (kept raw)."""
    found = number(value)
    if found is None:
        return None, ({} if value is None else {"score": value})
    if 0.0 <= found <= 1.0:
        return found, {}
    return None, {"score": found}


def unique_name(name: str, seen: dict[str, int]) -> str:
    """``name``, then ``name#2``, ``name#3``... for repeats within one item."""
    seen[name] = seen.get(name, 0) + 1
    return name if seen[name] == 1 else f"{name}#{seen[name]}"
