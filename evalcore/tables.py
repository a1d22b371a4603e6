"""Rows out as files: JSON Lines, CSV and Parquet, streamed in chunks of bytes.

An export is a stream of rows (nested dicts of JSON values) and the columns a flat format shows
(:class:`Column`). JSON Lines writes each row as it is; CSV and Parquet write one cell per
column, found in the row by the column's path. Every writer yields ``bytes`` chunks as rows
arrive, so memory stays flat however many rows there are (Parquet holds one row group,
:data:`PARQUET_GROUP_ROWS` rows, at a time).

Rows that are cases start with the canonical case-bank fields (:func:`case_record`: ``id``,
``input``, ``expected``, ``tags``, ``split``, ``metadata``), so every export reads back as a case
bank; what an export adds (a run's output, scores, reviews) goes under ``evalsite``
(:data:`evalcore.loaders._exported.EXPORT_KEY`), which the loaders leave out.

Cells (CSV), by column kind:

* ``json``: a string as it is when the CSV loader reads it back as that same string, else as a
  JSON string (``""`` for the empty string, ``"42"`` for the text 42, ``"null"``...); ``null``
  for null; objects, arrays, numbers and booleans as JSON text; an absent value (a case without
  expected value) as an empty cell. This is the CSV loader's own rule
  (:func:`evalcore.loaders.convert_cell`) read backwards, so every JSON value round-trips exactly.
* ``text``, ``bool``, ``float``, ``int``: the value (``true`` / ``false`` for booleans), empty for null.

Then every cell, header excepted, is neutralised against CSV injection
(:func:`evalcore.loaders.neutralise_formula`): a cell that would start with ``=``, ``+``, ``-``,
``@``, TAB or CR (after any ``'``) gets a leading ``'``, which the CSV loader takes off again; a
cell that is wholly a JSON number (``-2``) is left as it is.

Parquet: ``json`` columns are text holding each value's JSON (named in the schema metadata
under :data:`evalcore.loaders.arrow.JSON_COLUMNS_KEY`, so the loader decodes them), the others
typed (string, bool, float64, int64).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from evalcore.jsonvalue import MISSING
from evalcore.loaders import convert_cell, neutralise_formula
from evalcore.loaders.arrow import JSON_COLUMNS_KEY

__all__ = [
    "CASE_COLUMNS",
    "CONTENT_TYPES",
    "FORMATS",
    "PARQUET_GROUP_ROWS",
    "Column",
    "case_record",
    "csv_chunks",
    "jsonl_chunks",
    "parquet_chunks",
    "table_chunks",
]

FORMATS: tuple[str, ...] = ("jsonl", "csv", "parquet")
"""The table formats every export writes."""

CONTENT_TYPES: dict[str, str] = {
    "jsonl": "application/x-ndjson; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
    "parquet": "application/vnd.apache.parquet",
    "adk": "application/json; charset=utf-8",
}
"""The HTTP content type of each export format (``adk``: an ADK eval set, :mod:`evalcore.loaders.adk_export`)."""

PARQUET_GROUP_ROWS = 1000
"""Rows per Parquet row group: the most rows a Parquet export holds in memory at once."""

_CHUNK_BYTES = 64 * 1024
_KINDS = frozenset({"json", "text", "bool", "float", "int"})
_ABSENT: Any = object()


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a flat export.

    Attributes:
        path: Keys leading to the cell's value in a row (``("evalsite", "a", "status")``); a key
            may itself hold dots (a score named ``citation_set.recall``).
        kind: ``json`` (any JSON value), ``text``, ``bool``, ``float`` or ``int`` (see the module
            docstring for how each is written).
    """

    path: tuple[str, ...]
    kind: str = "json"

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown column kind {self.kind!r}; kinds are {', '.join(sorted(_KINDS))}")

    @property
    def name(self) -> str:
        """The header: the path joined with dots (``evalsite.a.status``)."""
        return ".".join(self.path)

    def get(self, row: dict[str, Any]) -> Any:
        """The cell's value in ``row``; :data:`~evalcore.jsonvalue.MISSING` when a key is absent."""
        value: Any = row
        for key in self.path:
            if not isinstance(value, dict) or key not in value:
                return MISSING
            value = value[key]
        return value


def columns(*names: str, kind: str = "json", under: tuple[str, ...] = ()) -> list[Column]:
    """Columns of one kind: ``columns("status", "reason", kind="text", under=("evalsite",))``."""
    return [Column((*under, name), kind) for name in names]


CASE_COLUMNS: tuple[Column, ...] = (
    Column(("id",), "text"),
    Column(("input",)),
    Column(("expected",)),
    Column(("tags",)),
    Column(("split",), "text"),
    Column(("metadata",)),
)
"""The canonical case-bank fields, the first columns of every export of cases."""


