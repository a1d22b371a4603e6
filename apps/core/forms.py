"""Form fields shared by the apps' pages."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from evalcore.strictjson import NonFiniteNumber, refuse_non_finite


class JSONTextField(forms.CharField):
    """A textarea holding JSON; cleans to the parsed value (errors name line and column).

    ``NaN`` / ``Infinity`` (which Python's json module would read) are refused: they are not
    JSON, and the JSON columns the value goes to refuse them.
    """

    widget = forms.Textarea(attrs={"rows": 8, "class": "mono"})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)

    def clean(self, value: Any) -> Any:
        text = super().clean(value)
        if text in ("", None):
            return None
        try:
            return json.loads(text, parse_constant=refuse_non_finite)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
        except NonFiniteNumber as exc:
            raise forms.ValidationError(f"not valid JSON ({exc} found: NaN / Infinity are refused)") from None
        except RecursionError:
            raise forms.ValidationError("not valid JSON here: nested too deeply") from None


MAX_INT_DIGITS = 18
"""The most digits a number typed into a page may have (any database integer fits)."""


def ascii_int(text: Any, *, negative: bool = False) -> int | None:
    """The integer a text spells in ASCII decimal digits (``0``-``9``, a leading ``-`` when
    ``negative``), else ``None``.

    ``str.isdigit`` and ``int`` also take other scripts' digits (``"١"`` is 1) and
    superscripts (``"²"`` passes ``isdigit`` and fails ``int``), and ``int`` refuses more than
    4,300 digits: a number typed into a page is ASCII and at most :data:`MAX_INT_DIGITS` digits
    long, or it is not a number.
    """
    raw = str(text if text is not None else "").strip()
    digits = raw[1:] if negative and raw.startswith("-") else raw
    if not digits or len(digits) > MAX_INT_DIGITS or not (digits.isascii() and digits.isdigit()):
        return None
    return int(raw)


def _ascii_number(field: forms.Field, value: Any) -> None:
    """Refuse a typed number with a character outside ASCII or too many characters."""
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if not text.isascii() or len(text) > 4 * MAX_INT_DIGITS:
            raise forms.ValidationError(field.error_messages["invalid"], code="invalid")


class AsciiIntegerField(forms.IntegerField):
    """An integer typed in ASCII digits, at most :data:`MAX_INT_DIGITS` of them (Django's own
    field takes ``"١"`` as 1 and any length)."""

    def to_python(self, value: Any) -> int | None:
        _ascii_number(self, value)
        if isinstance(value, str) and value.strip() and ascii_int(value.strip(), negative=True) is None:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


class AsciiFloatField(forms.FloatField):
    """A number typed in ASCII (Django's own field takes other scripts' digits)."""

    def to_python(self, value: Any) -> Any:
        _ascii_number(self, value)
        return super().to_python(value)
