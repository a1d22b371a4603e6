"""Parquet and Arrow tables as case-bank records, through pyarrow.

For Hugging Face datasets saved locally: ``Dataset.to_parquet("qa.parquet")``, or the
``data-00000-of-00001.arrow`` files that ``Dataset.save_to_disk`` writes (Arrow IPC, stream or
file format; ``.feather`` too). Each row is one record, its columns the fields, so ``--map``
names columns as for a CSV (``--map input=question,expected=answer``). The "line" of an error is
the row number (1-based).

Values become JSON values (:func:`evalcore.jsonvalue.to_json`): nested structs are objects, lists
arrays, timestamps ISO 8601 text, decimals numbers, UTF-8 binary text. A null cell is an absent
field (as an empty CSV cell is). NaN, infinite floats and binary that is not UTF-8 are refused,
naming row and column. A file written by Evalsite's exports (:mod:`evalcore.tables`) names in its
schema metadata (:data:`JSON_COLUMNS_KEY`) the text columns that hold JSON values (an input that
may be text or an object): their cells are decoded, so the values come back exactly.
"""

from __future__ import annotations

import json
from typing import Any

from evalcore.jsonvalue import NotJSONError, to_json
from evalcore.loaders._io import SourceFile
from evalcore.loaders._jsonl import Records
from evalcore.strictjson import STRICT

__all__ = ["JSON_COLUMNS_KEY", "arrow_records"]

_BATCH_ROWS = 1024

_JSON_NULL: Any = object()

JSON_COLUMNS_KEY = b"evalsite.json_columns"
"""Schema metadata key: a JSON list of the columns whose text cells are JSON values."""


def arrow_records(source: SourceFile) -> Records:
    """Yield ``(row number, {column: value})`` for every row of a Parquet or Arrow file.

    Raises:
        CaseBankError: The file is not Parquet / Arrow (or is damaged), or a cell has no JSON
            form (NaN, infinity, binary that is not UTF-8), naming row and column.
    """
    import pyarrow as pa  # imported here: only Parquet / Arrow files need it

    data = source.read_bytes()
    try:
        schema, batches = _batches(pa, source.format, data)
        json_columns = _json_columns(schema.metadata)
        row = 0
        for batch in batches:
            for record in batch.to_pylist():
                row += 1
                if json_columns:
                    _decode_json_cells(source, record, json_columns, row)
                yield row, _json_record(source, record, row)
    except (pa.ArrowException, OSError) as exc:
        kind = "Parquet" if source.format == "parquet" else "Arrow IPC"
        raise source.error(f"not a readable {kind} file: {exc}") from None


def _batches(pa: Any, fmt: str, data: bytes) -> tuple[Any, Any]:
    """The file's schema and its record batches, lazily."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(pa.BufferReader(data))
        return parquet.schema_arrow, parquet.iter_batches(batch_size=_BATCH_ROWS)
    import pyarrow.ipc as ipc

    try:
        reader = ipc.open_file(pa.BufferReader(data))
    except pa.ArrowInvalid:  # not the file format: Hugging Face writes the stream format
        stream = ipc.open_stream(pa.BufferReader(data))
        return stream.schema, iter(stream)
    return reader.schema, (reader.get_batch(index) for index in range(reader.num_record_batches))


def _json_columns(metadata: dict[bytes, bytes] | None) -> frozenset[str]:
    """The columns an Evalsite export marked as JSON text (none for other files)."""
    raw = (metadata or {}).get(JSON_COLUMNS_KEY)
    if raw is None:
        return frozenset()
    try:
        names = json.loads(raw)
    except ValueError:
        return frozenset()
    return frozenset(name for name in names if isinstance(name, str)) if isinstance(names, list) else frozenset()


def _decode_json_cells(source: SourceFile, record: dict[str, Any], columns: frozenset[str], row: int) -> None:
    """Decode, in place, the JSON text of ``columns`` (a null cell stays absent)."""
    for column in columns:
        text = record.get(column)
        if isinstance(text, str):
            try:
                value = STRICT.decode(text)
            except ValueError as exc:
                raise source.error(
                    f"the cell is not the JSON text its schema says: {exc}", line=row, field=column
                ) from None
            record[column] = _JSON_NULL if value is None else value


def _json_record(source: SourceFile, record: dict[str, Any], row: int) -> dict[str, Any]:
    """The row with nulls dropped and every value converted to JSON (or a located error)."""
    out: dict[str, Any] = {}
    for column, value in record.items():
        if value is None:
            continue
        if value is _JSON_NULL:  # JSON null written as text: a real null, not an empty cell
            out[column] = None
            continue
        try:
            out[column] = to_json(value)
        except NotJSONError as exc:
            raise source.error(f"the value has no JSON form: {exc}", line=row, field=column) from None
    return out
