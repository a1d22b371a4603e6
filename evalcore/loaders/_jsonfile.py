"""JSON records: an array of objects, or an object whose ``"cases"`` key holds that array (or
``"data"``, as a Langfuse API export of dataset items has it).

A ``.json`` file that is really JSON Lines (several top-level objects, as some public datasets
ship) is read as JSONL.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evalcore.loaders._io import SourceFile, decode_whole
from evalcore.loaders._json import LineLocator, decode_error_reason, json_type, last_content_position, unfinished_value
from evalcore.loaders._jsonl import Records, iter_jsonl_records
from evalcore.loaders.errors import TOO_DEEP, CaseBankError
from evalcore.strictjson import STRICT, DuplicateKey, NonFiniteNumber, locate_non_finite, non_finite_reason

_WS = re.compile(r"[ \t\n\r]*")


def _ws_end(text: str, index: int) -> int:
    """The index of the first non-whitespace character at or after ``index``."""
    match = _WS.match(text, index)
    return match.end() if match else index


def json_records(source: SourceFile) -> tuple[str, Records]:
    """Read a ``.json`` file: ``(format actually found, records)``.

    Raises:
        CaseBankError: On invalid JSON (with line and column), NaN/Infinity, a top level that is
            neither an array nor an object with a ``cases`` array, or an element that is not an object.
    """
    text = decode_whole(source, source.read_bytes())
    at = LineLocator(text)
    index = _ws_end(text, 0)
    first = text[index : index + 1]
    if first == "[":
        return "json", iter(_scan_array(source, text, index, at))
    if first == "{":
        value_end = _skip_value(source, text, index, at, field=None)
        rest = _ws_end(text, value_end)
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


def _truncated(source: SourceFile, text: str, at: LineLocator, what: str, case_line: int | None) -> CaseBankError:
    """The error for a document that is a valid beginning of JSON but ends too early."""
    end = last_content_position(text)
    line, column = (at.line(end - 1), at.column(end - 1) + 1) if end else (1, 1)
    detail = f"; the case starting on line {case_line} is incomplete" if case_line is not None else ""
    return source.error(
        f"file ends early (truncated) at line {line}, column {column}, {what}{detail}", line=line, column=column
    )


def _json_error(
    source: SourceFile, text: str, at: LineLocator, index: int, exc: json.JSONDecodeError, case_line: int | None
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
    return _json_error(source, text, LineLocator(text), _ws_end(text, 0), exc, None)


def _decode_at(
    source: SourceFile, text: str, index: int, at: LineLocator, field: str | None, case_line: int | None = None
) -> tuple[Any, int]:
    try:
        return STRICT.raw_decode(text, index)
    except NonFiniteNumber:
        path, token = locate_non_finite(text, index)
        if field is not None:
            path = f"{field}.{path}" if path else field
        raise source.error(non_finite_reason(token), line=at.line(index), field=path) from None
    except DuplicateKey as exc:
        raise source.error(f"{exc.msg}: say it once", line=at.line(index), field=exc.key) from None
    except json.JSONDecodeError as exc:
        raise _json_error(source, text, at, index, exc, case_line) from None
    except RecursionError:
        raise source.error(TOO_DEEP, line=at.line(index), field=field) from None


def _skip_value(source: SourceFile, text: str, index: int, at: LineLocator, field: str | None) -> int:
    # Checks the first top-level value is well-formed JSON; its content is scanned again later
    # element by element so every case gets its own line number.
    try:
        return STRICT.raw_decode(text, index)[1]
    except NonFiniteNumber:
        return index + 1  # located precisely by the element scan
    except DuplicateKey as exc:
        raise source.error(f"{exc.msg}: say it once", line=at.line(index), field=exc.key) from None
    except RecursionError:
        raise source.error(TOO_DEEP, line=at.line(index), field=field) from None
    except json.JSONDecodeError as exc:
        if unfinished_value(text, index) is not None:
            return len(text)  # truncated: the element scan says where, and which case
        raise _json_error(source, text, at, index, exc, None) from None


def _syntax_error(
    source: SourceFile, at: LineLocator, index: int, reason: str, text: str = "", open_what: str = ""
) -> CaseBankError:
    """A syntax error between values; at the end of the text it is a truncated file instead."""
    if text and open_what and _ws_end(text, index) >= len(text):
        return _truncated(source, text, at, open_what, None)
    return source.error(f"invalid JSON: {reason}", line=at.line(index), column=at.column(index))


def _scan_elements(
    source: SourceFile, text: str, index: int, at: LineLocator
) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """Decode the array at ``text[index] == "["`` element by element, keeping each element's line.

    Returns:
        ``(records, index just past the closing bracket)``.
    """
    records: list[tuple[int, dict[str, Any]]] = []
    index = _ws_end(text, index + 1)
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
        index = _ws_end(text, index)
        sep = text[index : index + 1]
        if sep == "]":
            return records, index + 1
        if sep != ",":
            raise _syntax_error(source, at, index, "expected ',' or ']' after a case", text, "inside an array")
        index = _ws_end(text, index + 1)
        if index >= len(text):
            raise _truncated(source, text, at, "inside an array, after a ','", None)
        if text.startswith("]", index):
            raise _syntax_error(source, at, index, "trailing comma before ']'")


def _expect_end(source: SourceFile, text: str, index: int, at: LineLocator) -> None:
    index = _ws_end(text, index)
    if index < len(text):
        raise _syntax_error(source, at, index, "extra data after the top-level value")


def _scan_array(source: SourceFile, text: str, index: int, at: LineLocator) -> list[tuple[int, dict[str, Any]]]:
    records, end = _scan_elements(source, text, index, at)
    _expect_end(source, text, end, at)
    return records


def _scan_wrapper(source: SourceFile, text: str, index: int, at: LineLocator) -> list[tuple[int, dict[str, Any]]]:
    """Decode ``{"cases": [...], ...}`` (or ``{"data": [...]}``): other keys are checked as JSON and ignored."""
    records: list[tuple[int, dict[str, Any]]] | None = None
    index = _ws_end(text, index + 1)
    while not text.startswith("}", index):
        if not text.startswith('"', index):
            raise _syntax_error(
                source, at, index, "expected a property name in double quotes", text, "inside an object"
            )
        key, index = _decode_at(source, text, index, at, field=None)
        index = _ws_end(text, index)
        if not text.startswith(":", index):
            raise _syntax_error(source, at, index, "expected ':' after a property name", text, "inside an object")
        index = _ws_end(text, index + 1)
        if key in ("cases", "data") and records is None and text.startswith("[", index):
            records, index = _scan_elements(source, text, index, at)
        else:
            _, index = _decode_at(source, text, index, at, field=key)
        index = _ws_end(text, index)
        if text.startswith(",", index):
            index = _ws_end(text, index + 1)
        elif not text.startswith("}", index):
            raise _syntax_error(source, at, index, "expected ',' or '}' after a value", text, "inside an object")
    _expect_end(source, text, index + 1, at)
    if records is None:
        raise source.error(
            "a JSON object file must hold its cases in a 'cases' array (or make the file a JSON array)", line=1
        )
    return records
