"""Parquet and Arrow tables as case-bank records, through pyarrow.

For Hugging Face datasets saved locally: ``Dataset.to_parquet("qa.parquet")``, or the
``data-00000-of-00001.arrow`` files that ``Dataset.save_to_disk`` writes (Arrow IPC, stream or
file format; ``.feather`` too). Each row is one record, its columns the fields, so ``--map``
names columns as for a CSV (``--map input=question,expected=answer``). The "line" of an error is
the row number (1-based).

Values become JSON values (:func:`evalcore.jsonvalue.to_json`): nested structs are objects, lists
arrays, timestamps ISO 8601 text, decimals numbers, UTF-8 binary text. A null cell is an absent
field (as an empty CSV cell is). NaN, infinite floats and binary that is not UTF-8 are refused,
naming row and column.
"""

from __future__ import annotations

from typing import Any

from evalcore.jsonvalue import NotJSONError, to_json
from evalcore.loaders._io import SourceFile
from evalcore.loaders._jsonl import Records

__all__ = ["arrow_records"]

_BATCH_ROWS = 1024


def arrow_records(source: SourceFile) -> Records:
    """Yield ``(row number, {column: value})`` for every row of a Parquet or Arrow file.

    Raises:
        CaseBankError: The file is not Parquet / Arrow (or is damaged), or a cell has no JSON
            form (NaN, infinity, binary that is not UTF-8), naming row and column.
    """
    import pyarrow as pa  # imported here: only Parquet / Arrow files need it

    data = source.read_bytes()
    try:
        batches = _batches(pa, source.format, data)
        row = 0
        for batch in batches:
            for record in batch.to_pylist():
                row += 1
                yield row, _json_record(source, record, row)
    except (pa.ArrowException, OSError) as exc:
        kind = "Parquet" if source.format == "parquet" else "Arrow IPC"
        raise source.error(f"not a readable {kind} file: {exc}") from None


def _batches(pa: Any, fmt: str, data: bytes) -> Any:
    """The file's record batches, lazily."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(pa.BufferReader(data)).iter_batches(batch_size=_BATCH_ROWS)
    import pyarrow.ipc as ipc

    try:
        reader = ipc.open_file(pa.BufferReader(data))
    except pa.ArrowInvalid:  # not the file format: Hugging Face writes the stream format
        return iter(ipc.open_stream(pa.BufferReader(data)))
    return (reader.get_batch(index) for index in range(reader.num_record_batches))


def _json_record(source: SourceFile, record: dict[str, Any], row: int) -> dict[str, Any]:
    """The row with nulls dropped and every value converted to JSON (or a located error)."""
    out: dict[str, Any] = {}
    for column, value in record.items():
        if value is None:
            continue
        try:
            out[column] = to_json(value)
        except NotJSONError as exc:
            raise source.error(f"the value has no JSON form: {exc}", line=row, field=column) from None
    return out
