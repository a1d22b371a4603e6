"""Record readers for each file format; each yields ``(line number, record dict)``.

* JSONL: one JSON object per line, streamed; blank and whitespace-only lines are skipped.
* JSON: an array of objects, or an object whose ``"cases"`` key holds that array. A ``.json``
  file that is really JSON Lines (several top-level objects, as some public datasets ship) is
  read as JSONL.
* CSV: see :func:`convert_cell` for how cells become values.
"""

from __future__ import annotations

import bisect
import csv
import io
import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from evalcore.loaders._io import UTF8_BOM, SourceFile, decode_whole, utf8_error
from evalcore.loaders._json import (
    STRICT,
    NonFiniteNumber,
    decode_error_reason,
    json_type,
    last_content_position,
    locate_non_finite,
    non_finite_reason,
    unfinished_value,
)
from evalcore.loaders.errors import CaseBankError

Records = Iterator[tuple[int, dict[str, Any]]]

_WS = re.compile(r"[ \t\n\r]*")


def iter_jsonl_records(source: SourceFile) -> Records:
    """Stream a JSONL file's records, one line at a time (memory stays flat for big files).

    Raises:
        CaseBankError: On a line that is not UTF-8, not JSON, holds NaN/Infinity, or is not an object.
    """
    decode = STRICT.decode
    with source.open() as stream:
        offset = 0
        for line_no, line_bytes in enumerate(stream, 1):
            start = offset
            offset += len(line_bytes)
            if line_no == 1 and line_bytes.startswith(UTF8_BOM):
                line_bytes = line_bytes[len(UTF8_BOM) :]
                start += len(UTF8_BOM)
            stripped = line_bytes.strip()
            if not stripped:
                continue
            lead = len(line_bytes) - len(line_bytes.lstrip())
            try:
                text = stripped.decode("utf-8")
            except UnicodeDecodeError as exc:
                relative = UnicodeDecodeError("utf-8", line_bytes, exc.start + lead, exc.end + lead, exc.reason)
                more = stream.read(1 << 16)  # a bigger sample for the encoding detector
                raise utf8_error(source, line_bytes, line_no, start, relative, more) from None
            try:
                record = decode(text)
            except NonFiniteNumber:
                field, token = locate_non_finite(text)
                raise source.error(non_finite_reason(token), line=line_no, field=field) from None
            except json.JSONDecodeError as exc:
                raise _jsonl_syntax_error(source, stream, text, exc, line_no, lead) from None
            if type(record) is not dict:
                raise source.error(f"each line must be a JSON object, got {json_type(record)}", line=line_no)
            yield line_no, record


def _rest_is_blank(stream: BinaryIO) -> bool:
    """True when nothing but whitespace is left in ``stream`` (read in chunks, stops early)."""
    while True:
        chunk = stream.read(1 << 16)
        if not chunk:
            return True
        if chunk.strip():
            return False


def _jsonl_syntax_error(
    source: SourceFile, stream: BinaryIO, text: str, exc: json.JSONDecodeError, line_no: int, lead: int
) -> CaseBankError:
    """The error for a JSONL line that is not JSON: truncated file, a line cut short, or a syntax error."""
    what = unfinished_value(text)
    if what is not None:
        column = lead + last_content_position(text) + 1
        if _rest_is_blank(stream):
            return source.error(
                f"file ends early (truncated) at line {line_no}, column {column}, {what}: "
                "the last record is incomplete",
                line=line_no,
                column=column,
            )
        return source.error(
            f"invalid JSON: the line ends {what} (JSONL needs each JSON object whole on one line; "
            "a record spread over several lines is a .json file, or a line cut short)",
            line=line_no,
            column=column,
        )
    hint = " (JSONL needs exactly one JSON object per line)" if exc.msg == "Extra data" else ""
    return source.error(
        f"invalid JSON: {decode_error_reason(exc, column_shift=lead)}{hint}",
        line=line_no,
        column=exc.colno + (lead if exc.lineno == 1 else 0),
    )


