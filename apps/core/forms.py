"""Form fields shared by the apps' pages."""

from __future__ import annotations

import json
from typing import Any

from django import forms


class JSONTextField(forms.CharField):
    """A textarea holding JSON; cleans to the parsed value (errors name line and column)."""

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
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
