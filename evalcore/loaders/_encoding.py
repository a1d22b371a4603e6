"""Naming the encoding of a file that is not UTF-8, with a real detector (charset-normalizer).

The loaders never decode a non-UTF-8 file by guesswork; they reject it, and the message names the
encoding family the bytes are in only when the detector is sure of it, with the exact ``iconv``
command that writes a UTF-8 copy. When it is not sure, the message says so: advice that names the
wrong encoding (GBK text called cp1252) makes the user corrupt their expected answers.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from charset_normalizer import CharsetMatch


@dataclass(frozen=True, slots=True)
class EncodingGuess:
    """What a non-UTF-8 sample most likely is.

    Attributes:
        name: The family as people call it, e.g. ``"GBK / GB18030 (Simplified Chinese)"``.
        iconv: The ``iconv -f`` name that decodes every text of that family correctly (the
            family's superset where one exists: GB18030 for GB2312/GBK, CP932 for Shift-JIS).
        codec: The Python codec name for the same (used to show a preview).
    """

    name: str
    iconv: str
    codec: str


# charset-normalizer's codec names -> (family key, family name, iconv name, Python codec).
_FAMILIES: dict[str, tuple[str, str, str, str]] = {}
for _key, _name, _iconv, _codec, _members in (
    ("zh-hans", "GBK / GB18030 (Simplified Chinese)", "GB18030", "gb18030", "gb2312 gbk gb18030 hz"),
    ("zh-hant", "Big5 (Traditional Chinese)", "BIG5-HKSCS", "big5hkscs", "big5 big5hkscs cp950"),
    (
        "ja-sjis",
        "Shift-JIS (Japanese; Windows cp932)",
        "CP932",
        "cp932",
        "shift_jis cp932 shift_jis_2004 shift_jisx0213",
    ),
    ("ja-euc", "EUC-JP (Japanese)", "EUC-JP", "euc_jp", "euc_jp euc_jis_2004 euc_jisx0213"),
    ("ko", "EUC-KR / cp949 (Korean)", "CP949", "cp949", "euc_kr cp949 johab"),
    ("western", "cp1252 (Windows Western European)", "CP1252", "cp1252", "cp1252"),
    ("latin1", "latin-1 (ISO-8859-1)", "LATIN1", "latin_1", "latin_1 iso8859_1"),
    ("western15", "ISO-8859-15 (Western European with the euro sign)", "ISO-8859-15", "iso8859_15", "iso8859_15"),
    ("central", "cp1250 (Windows Central European)", "CP1250", "cp1250", "cp1250"),
    ("central-iso", "ISO-8859-2 (Central European)", "ISO-8859-2", "iso8859_2", "iso8859_2"),
    ("cyrillic", "cp1251 (Windows Cyrillic)", "CP1251", "cp1251", "cp1251"),
    ("koi8", "KOI8-R / KOI8-U (Cyrillic)", "KOI8-U", "koi8_u", "koi8_r koi8_u"),
    ("greek", "cp1253 (Windows Greek)", "CP1253", "cp1253", "cp1253"),
    ("turkish", "cp1254 (Windows Turkish)", "CP1254", "cp1254", "cp1254 iso8859_9"),
    ("hebrew", "cp1255 (Windows Hebrew)", "CP1255", "cp1255", "cp1255"),
    ("arabic", "cp1256 (Windows Arabic)", "CP1256", "cp1256", "cp1256"),
    ("baltic", "cp1257 (Windows Baltic)", "CP1257", "cp1257", "cp1257"),
    ("vietnamese", "cp1258 (Windows Vietnamese)", "CP1258", "cp1258", "cp1258"),
    ("thai", "TIS-620 / cp874 (Thai)", "CP874", "cp874", "tis_620 cp874 iso8859_11"),
):
    for _member in _members.split():
        _FAMILIES[_member] = (_key, _name, _iconv, _codec)
_BY_KEY = {value[0]: value for value in _FAMILIES.values()}

# The letters beyond ASCII each language writes with (lower case). Code pages that the detector
# finds equally good are told apart by whether the text they give reads as one language: French
# bytes read as cp1250 give "ŕ", "ů" and "ű" side by side, which no language writes.
_ALPHABETS: dict[str, str] = {
    "French": "àâæçéèêëîïôœùûüÿ",
    "German": "äöüß",
    "Spanish": "áéíóúñü",
    "Portuguese": "àáâãçéêíóôõú",
    "Italian": "àèéìíîòóù",
    "Dutch": "áéíóúàèëïöü",
    "Danish": "åæøéó",
    "Norwegian": "åæøéóò",
    "Swedish": "åäöé",
    "Finnish": "åäöšž",
    "Icelandic": "áðéíóúýþæö",
    "Catalan": "àçèéíïòóúü",
    "Polish": "ąćęłńóśźż",
    "Czech": "áčďéěíňóřšťúůýž",
    "Slovak": "áäčďéíĺľňóôŕšťúýž",
    "Hungarian": "áéíóöőúüű",
    "Croatian": "čćđšž",
    "Slovene": "čšž",
    "Romanian": "ăâîșțşţ",
    "Lithuanian": "ąčęėįšųūž",
    "Latvian": "āčēģīķļņšūž",
    "Estonian": "äöõüšž",
    "Turkish": "çğıöşüâî",
    "Russian": "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
    "Ukrainian": "абвгґдеєжзиіїйклмнопрстуфхцчшщьюя",
    "Bulgarian": "абвгдежзийклмнопрстуфхцчшщъьюя",
    "Serbian": "абвгдђежзијклљмнњопрстћуфхцчџш",
    "Greek": "αβγδεζηθικλμνξοπρστυφχψωάέήίόύώϊϋΐΰς",
}
_ALPHABET_SETS = {language: frozenset(letters) for language, letters in _ALPHABETS.items()}


def _letters(text: str) -> set[str]:
    return {char for char in text.lower() if char > "\x7f" and char.isalpha()}


def _reads_as(text: str, language: str | None) -> bool:
    """True when every non-ASCII letter of ``text`` is in ``language``'s alphabet (any one
    language's when ``language`` is None)."""
    letters = _letters(text)
    if not letters:
        return True
    if language is not None:
        alphabet = _ALPHABET_SETS.get(language)
        return alphabet is not None and letters <= alphabet
    return any(letters <= alphabet for alphabet in _ALPHABET_SETS.values())


def _one_reading(tied: list[CharsetMatch]) -> list[CharsetMatch]:
    """The candidates that read as a language: first as the language the detector names for
    each, then (when none does: detectors misname languages on short text) as any language."""
    for by_detected in (True, False):
        plausible = [m for m in tied if _reads_as(str(m), m.language if by_detected else None)]
        if plausible:
            return plausible
    return []


_PREFERENCE = tuple(dict.fromkeys(value[0] for value in _FAMILIES.values()))
"""Which family to name when equally good candidates decode a sample to the very same text."""
_MAX_CHAOS = 0.15
"""A best match noisier than this (charset-normalizer's "chaos", 0 = clean text) is no guess."""
_TIE = 0.02
"""Candidates this close to the best one's chaos count as equally good."""


def guess_encoding(sample: bytes) -> EncodingGuess | None:
    """Name the encoding family of non-UTF-8 bytes, or ``None`` when unsure.

    Unsure means: no candidate decodes the sample into clean text; the equally clean candidates
    belong to different families and more than one text remains among those whose letters all
    belong to one language's alphabet (the detected language's first; French bytes read as
    cp1250 give "naďve"); or the sample is mostly valid UTF-8 (a file that mixes encodings:
    converting all of it would corrupt its UTF-8 part).

    Args:
        sample: Bytes around the first byte that is not UTF-8 (up to ~64 KiB; more is slower,
            not better).

    Returns:
        The :class:`EncodingGuess`, or ``None``.
    """
    if mostly_utf8(sample):
        return None
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # a declared dependency; a broken install only loses the guess
        return None
    matches = [match for match in from_bytes(sample) if match.encoding not in ("utf_8", "ascii")]
    if not matches:
        return None
    best = min(matches, key=lambda match: (match.chaos, -match.coherence))
    if best.chaos > _MAX_CHAOS:
        return None
    # Coherence (language fit) is unreliable on short samples: every candidate as clean as the
    # best one is considered, and the alphabet check below must leave one text.
    tied = [m for m in matches if m.chaos <= best.chaos + _TIE]
    families = {_FAMILIES[m.encoding][0] if m.encoding in _FAMILIES else "?" + m.encoding for m in tied}
    if len(families) == 1:
        key = next(iter(families))
    else:
        # Equally good candidates of several families: keep those whose text reads as one
        # language; they must all give the same text (then any of them is right) or no guess.
        plausible = _one_reading(tied)
        if not plausible or len({str(m) for m in plausible}) > 1:
            return None
        known = [k for k in _PREFERENCE if any(_FAMILIES.get(m.encoding, ("",))[0] == k for m in plausible)]
        key = known[0] if known else ""
    if key not in _BY_KEY:
        return None  # an encoding this table does not know: no advice rather than a wrong one
    _, name, iconv, codec = _BY_KEY[key]
    if key == "western":
        try:
            sample.decode("cp1252")
        except UnicodeDecodeError:  # 0x81, 0x8D, 0x8F, 0x90, 0x9D are undefined in cp1252
            _, name, iconv, codec = _BY_KEY["latin1"]
    try:
        sample.decode(codec)
    except UnicodeDecodeError:
        return None  # the family's superset cannot read it: not what it seemed
    return EncodingGuess(name=name, iconv=iconv, codec=codec)


def mostly_utf8(sample: bytes) -> bool:
    """True when valid multi-byte UTF-8 characters outnumber the bytes that are not UTF-8."""
    text = sample.decode("utf-8", "surrogateescape")
    bad = sum(1 for char in text if "\udc80" <= char <= "\udcff")
    non_ascii = sum(1 for char in text if char > "\x7f")
    return non_ascii - bad > bad


def iconv_command(display: str, stem: str, gzipped: bool, iconv_name: str) -> str:
    """The exact shell command that writes a UTF-8 copy of the file beside it.

    Args:
        display: The file as the user named it.
        stem: Its name without the case-bank suffixes (``qa.jsonl.gz`` -> ``qa``).
        gzipped: The file is gzip-compressed.
        iconv_name: The encoding to convert from.

    Returns:
        E.g. ``iconv -f GB18030 -t UTF-8 data/qa.jsonl > data/qa.utf8.jsonl``.
    """
    path = Path(display)
    out_name = stem + ".utf8" + path.name[len(stem) :] if path.name.startswith(stem) else path.name + ".utf8"
    out = str(path.with_name(out_name))
    convert = f"iconv -f {iconv_name} -t UTF-8"
    if gzipped:
        return f"gunzip -c {shlex.quote(display)} | {convert} | gzip > {shlex.quote(out)}"
    return f"{convert} {shlex.quote(display)} > {shlex.quote(out)}"


def preview(sample: bytes, at: int, codec: str, limit: int = 60) -> str:
    """The text around byte ``at`` of ``sample`` (within its line) decoded with ``codec``.

    Returns:
        At most ``limit`` characters, starting a little before the byte, with ``...`` where cut.
    """
    start = sample.rfind(b"\n", 0, at) + 1
    end = sample.find(b"\n", at)
    line = sample[start : end if end != -1 else len(sample)]
    text = line.decode(codec, "replace")
    offset = len(sample[start:at].decode(codec, "replace"))
    first = max(0, offset - limit // 3)
    shown = text[first : first + limit]
    return ("..." if first else "") + shown.strip() + ("..." if first + limit < len(text) else "")