class _Locator:
    """Maps a character index in a text to its 1-based line and column."""

    def __init__(self, text: str) -> None:
        self.newlines = [match.start() for match in re.finditer("\n", text)]

    def line(self, index: int) -> int:
        return bisect.bisect_left(self.newlines, index) + 1

    def column(self, index: int) -> int:
        line = self.line(index)
        return index - (self.newlines[line - 2] + 1 if line > 1 else 0) + 1


def json_records(source: SourceFile) -> tuple[str, Records]:
    """Read a ``.json`` file: ``(format actually found, records)``.

    Raises:
        CaseBankError: On invalid JSON (with line and column), NaN/Infinity, a top level that is
            neither an array nor an object with a ``cases`` array, or an element that is not an object.
    """
    text = decode_whole(source, source.read_bytes())
    at = _Locator(text)
    index = _WS.match(text).end()
    first = text[index : index + 1]
    if first == "[":
        return "json", iter(_scan_array(source, text, index, at))
    if first == "{":
        value_end = _skip_value(source, text, index, at, field=None)
        rest = _WS.match(text, value_end).end()
        if rest < len(text) and text[rest] == "{":
            return "jsonl", iter_jsonl_records(source)
        return "json", iter(_scan_wrapper(source, text, index, at))
    if not first:
        return "json", iter(())
    raise source.error(
        "expected a JSON array of case objects (or an object with a 'cases' array)",
        line=at.line(index),
        column=at.column(index),
    )


def _truncated(source: SourceFile, text: str, at: _Locator, what: str, case_line: int | None) -> CaseBankError:
    """The error for a document that is a valid beginning of JSON but ends too early."""
    end = last_content_position(text)
    line, column = (at.line(end - 1), at.column(end - 1) + 1) if end else (1, 1)
    detail = f"; the case starting on line {case_line} is incomplete" if case_line is not None else ""
    return source.error(
        f"file ends early (truncated) at line {line}, column {column}, {what}{detail}", line=line, column=column
    )


def _json_error(
    source: SourceFile, text: str, at: _Locator, index: int, exc: json.JSONDecodeError, case_line: int | None
) -> CaseBankError:
    what = unfinished_value(text, index)
    if what is not None:
        return _truncated(source, text, at, what, case_line)
    return source.error(f"invalid JSON: {decode_error_reason(exc)}", line=exc.lineno, column=exc.colno)


def json_syntax_error(source: SourceFile, text: str, exc: json.JSONDecodeError) -> CaseBankError:
    """The :class:`CaseBankError` for a whole JSON document that does not parse.

    A document that is a valid beginning of JSON but ends too early is reported as truncated
    (``file ends early (truncated) at line L, column C, inside a string``); any other error gets
    the decoder's full message with its line and column.
    """
    return _json_error(source, text, _Locator(text), _WS.match(text).end(), exc, None)


def _decode_at(
    source: SourceFile, text: str, index: int, at: _Locator, field: str | None, case_line: int | None = None
) -> tuple[Any, int]:
    try:
        return STRICT.raw_decode(text, index)
    except NonFiniteNumber:
        path, token = locate_non_finite(text, index)
        if field is not None:
            path = f"{field}.{path}" if path else field
        raise source.error(non_finite_reason(token), line=at.line(index), field=path) from None
    except json.JSONDecodeError as exc:
        raise _json_error(source, text, at, index, exc, case_line) from None


def _skip_value(source: SourceFile, text: str, index: int, at: _Locator, field: str | None) -> int:
    # Checks the first top-level value is well-formed JSON; its content is scanned again later
    # element by element so every case gets its own line number.
    try:
        return STRICT.raw_decode(text, index)[1]
    except NonFiniteNumber:
        return index + 1  # located precisely by the element scan
    except json.JSONDecodeError as exc:
        if unfinished_value(text, index) is not None:
            return len(text)  # truncated: the element scan says where, and which case
        raise _json_error(source, text, at, index, exc, None) from None


def _syntax_error(
    source: SourceFile, at: _Locator, index: int, reason: str, text: str = "", open_what: str = ""
) -> CaseBankError:
    """A syntax error between values; at the end of the text it is a truncated file instead."""
    if text and open_what and _WS.match(text, index).end() >= len(text):
        return _truncated(source, text, at, open_what, None)
    return source.error(f"invalid JSON: {reason}", line=at.line(index), column=at.column(index))


