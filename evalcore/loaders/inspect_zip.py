"""The members of an Inspect ``.eval`` log (a zip archive), zstd-compressed ones included.

Inspect writes ``.eval`` logs as zip archives; recent versions compress each member with
Zstandard (zip method 93), which Python's ``zipfile`` reads natively only from 3.14. Before
that, a zstd member's raw bytes are located through its local header and decompressed by
pyarrow's zstd codec (pyarrow is already a dependency; no Inspect package is needed). The
member's CRC-32 is checked either way. Deflated and stored members (older Inspect versions) go
through ``zipfile`` as usual.

A member is never inflated past ``limit`` bytes (:data:`evalcore.loaders.limits.MAX_MEMBER_MB`):
a deflated one is read in chunks and refused as soon as it grows past the limit (a 2 MB "bomb"
that inflates to gigabytes costs at most the limit), a zstd one whose recorded size is over the
limit is refused before it is decompressed (and pyarrow never writes past the recorded size).
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from typing import IO

__all__ = ["ZIP_ZSTANDARD", "MemberTooLarge", "read_member"]

ZIP_ZSTANDARD = 93
"""The zip compression method number of Zstandard (APPNOTE 4.4.5)."""

_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # signature ... file name length, extra field length
_LOCAL_SIGNATURE = b"PK\x03\x04"
_CHUNK = 1 << 20


class MemberTooLarge(ValueError):
    """A member inflates past the limit; ``size`` is what it reached (or claims), in bytes."""

    def __init__(self, name: str, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"{name}: decompresses to more than {limit} bytes")


def read_member(archive: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo, *, limit: int) -> bytes:
    """The decompressed content of one member, at most ``limit`` bytes of it.

    Args:
        archive: The open archive.
        raw: The archive file opened again in binary mode (a zstd member is read from it
            directly; ``archive`` is not moved).
        info: The member.
        limit: The most bytes the member may decompress to.

    Raises:
        MemberTooLarge: The member decompresses (or says it does) to more than ``limit`` bytes;
            memory used stays within about ``limit``.
        zipfile.BadZipFile: The member is damaged (bad header, CRC mismatch, zstd error).
        NotImplementedError: A compression method neither ``zipfile`` nor pyarrow reads.
    """
    if info.file_size > limit:
        raise MemberTooLarge(info.filename, info.file_size, limit)
    if info.compress_type != ZIP_ZSTANDARD or hasattr(zipfile, "ZIP_ZSTANDARD"):
        return _read_bounded(archive, info, limit)
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


def _read_bounded(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """A member read through ``zipfile`` in chunks, refused once past ``limit`` bytes.

    ``zipfile`` stops at the size the archive records (and then checks the CRC), but that size
    is the archive's word: a member recording a small size is still counted as it streams.
    """
    out = bytearray()
    with archive.open(info) as stream:
        while chunk := stream.read(_CHUNK):
            out += chunk
            if len(out) > limit:
                raise MemberTooLarge(info.filename, len(out), limit)
    return bytes(out)
