"""The members of an Inspect ``.eval`` log (a zip archive), zstd-compressed ones included.

Inspect writes ``.eval`` logs as zip archives; recent versions compress each member with
Zstandard (zip method 93), which Python's ``zipfile`` reads natively only from 3.14. Before
that, a zstd member's raw bytes are located through its local header and decompressed by
pyarrow's zstd codec (pyarrow is already a dependency; no Inspect package is needed). The
member's CRC-32 is checked either way. Deflated and stored members (older Inspect versions) go
through ``zipfile`` as usual.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from typing import IO

__all__ = ["ZIP_ZSTANDARD", "read_member"]

ZIP_ZSTANDARD = 93
"""The zip compression method number of Zstandard (APPNOTE 4.4.5)."""

_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # signature ... file name length, extra field length
_LOCAL_SIGNATURE = b"PK\x03\x04"


def read_member(archive: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo) -> bytes:
    """The decompressed content of one member.

    Args:
        archive: The open archive.
        raw: The archive file opened again in binary mode (a zstd member is read from it
            directly; ``archive`` is not moved).
        info: The member.

    Raises:
        zipfile.BadZipFile: The member is damaged (bad header, CRC mismatch, zstd error).
        NotImplementedError: A compression method neither ``zipfile`` nor pyarrow reads.
    """
    if info.compress_type != ZIP_ZSTANDARD or hasattr(zipfile, "ZIP_ZSTANDARD"):
        return archive.read(info)
    raw.seek(info.header_offset)
    header = raw.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size:
        raise zipfile.BadZipFile(f"{info.filename}: truncated local header")
    fields = _LOCAL_HEADER.unpack(header)
    if fields[0] != _LOCAL_SIGNATURE:
        raise zipfile.BadZipFile(f"{info.filename}: bad local header signature")
    raw.seek(info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1])
    compressed = raw.read(info.compress_size)
    if len(compressed) != info.compress_size:
        raise zipfile.BadZipFile(f"{info.filename}: truncated data")
    import pyarrow as pa  # imported here: only zstd members on Python < 3.14 need it

    try:
        data = pa.decompress(compressed, decompressed_size=info.file_size, codec="zstd", asbytes=True)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise zipfile.BadZipFile(f"{info.filename}: zstd data is corrupt ({exc})") from None
    if zlib.crc32(data) != info.CRC:
        raise zipfile.BadZipFile(f"{info.filename}: CRC-32 mismatch")
    return bytes(data)
