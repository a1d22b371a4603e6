"""CSV records: see :func:`convert_cell` for how cells become values."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections.abc import Callable, Container
from typing import Any

from evalcore.loaders._io import SourceFile, decode_whole
from evalcore.loaders._json import LineLocator, last_content_position
from evalcore.loaders._jsonl import Records
from evalcore.loaders.errors import TOO_DEEP, CaseBankError
from evalcore.strictjson import STRICT, NonFiniteNumber, locate_non_finite, non_finite_reason

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}
ABSENT_CELL: Any = object()
"""Returned by :func:`convert_cell` for an empty cell: the field is treated as absent."""

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula (OWASP, "CSV Injection")."""


def neutralise_formula(cell: str) -> str:
    """A CSV cell a spreadsheet will not run as a formula, undone exactly by :func:`restore_formula`.

    The rule (OWASP's, made reversible): a cell that, after any leading ``'``, starts with one of
    :data:`FORMULA_STARTS` gets one more ``'`` in front (``=1+1`` -> ``'=1+1``, ``'=1+1`` ->
    ``''=1+1``), except a cell that is wholly a JSON number (``-2``, ``-0.5``, ``-1e-05``): a
    spreadsheet reads that as a number, never a formula, so numbers stay numbers.
    """
    body = cell.lstrip("'")
    if body[:1] in FORMULA_STARTS and body and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


def restore_formula(cell: str) -> str:
    """The cell before :func:`neutralise_formula`: one leading ``'`` dropped from a cell that,
    after its leading ``'``, starts with one of :data:`FORMULA_STARTS`; any other cell unchanged."""
    if cell[:1] == "'":
        body = cell.lstrip("'")
        if body and body[0] in FORMULA_STARTS:
            return cell[1:]
    return cell


def convert_cell(cell: str) -> Any:
    """Turn one CSV cell into a value. The rule, applied to the cell with surrounding spaces trimmed:

    * empty -> absent (as if the column were not there; write ``null`` for a real null);
    * starts with ``{`` or ``[`` and parses as JSON -> that object / array (if it does not parse,
      the cell stays a string: ``[1] Smith et al.`` is text);
    * starts with ``"`` and is one JSON string -> that string (how an export writes a text that
      would otherwise read as something else: ``""`` is the empty string, ``"42"`` the text 42);
    * exactly ``true``, ``false`` or ``null`` -> the JSON literal;
    * a JSON number that writes back to the identical text -> the number, so ``42``, ``-7`` and
      ``3.14`` become numbers but ``007``, ``1e5``, ``1.50`` and ``+1`` stay strings (no digits are lost);
    * anything else -> the cell unchanged (not trimmed).

    Ids are never converted (the CSV reader keeps the id and split columns as text).

    Raises:
        NonFiniteNumber: When a JSON object/array cell holds NaN or Infinity.
    """
    trimmed = cell.strip()
    if not trimmed:
        return ABSENT_CELL
    first = trimmed[0]
    if first == "{" or first == "[":
        try:
            return STRICT.decode(trimmed)
        except json.JSONDecodeError:
            return cell
    if first == '"':
        try:
            decoded = STRICT.decode(trimmed)
        except json.JSONDecodeError:
            return cell
        return decoded if isinstance(decoded, str) else cell
    if trimmed in _LITERALS:
        return _LITERALS[trimmed]
    if (first == "-" or first.isdigit()) and _NUMBER.fullmatch(trimmed):
        number = json.loads(trimmed)
        if json.dumps(number) == trimmed:
            return number
    return cell


def _raise_csv_field_limit() -> None:
    # The csv module refuses cells over 128 KiB by default; long contexts in case banks exceed it.
    # The limit is process-wide, so it is only ever raised, never lowered.
    wanted = min(sys.maxsize, 2**31 - 1)
    if csv.field_size_limit() < wanted:
        csv.field_size_limit(wanted)