def _scan_elements(
    source: SourceFile, text: str, index: int, at: _Locator
) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """Decode the array at ``text[index] == "["`` element by element, keeping each element's line.

    Returns:
        ``(records, index just past the closing bracket)``.
    """
    records: list[tuple[int, dict[str, Any]]] = []
    index = _WS.match(text, index + 1).end()
    if text.startswith("]", index):
        return records, index + 1
    if index >= len(text):
        raise _truncated(source, text, at, "inside an array", None)
    while True:
        start = index
        value, index = _decode_at(source, text, start, at, field=None, case_line=at.line(start))
        if type(value) is not dict:
            raise source.error(f"each case must be a JSON object, got {json_type(value)}", line=at.line(start))
        records.append((at.line(start), value))
        index = _WS.match(text, index).end()
        sep = text[index : index + 1]
        if sep == "]":
            return records, index + 1
        if sep != ",":
            raise _syntax_error(source, at, index, "expected ',' or ']' after a case", text, "inside an array")
        index = _WS.match(text, index + 1).end()
        if index >= len(text):
            raise _truncated(source, text, at, "inside an array, after a ','", None)
        if text.startswith("]", index):
            raise _syntax_error(source, at, index, "trailing comma before ']'")


def _expect_end(source: SourceFile, text: str, index: int, at: _Locator) -> None:
    index = _WS.match(text, index).end()
    if index < len(text):
        raise _syntax_error(source, at, index, "extra data after the top-level value")


def _scan_array(source: SourceFile, text: str, index: int, at: _Locator) -> list[tuple[int, dict[str, Any]]]:
    records, end = _scan_elements(source, text, index, at)
    _expect_end(source, text, end, at)
    return records


def _scan_wrapper(source: SourceFile, text: str, index: int, at: _Locator) -> list[tuple[int, dict[str, Any]]]:
    """Decode ``{"cases": [...], ...}``: other keys are checked as JSON and otherwise ignored."""
    records: list[tuple[int, dict[str, Any]]] | None = None
    index = _WS.match(text, index + 1).end()
    while not text.startswith("}", index):
        if not text.startswith('"', index):
            raise _syntax_error(
                source, at, index, "expected a property name in double quotes", text, "inside an object"
            )
        key, index = _decode_at(source, text, index, at, field=None)
        index = _WS.match(text, index).end()
        if not text.startswith(":", index):
            raise _syntax_error(source, at, index, "expected ':' after a property name", text, "inside an object")
        index = _WS.match(text, index + 1).end()
        if key == "cases" and text.startswith("[", index):
            records, index = _scan_elements(source, text, index, at)
        else:
            _, index = _decode_at(source, text, index, at, field=key)
        index = _WS.match(text, index).end()
        if text.startswith(",", index):
            index = _WS.match(text, index + 1).end()
        elif not text.startswith("}", index):
            raise _syntax_error(source, at, index, "expected ',' or '}' after a value", text, "inside an object")
    _expect_end(source, text, index + 1, at)
    if records is None:
        raise source.error(
            "a JSON object file must hold its cases in a 'cases' array (or make the file a JSON array)", line=1
        )
    return records


_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}
ABSENT_CELL: Any = object()
"""Returned by :func:`convert_cell` for an empty cell: the field is treated as absent."""


def convert_cell(cell: str) -> Any:
    """Turn one CSV cell into a value. The rule, applied to the cell with surrounding spaces trimmed:

    * empty -> absent (as if the column were not there; write ``null`` for a real null);
    * starts with ``{`` or ``[`` and parses as JSON -> that object / array (if it does not parse,
      the cell stays a string: ``[1] Smith et al.`` is text);
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
    at = _Locator(text)
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


def csv_records(
    source: SourceFile, text_columns: frozenset[str], on_header: Callable[[dict[str, int]], None]
) -> Records:
    """Read a CSV file with a header row (UTF-8, BOM dropped, CRLF or LF).

    Args:
        source: The file.
        text_columns: Columns kept as raw text, never converted (the id and split columns).
        on_header: Called once with ``{column name: 1-based position}`` after the header is read.

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
            if value is not ABSENT_CELL:
                record[name] = value
        yield start, record
