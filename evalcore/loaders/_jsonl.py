"""JSONL records: one JSON object per line, streamed; blank and whitespace-only lines are skipped."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import IO, Any

from evalcore.loaders._io import UTF8_BOM, SourceFile, utf8_error
from evalcore.loaders._json import decode_error_reason, json_type, last_content_position, unfinished_value
from evalcore.loaders._records import refuse_surrogates
from evalcore.loaders.errors import TOO_DEEP, CaseBankError
from evalcore.loaders.limits import MAX_INFLATED_MB
from evalcore.strictjson import STRICT, DuplicateKey, NonFiniteNumber, locate_non_finite, non_finite_reason

Records = Iterator[tuple[int, dict[str, Any]]]
"""``(line number, record dict)`` pairs, as every format reader yields them."""

_WS = re.compile(r"[ \t\n\r]*")


def iter_jsonl_records(source: SourceFile) -> Records:
    """Stream a JSONL file's records, one line at a time (memory stays flat for big files).

    Raises:
        CaseBankError: On a line that is not UTF-8, not JSON, holds NaN/Infinity, or is not an object.
    """
    decode = STRICT.decode
    with source.open() as stream:
        offset = 0
        for line_no, line_bytes in enumerate(_bounded_lines(source, stream), 1):
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
            except DuplicateKey as exc:
                raise source.error(f"{exc.msg}: say it once", line=line_no, field=exc.key) from None
            except json.JSONDecodeError as exc:
                raise _jsonl_syntax_error(source, stream, text, exc, line_no, lead) from None
            except RecursionError:
                raise source.error(TOO_DEEP, line=line_no) from None
            if type(record) is not dict:
                raise source.error(f"each line must be a JSON object, got {json_type(record)}", line=line_no)
            refuse_surrogates(source, record, line_no, text)
            yield line_no, record


def _bounded_lines(source: SourceFile, stream: IO[bytes]) -> Iterator[bytes]:
    """The stream's lines, refusing one longer than :data:`~evalcore.loaders.limits.MAX_INFLATED_MB`
    before it is all in memory (a gzip file of one endless line would otherwise be read whole)."""
    try:
        limit = MAX_INFLATED_MB.value() << 20
    except ValueError as exc:
        raise source.error(str(exc)) from None
    line_no = 0
    while line := stream.readline(limit + 1):
        line_no += 1
        if len(line) > limit:
            raise source.error(
                f"a line longer than {limit >> 20} MiB, the limit for one line ({MAX_INFLATED_MB.how_to_raise()}); "
                "nothing imported",
                line=line_no,
            )
        yield line


def _rest_is_blank(stream: IO[bytes]) -> bool:
    """True when nothing but whitespace is left in ``stream`` (read in chunks, stops early)."""
    while True:
        chunk = stream.read(1 << 16)
        if not chunk:
            return True
        if chunk.strip():
            return False


def _jsonl_syntax_error(
    source: SourceFile, stream: IO[bytes], text: str, exc: json.JSONDecodeError, line_no: int, lead: int
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