def case_record(
    case_id: str, input_value: Any, expected: Any, tags: Sequence[str], split: str, metadata: dict[str, Any]
) -> dict[str, Any]:
    """A case as its canonical case-bank record (``expected`` left out when it is :data:`MISSING`)."""
    record: dict[str, Any] = {"id": case_id, "input": input_value}
    if expected is not MISSING:
        record["expected"] = expected
    record["tags"] = list(tags)
    record["split"] = split
    record["metadata"] = metadata
    return record


def _buffered(pieces: Iterable[str]) -> Iterator[bytes]:
    """Join text pieces into UTF-8 chunks of about :data:`_CHUNK_BYTES`."""
    parts: list[str] = []
    size = 0
    for piece in pieces:
        parts.append(piece)
        size += len(piece)
        if size >= _CHUNK_BYTES:
            yield "".join(parts).encode()
            parts.clear()
            size = 0
    if parts:
        yield "".join(parts).encode()


def jsonl_chunks(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """Rows as JSON Lines (UTF-8, non-ASCII kept, one row per ``\\n``-ended line).

    Raises:
        ValueError: A row holds NaN or infinity (not JSON).
    """
    return _buffered(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in rows)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _json_cell(value: Any) -> str:
    if not isinstance(value, str):
        return _json_text(value)
    read = convert_cell(value)
    return value if type(read) is str and read == value else _json_text(value)


def csv_cell(value: Any, kind: str) -> str:
    """One CSV cell's text, before :func:`~evalcore.loaders.neutralise_formula` (see the module docstring)."""
    if value is MISSING:
        return ""
    if kind == "json":
        return _json_cell(value)
    if value is None:
        return ""
    if kind == "bool":
        return "true" if value else "false"
    if kind in ("float", "int"):
        return _json_text(value)
    return str(value)


def csv_chunks(rows: Iterable[dict[str, Any]], table: Sequence[Column]) -> Iterator[bytes]:
    """Rows as CSV: a header of column names, then one line per row (RFC 4180 quoting, ``\\r\\n``)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def lines() -> Iterator[str]:
        writer.writerow([column.name for column in table])
        for row in rows:
            writer.writerow([neutralise_formula(csv_cell(column.get(row), column.kind)) for column in table])
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
        yield buffer.getvalue()  # the header of a table without rows

    return _buffered(lines())


class _Drain:
    """A write-only file that hands what was written to :func:`parquet_chunks` as it comes."""

    closed = False

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.position = 0

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.parts.append(chunk)
        self.position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        """Nothing to flush: :meth:`take` hands every byte on."""

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        data = b"".join(self.parts)
        self.parts.clear()
        return data


def _arrow_cell(value: Any, kind: str) -> Any:
    if value is MISSING or (value is None and kind != "json"):
        return None
    if kind == "json":
        return _json_text(value)
    if kind == "text":
        return str(value)
    return value


def parquet_chunks(
    rows: Iterable[dict[str, Any]], table: Sequence[Column], *, group_rows: int = PARQUET_GROUP_ROWS
) -> Iterator[bytes]:
    """Rows as one Parquet file, a row group per ``group_rows`` rows, each yielded once written.

    Raises:
        ValueError: A ``json`` cell holds NaN or infinity.
        pyarrow.ArrowInvalid: A typed cell does not fit its kind (a text in a ``float`` column).
    """
    import pyarrow as pa  # only Parquet exports need it
    import pyarrow.parquet as pq

    types = {"json": pa.string(), "text": pa.string(), "bool": pa.bool_(), "float": pa.float64(), "int": pa.int64()}
    json_names = [column.name for column in table if column.kind == "json"]
    schema = pa.schema(
        [pa.field(column.name, types[column.kind]) for column in table],
        metadata={JSON_COLUMNS_KEY: json.dumps(json_names).encode()},
    )
    sink = _Drain()
    writer = pq.ParquetWriter(sink, schema)
    group: list[list[Any]] = [[] for _ in table]
    count = 0

    def flush() -> bytes:
        nonlocal group, count
        arrays = [pa.array(cells, type=types[column.kind]) for cells, column in zip(group, table, strict=True)]
        writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
        group = [[] for _ in table]
        count = 0
        return sink.take()

    for row in rows:
        for cells, column in zip(group, table, strict=True):
            cells.append(_arrow_cell(column.get(row), column.kind))
        count += 1
        if count >= group_rows:
            yield flush()
    if count:
        yield flush()
    writer.close()
    yield sink.take()


def table_chunks(fmt: str, rows: Iterable[dict[str, Any]], table: Sequence[Column]) -> Iterator[bytes]:
    """The rows in ``fmt`` (one of :data:`FORMATS`).

    Raises:
        ValueError: An unknown format.
    """
    if fmt == "jsonl":
        return jsonl_chunks(rows)
    if fmt == "csv":
        return csv_chunks(rows, table)
    if fmt == "parquet":
        return parquet_chunks(rows, table)
    raise ValueError(f"unknown export format {fmt!r}; formats are: {', '.join(FORMATS)}")
