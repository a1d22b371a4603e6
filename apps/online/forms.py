"""The portal's forms: a scoring rule, an alert, a backfill range."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from apps.evals.models import EvalSet
from apps.online.models import Alert
from apps.online.services import check_rule_fields
from evalcore.errors import InvalidInputError


class RuleForm(forms.Form):
    """A new scoring rule; scorer specs one per line (``exact_match``, ``numeric_match:tolerance=0.01``
    or a JSON object), attributes as a JSON object, tags comma-separated."""

    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    service = forms.CharField(required=False, max_length=200)
    target = forms.CharField(required=False, max_length=200)
    model = forms.CharField(required=False, max_length=200)
    attributes = forms.CharField(required=False, help_text='JSON object, e.g. {"deployment.environment": "prod"}')
    tags = forms.CharField(required=False, help_text="comma-separated; a trace must carry all of them")
    sample_rate = forms.FloatField(initial=1.0, min_value=0.0, max_value=1.0)
    window_minutes = forms.IntegerField(initial=60, min_value=1, max_value=366 * 24 * 60)
    scorers = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), help_text="one scorer spec per line")
    reference_set = forms.ModelChoiceField(queryset=EvalSet.objects.order_by("name"), required=False)

    def clean_attributes(self) -> dict[str, Any]:
        text = self.cleaned_data["attributes"].strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("give a JSON object of attribute name -> value")
        return value

    def clean_tags(self) -> list[str]:
        return [t.strip() for t in self.cleaned_data["tags"].split(",") if t.strip()]

    def clean_scorers(self) -> list[Any]:
        specs: list[Any] = []
        for line in self.cleaned_data["scorers"].splitlines():
            line = line.strip()
            if not line:
                continue
            specs.append(json.loads(line) if line.startswith("{") else line)
        try:
            check_rule_fields({"scorers": specs})
        except InvalidInputError as exc:
            raise forms.ValidationError(str(exc)) from None
        return specs


class AlertForm(forms.ModelForm[Alert]):
    """A new alert on a rule's score."""

    class Meta:
        model = Alert
        fields = [
            "name",
            "score_name",
            "direction",
            "min_effect",
            "alpha",
            "min_n",
            "consecutive",
            "baseline_hours",
            "baseline_start",
            "baseline_end",
            "webhook_url",
            "payload_format",
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("baseline_start"), data.get("baseline_end")
        if (start is None) != (end is None):
            raise forms.ValidationError("a pinned baseline needs both its start and its end")
        if start is not None and end is not None and end <= start:
            raise forms.ValidationError("the pinned baseline must end after it starts")
        alpha = data.get("alpha")
        if alpha is not None and not 0 < alpha < 1:
            self.add_error("alpha", "alpha is a level in (0, 1)")
        return data


class BackfillForm(forms.Form):
    """A past time range to apply a rule to."""

    start = forms.DateTimeField()
    end = forms.DateTimeField()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("start") and data.get("end") and data["end"] <= data["start"]:
            raise forms.ValidationError("the range must end after it starts")
        return data