def _csv_truncated(source: SourceFile, text: str, row_line: int) -> CaseBankError:
    """The error for a CSV file that ends inside a quoted cell (the csv module's "unexpected end of data")."""
    at = LineLocator(text)
    index = 0 if row_line <= 1 else at.newlines[row_line - 2] + 1
    opened: int | None = None
    field_start = True
    while index < len(text):
        char = text[index]
        if opened is not None:
            if char == '"':
                if text.startswith('""', index):
                    index += 1
                else:
                    opened = None
        elif char == '"' and field_start:
            opened = index
        field_start = opened is None and char in ",\r\n"
        index += 1
    end = last_content_position(text)
    line, column = (at.line(end - 1), at.column(end - 1) + 1) if end else (1, 1)
    where = f" opened at line {at.line(opened)}, column {at.column(opened)}" if opened is not None else ""
    return source.error(
        f"file ends early (truncated) at line {line}, column {column}, inside a quoted cell{where}: "
        'the closing quote is missing (or that quote is stray: inside a quoted cell write "" for a quote)',
        line=line,
        column=column,
    )


def csv_header(source: SourceFile) -> list[str]:
    """The column names of a CSV file's header row (its first non-blank row), trimmed; ``[]`` when empty.

    Raises:
        CaseBankError: The file is not UTF-8 (a malformed header is reported by :func:`csv_records`).
    """
    text = decode_whole(source, source.read_bytes())
    try:
        for row in csv.reader(io.StringIO(text, newline="")):
            if any(cell.strip() for cell in row):
                return [name.strip() for name in row]
    except csv.Error:
        return []
    return []


def csv_records(
    source: SourceFile,
    text_columns: Container[str],
    on_header: Callable[[dict[str, int]], None],
    *,
    formula_escapes: bool = False,
) -> Records:
    """Read a CSV file with a header row (UTF-8, BOM dropped, CRLF or LF).

    Args:
        source: The file.
        text_columns: Columns kept as raw text, never converted (the id and split columns; every
            column of a promptfoo test file, whose cells are all text).
        on_header: Called once with ``{column name: 1-based position}`` after the header is read.
        formula_escapes: Undo the ``'`` an export puts before a formula-looking cell
            (:func:`restore_formula`) in every cell before anything else; ``False`` for files
            whose own tool does not (promptfoo).

    Yields:
        ``(line of the row's first physical line, {column: value})`` with empty cells left out.

    Raises:
        CaseBankError: On a malformed CSV (unclosed quote...), a duplicate or empty column name
            with data under it, a row with more or fewer cells than the header, or NaN/Infinity in a JSON cell.
    """
    _raise_csv_field_limit()
    text = decode_whole(source, source.read_bytes())
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if str(exc) == "unexpected end of data":
                raise _csv_truncated(source, text, start) from None
            raise source.error(f"invalid CSV: {exc}", line=start) from None
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [name.strip() for name in row]
            positions: dict[str, int] = {}
            for position, name in enumerate(header, 1):
                if name and name in positions:
                    raise source.error(
                        f"duplicate column name (also column {positions[name]})",
                        line=start,
                        field=name,
                        column=position,
                    )
                if name:
                    positions[name] = position
            on_header(positions)
            continue
        if len(row) > len(header):
            raise source.error(
                f"row has {len(row)} cells but the header has {len(header)} columns", line=start, column=len(header) + 1
            )
        if len(row) < len(header):
            # a short row is a lost delimiter or a cut line, not an empty value: an empty cell is
            # written as ",," (e.g. "a,x," for an empty third column)
            missing = ", ".join(repr(name) for name in header[len(row) :] if name)
            raise source.error(
                f"row has {len(row)} cells but the header has {len(header)} columns "
                f"(no cell for {missing}; write an empty cell as ',,')",
                line=start,
                column=len(row) + 1,
            )
        record: dict[str, Any] = {}
        for position, (name, cell) in enumerate(zip(header, row, strict=False), 1):
            if formula_escapes:
                cell = restore_formula(cell)
            if not name:
                if cell.strip():
                    raise source.error("cell under a column with no name in the header", line=start, column=position)
                continue
            if name in text_columns:
                if cell.strip():
                    record[name] = cell
                continue
            try:
                value = convert_cell(cell)
            except NonFiniteNumber:
                path, token = locate_non_finite(cell.strip())
                field = f"{name}{'.' + path if path and not path.startswith('[') else path or ''}"
                raise source.error(non_finite_reason(token), line=start, field=field, column=position) from None
            except RecursionError:
                raise source.error(TOO_DEEP, line=start, field=name, column=position) from None
            if value is not ABSENT_CELL:
                record[name] = value
        yield start, record
