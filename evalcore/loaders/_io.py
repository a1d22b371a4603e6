"""File-level checks shared by every format: existence, extension, gzip, LFS pointers, encoding.

Case banks must be UTF-8 (a UTF-8 byte-order mark is tolerated and dropped). A file in another
encoding is rejected with the place of the first bad byte and, when charset-normalizer is sure of
it, the encoding family and the exact ``iconv`` command; it is never decoded by guesswork: a wrong
guess would silently corrupt expected answers.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from evalcore.loaders._encoding import guess_encoding, iconv_command, mostly_utf8, preview
from evalcore.loaders.errors import CaseBankError
from evalcore.loaders.limits import MAX_INFLATED_MB

FORMATS_BY_SUFFIX: dict[str, str] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".parquet": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
}
"""Case-bank file suffixes and their format; each text format may be followed by ``.gz``.

YAML files are promptfoo configs or test lists (:mod:`evalcore.loaders.promptfoo`); Parquet and
Arrow files are tables, e.g. Hugging Face datasets saved locally (:mod:`evalcore.loaders.arrow`)."""

BINARY_FORMATS: frozenset[str] = frozenset({"parquet", "arrow"})
"""Formats that are not text: no encoding check, no gzip."""

ADK_SUFFIXES: tuple[str, ...] = (".test.json", ".evalset.json")
"""File-name endings of Google ADK eval files (format ``"adk"``)."""

ADK_CONFIG_NAME = "test_config.json"
"""ADK's per-folder criteria file: read as ADK, which rejects it as holding no cases."""

FORMATS: tuple[str, ...] = ("jsonl", "json", "csv", "adk", "yaml", "parquet", "arrow")
"""Every format a case bank can be read in."""

SUPPORTED_SUFFIXES = (
    ".jsonl, .ndjson, .json, .csv (each optionally gzipped: .jsonl.gz, .json.gz, .csv.gz), "
    "ADK .test.json / .evalset.json, promptfoo .yaml / .yml, .parquet, .arrow / .feather"
)

LFS_MAGIC = b"version https://git-lfs.github.com/spec/v1"
UTF8_BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"
_HEAD_BYTES = 4096
# Errors raised by the gzip module on a truncated or corrupt stream.
_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)

