"""Turning one parsed record (a dict from any format) into a validated :class:`Case`.

Field mapping: ``mapping`` maps a case field to the name it has in the file, e.g.
``{"input": "question", "expected": "answer", "id": "qid"}``. ``input``, ``expected`` and
``metadata`` may name several columns joined by ``+`` (``input=language+body``): the case field
becomes an object holding those columns (only the ones present in the record). A field name that
really contains ``+`` is taken literally when the record has it. Every field of the record that no
case field uses is kept in ``metadata`` under its own name.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evalcore.conversations import (
    RECORD_KEYS,
    SCENARIO_RECORD_KEYS,
    ConversationError,
    check_case_shape,
    record_to_fields,
    scenario_record_input,
)
from evalcore.jsonvalue import MISSING
from evalcore.loaders._io import SourceFile
from evalcore.loaders._json import canonical_json, json_type
from evalcore.loaders.errors import CaseBankError, CaseBankErrors
from evalcore.loaders.limits import MAX_DEPTH, nested_deeper_than, too_deep_reason
from evalcore.splits import _thresholds, _unit_hash
from evalcore.types import SPLITS, Case

CASE_FIELDS: tuple[str, ...] = ("id", "input", "expected", "tags", "split", "metadata")
"""The fields of a canonical case-bank record."""

_MULTI_OK = frozenset({"input", "expected", "metadata"})
AUTO_ID_PREFIX = "auto-"
_ABSENT: Any = object()


def check_mapping(mapping: Mapping[str, str] | None) -> dict[str, str]:
    """Validate a field mapping (see the module docstring) and return it as a plain dict.

    Raises:
        ValueError: On an unknown case field, an empty column name, ``+`` on a field that
            cannot hold an object, or one column used for two fields.
    """
    if not mapping:
        return {}
    checked: dict[str, str] = {}
    owner: dict[str, str] = {}
    for field, column in mapping.items():
        if field not in CASE_FIELDS:
            raise ValueError(f"unknown case field {field!r} in mapping; fields are: {', '.join(CASE_FIELDS)}")
        if not isinstance(column, str) or not column.strip():
            raise ValueError(f"mapping for {field!r} needs a column name, got {column!r}")
        parts = [part.strip() for part in column.split("+")] if "+" in column else [column.strip()]
        if len(parts) > 1 and field not in _MULTI_OK:
            raise ValueError(f"mapping {field}={column}: only input, expected and metadata can join several columns")
        if any(not part for part in parts):
            raise ValueError(f"mapping {field}={column}: empty column name between '+' signs")
        for part in parts:
            if part in owner:
                raise ValueError(f"column {part!r} is mapped to both {owner[part]!r} and {field!r}")
            owner[part] = field
        checked[field] = "+".join(parts)
    return checked


def parse_mapping(text: str) -> dict[str, str]:
    """Parse the CLI ``--map`` value, e.g. ``"input=question,expected=answer,id=qid"``.

    Args:
        text: Comma-separated ``FIELD=COLUMN`` pairs; FIELD is one of ``id``, ``input``,
            ``expected``, ``tags``, ``split``, ``metadata``; COLUMN may join columns with ``+``
            for input / expected / metadata. Empty text gives an empty mapping.

    Returns:
        ``{field: column}``.

    Raises:
        ValueError: On a pair without ``=``, an unknown field, a field given twice, an empty
            column, or one column mapped to two fields; the message shows the expected syntax.
    """
    mapping: dict[str, str] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        field, sep, column = part.partition("=")
        field, column = field.strip(), column.strip()
        if not sep or not field or not column:
            raise ValueError(f"bad --map entry {part!r}: expected FIELD=COLUMN, e.g. input=question,expected=answer")
        if field in mapping:
            raise ValueError(f"bad --map: field {field!r} is mapped twice")
        mapping[field] = column
    try:
        return check_mapping(mapping)
    except ValueError as exc:
        raise ValueError(f"bad --map {text!r}: {exc}") from None


def auto_case_id(input_value: Any, *, occurrence: int = 1) -> str:
    """A stable id derived from a case's input alone (what ``--auto-id`` gives a case without one).

    ``"auto-"`` + the first 12 hex digits of sha256 over the canonical JSON (sorted keys, no
    spaces, UTF-8 as is) of the input. The expected value, tags and metadata play no part, so
    correcting a label keeps the id (the import reports the case as updated, and it keeps its
    split and its history). When several cases of a file share one input, the second gets the
    suffix ``-2``, the third ``-3`` (in file order).

    Args:
        input_value: The case's input (any JSON value).
        occurrence: 1 for the first case with this input, 2 for the second...
    """
    digest = hashlib.sha256(canonical_json(input_value).encode()).hexdigest()[:12]
    return f"{AUTO_ID_PREFIX}{digest}" + (f"-{occurrence}" if occurrence > 1 else "")


def legacy_auto_case_id(input_value: Any, expected: Any) -> str:
    """The auto id of the first scheme (before input-only ids): sha256 over ``{"input", "expected"}``.

    Only used to recognise cases that sets imported with that scheme already hold, so a
    re-import keeps their ids (see :attr:`LoadedCaseBank.legacy_auto_ids`).
    """
    content: dict[str, Any] = {"input": input_value}
    if expected is not MISSING:
        content["expected"] = expected
    return AUTO_ID_PREFIX + hashlib.sha256(canonical_json(content).encode()).hexdigest()[:12]


class RecordBuilder:
    """Validates records one at a time and tracks ids across a file.

    Args:
        source: The file (for error messages).
        mapping: Checked mapping from :func:`check_mapping`.
        auto_id: Derive missing ids from content (:func:`auto_case_id`) instead of failing.
        set_name: The eval set name, part of the split hash.
        ratios: Train/dev/test shares for cases whose record names no split.
        csv_mode: Accept ``tags`` as a ``;``-separated string (CSV cells are text).
        split_aliases: The file's split name -> evalsite's split, applied before validation
            (see :func:`evalcore.splits.parse_split_aliases`).
        optional: Fields whose mapping is a peer format's default (:mod:`evalcore.loaders.peers`),
            not the user's: :meth:`finish` does not require them to match a record.
        track_ids: Keep every id seen, to refuse duplicates and list the cases whose split was
            hashed (:attr:`hashed_splits`). Off, memory stays flat for a file of any size: the
            caller detects duplicates itself (a database's unique index) and reads each case's
            :attr:`split_hashed` after building it. Auto ids (numbered by the ids seen) keep
            tracking whatever this says.
        forbid_nul: Why a NUL character (U+0000) may not be in a case (``None``: it may): a
            case holding one is then a problem of its line and field.
    """

    def __init__(
        self,
        source: SourceFile,
        *,
        mapping: dict[str, str],
        auto_id: bool,
        set_name: str,
        ratios: Sequence[float],
        csv_mode: bool = False,
        split_aliases: Mapping[str, str] | None = None,
        optional: frozenset[str] = frozenset(),
        track_ids: bool = True,
        forbid_nul: str | None = None,
    ) -> None:
        self.source = source
        self.forbid_nul = forbid_nul
        self.max_depth: int | None = None  # read once, at the first case
        self.track_ids = track_ids or auto_id  # auto ids are numbered by the ids seen before
        self.built = 0
        self.split_hashed = False
        """Whether the split of the case built last came from the hash (the record gave none)."""
        self.optional = optional
        self.split_aliases = dict(split_aliases or {})
        self.auto_id = auto_id
        self.set_name = set_name
        self.train_bound, self.dev_bound = _thresholds(tuple(ratios))
        self.hashed_splits: set[str] = set()
        self.csv_mode = csv_mode
        self.mapping = mapping
        self.src = {field: mapping.get(field, field) for field in CASE_FIELDS}
        used: set[str] = set()
        for column in self.src.values():
            used.add(column)
            if "+" in column:
                used.update(column.split("+"))
        self.used = frozenset(used)
        self.columns: dict[str, int] = {}
        self.seen_ids: dict[str, int] = {}
        # auto ids: the input's id -> (digest of the expected value, line) of each case with that input
        self._auto_expected: dict[str, list[tuple[bytes | None, int]]] = {}
        self.legacy_auto_ids: dict[str, str] = {}
        """Derived id -> the id the first auto-id scheme gave the same case."""
        self._mapped_seen: set[str] = set()
        # Fast path: with no mapping, a record holding only canonical keys needs no extras pass.
        self._simple = not mapping

    def _error(self, reason: str, line: int, field: str | None) -> Exception:
        column = self.columns.get(field) if field is not None else None
        return self.source.error(reason, line=line, field=field, column=column)

    def _take(self, raw: dict[str, Any], field: str) -> Any:
        column = self.src[field]
        if column in raw:
            if field in self.mapping:
                self._mapped_seen.add(field)
            return raw[column]
        if field in self.mapping and "+" in column:
            joined = {part: raw[part] for part in column.split("+") if part in raw}
            if joined:
                self._mapped_seen.add(field)
                return joined
        return _ABSENT

    def build(self, raw: dict[str, Any], line: int) -> Case:
        """Validate one record and return its case, with split assigned.

        Args:
            raw: The record as parsed (for CSV: cells already converted, empty cells dropped).
            line: Its 1-based line number.

        Raises:
            CaseBankError: On a missing or badly typed field, an unknown split or a duplicate id.
        """
        src = self.src
        if "turns" in raw and "turns" not in self.used and (type(raw["turns"]) is list or "input" not in raw):
            both = [key for key in SCENARIO_RECORD_KEYS if key in raw and key not in self.used]
            if both:  # fixed turns and a simulated user: which one plays is not for us to guess
                raise self._error(f"a case gives either 'turns' or a {both[0]!r}, not both", line, both[0])
            raw = self._conversation_record(raw, line)  # (a "turns" value beside an input is metadata, as before)
        elif "input" not in raw and any(key in raw and key not in self.used for key in SCENARIO_RECORD_KEYS):
            raw = self._scenario_record(raw, line)
        if self._simple and raw.keys() <= self.used:
            extras = None
            case_id = raw.get("id", _ABSENT)
            input_value = raw.get("input", _ABSENT)
            expected = raw.get("expected", MISSING)
            tags = raw.get("tags")
            split = raw.get("split")
            metadata = raw.get("metadata")
        else:
            used = self.used
            extras = {key: value for key, value in raw.items() if key not in used}
            case_id = self._take(raw, "id")
            input_value = self._take(raw, "input")
            expected = self._take(raw, "expected")
            if expected is _ABSENT:
                expected = MISSING
            tags = self._take(raw, "tags")
            split = self._take(raw, "split")
            metadata = self._take(raw, "metadata")

        if input_value is _ABSENT:
            raise self._error(self._missing_input_reason(raw), line, src["input"])
        try:
            check_case_shape(input_value, expected)
        except ConversationError as exc:
            raise self._error(exc.reason, line, exc.field) from None

        # Tags, split and metadata: absent and null both mean "none given".
        if tags is None or tags is _ABSENT:
            tags = []
        elif self.csv_mode and isinstance(tags, str):
            tags = [tag.strip() for tag in tags.split(";") if tag.strip()]
        elif type(tags) is not list or not all(type(tag) is str and tag for tag in tags):
            raise self._error(
                f"tags must be an array of non-empty strings, got {json_type(tags)}: {_preview(tags)}",
                line,
                src["tags"],
            )

        if metadata is None or metadata is _ABSENT:
            metadata = {}
        elif type(metadata) is not dict:
            hint = ""
            if self.csv_mode:
                hint = " (a CSV cell holding an object must be valid JSON)"
            elif isinstance(metadata, str) and metadata.lstrip().startswith("{"):
                hint = " (it holds JSON text: write the object itself, not a string)"
            raise self._error(
                f"metadata must be a JSON object, got {json_type(metadata)}: {_preview(metadata)}{hint}",
                line,
                src["metadata"],
            )
        if extras:
            clash = next((key for key in extras if key in metadata), None)
            if clash is not None:
                raise self._error(
                    f"unmapped field {clash!r} would be kept in metadata, but metadata already has that key",
                    line,
                    clash,
                )
            metadata = {**metadata, **extras}

        case_id = self._case_id(case_id, input_value, expected, line)

        if self.split_aliases and type(split) is str and split in self.split_aliases:
            split = self.split_aliases[split]
        self.split_hashed = split is None or split is _ABSENT or split == ""
        if self.split_hashed:
            u = _unit_hash(self.set_name, case_id)
            split = "train" if u < self.train_bound else "dev" if u < self.dev_bound else "test"
            if self.track_ids:
                self.hashed_splits.add(case_id)
        elif type(split) is not str or split not in SPLITS:
            raise self._error(
                f"unknown split {split!r}; valid splits are: {', '.join(SPLITS)} "
                "(map other names with a split alias, e.g. --split-alias validation=dev)",
                line,
                src["split"],
            )

        self.built += 1
        case = Case(id=case_id, input=input_value, expected=expected, tags=tags, split=split, metadata=metadata)
        if self.forbid_nul is not None:
            self._check_nul(case, line)
        self._check_depth(case, line)
        if self.source.format != "jsonl" and not (  # a JSONL reader checked its lines: refuse_surrogates
            utf8_text(case_id)
            and utf8_text(input_value)
            and utf8_text(expected)
            and utf8_text(tags)
            and utf8_text(metadata)
        ):
            self._refuse_surrogate(case, line)
        return case

    def _conversation_record(self, raw: dict[str, Any], line: int) -> dict[str, Any]:
        """A record written turn by turn (:func:`evalcore.conversations.record_to_fields`) in the
        canonical form: its ``turns`` / ``initial_state`` / ``final_state`` become input and expected."""
        given = next((key for key in ("input", "expected") if key in raw), None)
        if given is not None:
            raise self._error(
                "a conversation record gives its turns in 'turns' (user message and expected values per "
                "turn), not in input / expected",
                line,
                given,
            )
        try:
            input_value, expected = record_to_fields(raw)
        except ConversationError as exc:
            raise self._error(exc.reason, line, exc.field) from None
        record = {key: value for key, value in raw.items() if key not in RECORD_KEYS}
        record["input"] = input_value
        if expected is not MISSING:
            record["expected"] = expected
        return record

    def _scenario_record(self, raw: dict[str, Any], line: int) -> dict[str, Any]:
        """A record giving its scenario at the top level (:func:`evalcore.conversations.scenario_record_input`):
        its ``scenario`` (or ADK's ``conversation_scenario``) and ``initial_state`` become its input."""
        try:
            input_value = scenario_record_input(raw)
        except ConversationError as exc:
            raise self._error(exc.reason, line, exc.field) from None
        record = {key: value for key, value in raw.items() if key not in (*SCENARIO_RECORD_KEYS, "initial_state")}
        record["input"] = input_value
        return record

    def _check_depth(self, case: Case, line: int) -> None:
        """Raise when a field of ``case`` nests deeper than :data:`~evalcore.loaders.limits.MAX_DEPTH`
        (storing, hashing or scoring it would otherwise recurse past Python's limit)."""
        if self.max_depth is None:
            try:
                self.max_depth = MAX_DEPTH.value()
            except ValueError as exc:
                raise self._error(str(exc), line, None) from None
        for field, value in (("input", case.input), ("expected", case.expected), ("metadata", case.metadata)):
            if nested_deeper_than(value, self.max_depth):
                column = self.src[field] if field in self.mapping else field
                raise self._error(too_deep_reason(self.max_depth), line, column)

    def _check_nul(self, case: Case, line: int) -> None:
        """Raise on the first NUL character (U+0000) in ``case``, naming its field and the path
        inside it (``input[0].content``, ``metadata.notes``)."""
        for field, value in _stored_fields(case):
            where = nul_at(value)
            if where is not None:
                column = self.src[field] if field in self.mapping else field
                inside = f" at {field}{where}" if where else ""
                raise self._error(
                    f"holds a NUL character (U+0000){inside}: {self.forbid_nul}; remove it from the file",
                    line,
                    column,
                )

    def _refuse_surrogate(self, case: Case, line: int) -> None:
        """Raise on the first surrogate code point in ``case`` (a lone ``\\ud83d`` JSON escape: half
        of a UTF-16 pair), naming its field and the path inside it. UTF-8 has no form for one, so
        no database can store it, whatever the backend."""
        for field, value in _stored_fields(case):
            found = surrogate_at(value)
            if found is not None:
                column = self.src[field] if field in self.mapping else field
                raise self._error(surrogate_reason(field, *found), line, column)

    def _missing_input_reason(self, raw: dict[str, Any]) -> str:
        if self.mapping.get("input"):
            return f"missing (the mapping reads input from {self.src['input']!r}); fields present: {_keys(raw)}"
        return f"missing; fields present: {_keys(raw)} (map a field with --map input=NAME)"

    def _case_id(self, value: Any, input_value: Any, expected: Any, line: int) -> str:
        field = self.src["id"]
        if value is _ABSENT or value is None:
            if not self.auto_id:
                raise self._error(
                    "missing case id (give every case an id, map one with --map id=NAME, "
                    "or pass --auto-id / auto_id=True to derive ids from the input)",
                    line,
                    field,
                )
            return self._auto_id(input_value, expected, line)
        if type(value) is str:
            if not value.strip():
                raise self._error("case id is empty", line, field)
            case_id = value
        elif type(value) is int:
            case_id = str(value)
        else:
            raise self._error(f"case id must be a string or an integer, got {json_type(value)}: {value!r}", line, field)
        if not self.track_ids:
            return case_id
        first = self.seen_ids.setdefault(case_id, line)
        if first != line:
            raise self._error(f"duplicate case id {case_id!r} (first seen on line {first})", line, field)
        return case_id

    def _auto_id(self, input_value: Any, expected: Any, line: int) -> str:
        """The derived id of a case without one (see :func:`auto_case_id`)."""
        base = auto_case_id(input_value)
        expected_key = hashlib.sha256(canonical_json(expected).encode()).digest() if expected is not MISSING else None
        same_input = self._auto_expected.setdefault(base, [])
        for other_expected, other_line in same_input:
            if other_expected == expected_key:
                raise self._error(
                    f"duplicate case: same input and expected value as line {other_line} (auto ids come from "
                    "the input; remove one of the two, or give the cases ids)",
                    line,
                    self.src["id"],
                )
        same_input.append((expected_key, line))
        case_id = auto_case_id(input_value, occurrence=len(same_input))
        first = self.seen_ids.setdefault(case_id, line)
        if first != line:  # an explicit id in the file that looks like an auto id
            raise self._error(f"duplicate case id {case_id!r} (first seen on line {first})", line, self.src["id"])
        self.legacy_auto_ids[case_id] = legacy_auto_case_id(input_value, expected)
        return case_id

    def finish(self) -> None:
        """Check, after the last record, that every mapped column was found at least once.

        Raises:
            CaseBankError: Naming the mapped column no record had (most likely a typo).
        """
        if not self.built:
            return
        for field, column in self.mapping.items():
            if field not in self._mapped_seen and field not in self.optional:
                raise self.source.error(
                    f"the mapping {field}={column} matched no record: no record has a field {column!r}",
                    field=column,
                )


def nul_at(value: Any, path: str = "") -> str | None:
    """The path (``""``: the value itself, ``[2].content``, ``.notes``) of the first string in a
    JSON-like ``value`` (dict keys included) that holds a NUL character, or ``None``."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "\x00" in key:
                return f"{path}.{key!r} (a key)"
            found = nul_at(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = nul_at(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def utf8_text(value: Any) -> bool:
    """Whether every string in a JSON-like ``value`` (dict keys included) has a UTF-8 form, i.e.
    holds no surrogate code point (U+D800-U+DFFF). ASCII strings answer at once (the common case
    costs a type check per value); others are encoded once."""
    kind = type(value)
    if kind is str:
        if value.isascii():
            return True
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if kind is dict:
        for key, item in value.items():
            if not (utf8_text(key) and utf8_text(item)):
                return False
    elif kind is list or kind is tuple:
        for item in value:
            if not utf8_text(item):
                return False
    return True


def surrogate_reason(field: str, where: str, char: str) -> str:
    """The problem text for a surrogate code point ``char`` at path ``where`` inside ``field``."""
    inside = f" at {field}{where}" if where else ""
    return (
        f"holds a lone UTF-16 surrogate (U+{ord(char):04X}){inside}: text UTF-8 cannot encode, so no database "
        "can store it; remove it from the file, or write the whole character (a JSON escape "
        "\\ud800-\\udbff must be followed by its low half \\udc00-\\udfff)"
    )


def refuse_surrogates(source: SourceFile, record: dict[str, Any], line: int, text: str) -> None:
    """Raise when a record parsed from JSON ``text`` holds a surrogate code point, naming its line
    and field. Only a ``\\uD800``-``\\uDFFF`` escape in the text can make one (strict UTF-8 has
    none), so a line without ``\\ud`` costs one substring search; a false alarm (a pair, or a
    literal backslash) costs a walk.

    Raises:
        CaseBankError: The first such field.
    """
    if "\\ud" not in text and "\\uD" not in text:
        return
    for key, value in record.items():
        found = surrogate_at({key: value})
        if found is not None:
            field = key if utf8_text(key) else repr(key)
            where = found[0][len(key) + 1 :] if field == key else ""
            raise source.error(surrogate_reason(field, where, found[1]), line=line, field=field)


def surrogate_at(value: Any, path: str = "") -> tuple[str, str] | None:
    """``(path, character)`` of the first surrogate code point in a JSON-like ``value`` (dict keys
    included; path as :func:`nul_at` gives it), or ``None`` when there is none."""
    if isinstance(value, str):
        if utf8_text(value):
            return None
        return path, next(char for char in value if "\ud800" <= char <= "\udfff")
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not utf8_text(key):
                char = next(char for char in key if "\ud800" <= char <= "\udfff")
                return f"{path}.{key!r} (a key)", char
            found = surrogate_at(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = surrogate_at(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _keys(raw: dict[str, Any]) -> str:
    names = list(raw)
    shown = ", ".join(repr(name) for name in names[:12])
    return shown + (", ..." if len(names) > 12 else "") if names else "none"


def _preview(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def build_collecting(build: Any, records: Iterable[tuple[int, dict[str, Any]]], max_errors: int) -> list[Case]:
    """Build every record, collecting up to ``max_errors`` problems (raised as CaseBankErrors)."""
    cases: list[Case] = []
    errors: list[CaseBankError] = []
    iterator = iter(records)
    while len(errors) < max_errors:
        try:
            line, record = next(iterator)
        except StopIteration:
            break
        except CaseBankError as exc:  # the reader itself cannot go on (syntax, truncation)
            errors.append(exc)
            break
        try:
            cases.append(build(record, line))
        except CaseBankError as exc:
            errors.append(exc)
    else:
        raise CaseBankErrors(errors, truncated=True)
    if errors:
        raise CaseBankErrors(errors) if len(errors) > 1 else errors[0]
    return cases


def _stored_fields(case: Case) -> tuple[tuple[str, Any], ...]:
    """The fields of ``case`` a database stores as text, by their column name, in file order."""
    return (
        ("id", case.id),
        ("input", case.input),
        ("expected", case.expected),
        ("tags", case.tags),
        ("metadata", case.metadata),
    )
