"""Form fields shared by the apps' pages."""

from __future__ import annotations

import json
from typing import Any

from django import forms


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
            return json.loads(text, parse_constant=_refuse_constant)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
        except _NonFinite as exc:
            raise forms.ValidationError(f"not valid JSON ({exc} found: NaN / Infinity are refused)") from None
        except RecursionError:
            raise forms.ValidationError("not valid JSON here: nested too deeply") from None


class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)