CaseBankSource = str | os.PathLike[str] | IO[bytes] | IO[str]
"""What the loaders read: a path, or an open file object (binary, or text already decoded)."""


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A case-bank file that passed the file-level checks.

    Attributes:
        path: The filesystem path, or ``None`` for a file object.
        display: The path as the caller wrote it (or the file object's name), used in errors.
        format: One of :data:`FORMATS`.
        gzipped: True when the file is gzip-compressed (name ends in ``.gz``).
        stem: The file name without its case-bank suffixes (``qa.jsonl.gz`` -> ``qa``).
        stream: The binary file object read instead of ``path`` (never closed here).
        start: The stream position the content starts at (where the caller left it).
    """

    path: Path | None
    display: str
    format: str
    gzipped: bool
    stem: str
    stream: IO[bytes] | None = None
    start: int = 0

    def error(self, reason: str, **where: int | str | None) -> CaseBankError:
        """A :class:`CaseBankError` for this file."""
        return CaseBankError(reason, path=self.display, **where)  # type: ignore[arg-type]

    @contextmanager
    def open(self) -> Iterator[IO[bytes]]:
        """The decompressed byte stream; gzip corruption becomes a :class:`CaseBankError`."""
        try:
            with self._raw() as raw:
                if not self.gzipped:
                    yield raw
                    return
                with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                    yield cast(IO[bytes], unzipped)
        except _GZIP_ERRORS as exc:
            raise self.error(f"the gzip data is corrupt or truncated ({exc})") from None

    def _raw(self) -> AbstractContextManager[IO[bytes]]:
        if self.stream is None:
            assert self.path is not None
            return open(self.path, "rb")
        self.stream.seek(self.start)
        return nullcontext(self.stream)  # the caller's file object: the caller closes it

    def read_bytes(self) -> bytes:
        """The whole decompressed content.

        Raises:
            CaseBankError: Corrupt gzip data, or gzip data that inflates past
                :data:`~evalcore.loaders.limits.MAX_INFLATED_MB` (a few MB that inflate to
                gigabytes are refused as they stream, not after the memory is spent).
        """
        with self.open() as stream:
            try:
                if not self.gzipped:
                    return stream.read()
                return self._read_inflated(stream)
            except _GZIP_ERRORS as exc:
                raise self.error(f"the gzip data is corrupt or truncated ({exc})") from None

    def _read_inflated(self, stream: IO[bytes]) -> bytes:
        try:
            limit = MAX_INFLATED_MB.value() << 20
        except ValueError as exc:
            raise self.error(str(exc)) from None
        out = bytearray()
        while chunk := stream.read(1 << 20):
            out += chunk
            if len(out) > limit:
                raise self.error(
                    f"the gzip data inflates to more than {limit >> 20} MiB, the limit for a compressed file "
                    f"read whole ({MAX_INFLATED_MB.how_to_raise()}); nothing imported"
                )
        return bytes(out)


def is_adk_file(path: str | os.PathLike[str]) -> bool:
    """True when the file name ends in ``.test.json`` or ``.evalset.json`` (case-insensitive).

    ``test_config.json`` is not an eval file and gives False.
    """
    return Path(path).name.lower().endswith(ADK_SUFFIXES)


def adk_stem(path: str | os.PathLike[str]) -> str:
    """The file name without its ADK suffix (``roll_die.test.json`` -> ``roll_die``)."""
    name = Path(path).name
    for suffix in ADK_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return Path(path).stem


def split_suffix(path: Path) -> tuple[str | None, bool, str]:
    """``(format or None, gzipped, stem)`` from a file name, e.g. ``qa.jsonl.gz`` -> ``("jsonl", True, "qa")``.

    ADK eval files (``x.test.json``, ``x.evalset.json``) and ``test_config.json`` give ``"adk"``.
    """
    name = path.name
    gzipped = name.lower().endswith(".gz")
    if gzipped:
        name = name[:-3]
    if is_adk_file(name) or name.lower() == ADK_CONFIG_NAME:
        return "adk", gzipped, adk_stem(name)
    dot = name.rfind(".")
    if dot <= 0:
        return None, gzipped, name
    return FORMATS_BY_SUFFIX.get(name[dot:].lower()), gzipped, name[:dot]


def open_source(source: CaseBankSource, file_format: str | None = None, *, name: str | None = None) -> SourceFile:
    """Check a case-bank file before parsing: exists, not an LFS pointer, known format, gzip, encoding.

    Args:
        source: A path, or an open file object (an upload, ``io.BytesIO``, ``io.StringIO``). A
            binary stream is read from its current position and left open; a text stream is
            read whole and encoded as UTF-8.
        file_format: Force one of :data:`FORMATS` instead of reading the suffix.
        name: The file name of a file object (its ``name`` attribute otherwise): gives the
            format and the name shown in errors.

    Returns:
        The checked :class:`SourceFile`.

    Raises:
        CaseBankError: If the file is missing, a directory, a Git LFS pointer, has an unknown
            suffix, claims gzip but is not, or is UTF-16/UTF-32 rather than UTF-8.
    """
    if file_format is not None and file_format not in FORMATS:
        raise CaseBankError(f"unknown format {file_format!r}; use {', '.join(FORMATS)}", path=name or str(source))
    stream: IO[bytes] | None = None
    start = 0
    if isinstance(source, str | os.PathLike):
        display = name or str(source)
        local = Path(source)
        if not local.exists():
            raise CaseBankError("no such file", path=display)
        if local.is_dir():
            raise CaseBankError("is a directory, not a case-bank file", path=display)
        fs_path: Path | None = local
        with open(local, "rb") as raw:
            head = raw.read(_HEAD_BYTES)
    else:
        fs_path = None
        display = name or str(getattr(source, "name", "") or "") or "<file object>"
        stream, start = _binary(source)
        head = stream.read(_HEAD_BYTES)
        stream.seek(start)
    # Checked before the suffix: an LFS pointer keeps the data file's name (or gets an odd one).
    if head.startswith(LFS_MAGIC):
        raise CaseBankError(_lfs_message(head), path=display, line=1)
    detected, gzipped, stem = split_suffix(Path(display))
    detected = file_format or detected
    if detected is None:
        raise CaseBankError(
            f"unsupported file type {Path(display).name!r}; supported: {SUPPORTED_SUFFIXES}", path=display
        )
    checked = SourceFile(fs_path, display, detected, gzipped, stem, stream, start)
    if detected in BINARY_FORMATS:
        if gzipped:
            raise CaseBankError(f"a .{detected} file cannot be gzipped here: decompress it first", path=display)
        return checked
    if gzipped:
        if not head.startswith(_GZIP_MAGIC):
            raise CaseBankError("the name ends in .gz but the file is not gzip-compressed", path=display)
        with checked.open() as unzipped:
            try:
                head = unzipped.read(_HEAD_BYTES)
            except _GZIP_ERRORS as exc:
                raise CaseBankError(f"the gzip data is corrupt or truncated ({exc})", path=display) from None
        if head.startswith(LFS_MAGIC):
            raise CaseBankError(_lfs_message(head), path=display, line=1)
    wide = detect_wide_encoding(head)
    if wide is not None:
        encoding, evidence, iconv_name = wide
        raise CaseBankError(
            f"file is not UTF-8: it looks like {encoding} ({evidence}, byte offset 0); "
            f"re-save it as UTF-8, e.g. `iconv -f {iconv_name} -t UTF-8 in > out`",
            path=display,
            line=1,
        )
    return checked


def _binary(source: IO[bytes] | IO[str]) -> tuple[IO[bytes], int]:
    """A seekable binary stream over a file object's content, and the position it starts at."""
    probe = source.read(0)
    if isinstance(probe, str):  # a text stream: already decoded, so UTF-8 is the faithful encoding
        return io.BytesIO(str(source.read()).encode("utf-8")), 0
    binary = cast(IO[bytes], source)
    if binary.seekable():
        return binary, binary.tell()
    return io.BytesIO(binary.read()), 0  # a pipe: read once, kept in memory


def _lfs_message(head: bytes) -> str:
    details = []
    for raw_line in head.decode("ascii", "replace").splitlines()[1:4]:
        key, _, value = raw_line.partition(" ")
        if key in ("oid", "size") and value:
            details.append(f"{key} {value}")
    extra = f" ({', '.join(details)})" if details else ""
    return (
        f"this is a Git LFS pointer file{extra}, not the case data; "
        "run `git lfs pull` (or `git lfs fetch && git lfs checkout`) in the repository to download the real file"
    )


_BOMS: tuple[tuple[bytes, str, str], ...] = (
    # UTF-32 first: its little-endian BOM starts with the UTF-16 LE one.
    (b"\xff\xfe\x00\x00", "UTF-32 LE", "UTF-32LE"),
    (b"\x00\x00\xfe\xff", "UTF-32 BE", "UTF-32BE"),
    (b"\xff\xfe", "UTF-16 LE", "UTF-16LE"),
    (b"\xfe\xff", "UTF-16 BE", "UTF-16BE"),
)


def detect_wide_encoding(head: bytes) -> tuple[str, str, str] | None:
    """Spot UTF-16/UTF-32 text by its byte-order mark or its NUL-byte pattern.

    Args:
        head: The first few KiB of the (decompressed) file.

    Returns:
        ``(encoding name, evidence, iconv name)`` or ``None`` when the head looks byte-oriented.
    """
    for bom, name, iconv_name in _BOMS:
        if head.startswith(bom):
            return name, f"byte-order mark {bom.hex(' ').upper()}", iconv_name
    sample = head[:512]
    if len(sample) < 4 or b"\x00" not in sample:
        return None
    even_nuls = sample[0::2].count(0)
    odd_nuls = sample[1::2].count(0)
    half = len(sample) // 2
    # ASCII text in UTF-16 puts a NUL beside every character; which side tells the byte order.
    if odd_nuls >= half * 0.4 and even_nuls <= half * 0.05:
        return "UTF-16 LE", "NUL after most characters, no byte-order mark", "UTF-16LE"
    if even_nuls >= half * 0.4 and odd_nuls <= half * 0.05:
        return "UTF-16 BE", "NUL before most characters, no byte-order mark", "UTF-16BE"
    return None


_SAMPLE_BYTES = 1 << 16
"""How many bytes after the offending line the encoding detector also looks at."""


def utf8_error(
    source: SourceFile,
    line_bytes: bytes,
    line_no: int,
    line_offset: int,
    exc: UnicodeDecodeError,
    more: bytes = b"",
) -> CaseBankError:
    """The :class:`CaseBankError` for a line that is not valid UTF-8.

    The message names the first bad byte and, when charset-normalizer is sure of it, the encoding
    family the bytes are in, the line as that encoding reads it, and the exact ``iconv`` command
    that writes a UTF-8 copy; when it is not sure it says so, and gives no advice that could
    corrupt the text (see :func:`evalcore.loaders._encoding.guess_encoding`).

    Args:
        source: The file.
        line_bytes: The raw bytes of the offending line.
        line_no: Its 1-based line number.
        line_offset: Byte offset of the line's first byte in the (decompressed) file.
        exc: The decode error, whose ``start`` is relative to ``line_bytes``.
        more: Bytes that follow the line in the file (a bigger sample for the detector).
    """
    bad = line_bytes[exc.start : exc.start + 1]
    sample = line_bytes + more[:_SAMPLE_BYTES]
    message = (
        f"file is not valid UTF-8: byte 0x{bad.hex().upper()} at byte offset {line_offset + exc.start} "
        "cannot be decoded; "
    )
    guess = guess_encoding(sample)
    if guess is not None:
        command = iconv_command(source.display, source.stem, source.gzipped, guess.iconv)
        message += (
            f"it looks like {guess.name} text (detected by charset-normalizer; as {guess.iconv} this line reads "
            f"{preview(sample, exc.start, guess.codec)!r}); re-save it as UTF-8: `{command}`"
        )
    elif mostly_utf8(sample):
        message += (
            "the text around it is UTF-8, so the file mixes encodings: converting the whole file would corrupt "
            "its UTF-8 part; fix the bytes that are not UTF-8 (this one and any like it) by hand"
        )
    else:
        message += (
            "its encoding could not be identified with confidence (no guess: a wrong one would corrupt the "
            "text); find out which encoding the file was written in, then `iconv -f THAT_ENCODING -t UTF-8`"
        )
    return source.error(message, line=line_no, column=exc.start + 1)


def decode_whole(source: SourceFile, data: bytes) -> str:
    """Decode a whole file as UTF-8 (dropping a BOM), locating the first bad byte on failure.

    Raises:
        CaseBankError: With the line, byte column and likely encoding of the first bad byte.
    """
    bom = len(UTF8_BOM) if data.startswith(UTF8_BOM) else 0
    try:
        return data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.start + bom
        line_start = data.rfind(b"\n", 0, bad) + 1
        line_end = data.find(b"\n", bad)
        line_end = line_end if line_end != -1 else len(data)
        line_bytes = data[line_start:line_end]
        relative = UnicodeDecodeError("utf-8", line_bytes, bad - line_start, bad - line_start + 1, exc.reason)
        line_no = data.count(b"\n", 0, bad) + 1
        more = data[line_end : line_end + _SAMPLE_BYTES]
        raise utf8_error(source, line_bytes, line_no, line_start, relative, more) from None
